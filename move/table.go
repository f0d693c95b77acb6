package move

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/schema"
)

// tableDef is what the copy needs of a table: its stored columns in order
// (generated columns are left to the server) and its primary key.
type tableDef struct {
	cols  []string // stored columns, in table order
	types []string // their data types (schema.Column.DataType: "int", "float", "enum", ...)
	pk    []int    // indexes into cols of the primary key columns
	// intPK: a single integer primary key, compared and bucketed as a number.
	intPK bool
	// create is the table's CREATE TABLE (without AUTO_INCREMENT=).
	create string
}

// readDef reads db.table's definition from c (package schema reads it).
func readDef(c *client.Conn, db, table string) (*tableDef, error) {
	q := querier{c}
	t, err := schema.Read(q, db, table, table)
	if err != nil {
		return nil, err
	}
	d := &tableDef{}
	types := map[string]string{}
	if t != nil {
		for i := range t.Columns {
			col := &t.Columns[i]
			if col.Generated() {
				continue
			}
			types[col.Name] = col.DataType()
			d.cols = append(d.cols, col.Name)
			d.types = append(d.types, col.DataType())
		}
	}
	if len(d.cols) == 0 {
		return nil, fmt.Errorf("table %s.%s does not exist", db, table)
	}
	pk, err := schema.ReadPrimaryKey(q, db, table)
	if err != nil {
		return nil, err
	}
	for _, name := range pk {
		at := -1
		for j, c := range d.cols {
			if strings.EqualFold(c, name) {
				at = j
			}
		}
		if at < 0 {
			return nil, fmt.Errorf("table %s.%s: primary key column %s is generated; rows cannot be moved by it", db, table, name)
		}
		d.pk = append(d.pk, at)
	}
	if len(d.pk) == 0 {
		return nil, fmt.Errorf("table %s.%s has no primary key: rows can only be moved by one", db, table)
	}
	if len(d.pk) == 1 {
		switch types[d.cols[d.pk[0]]] {
		case "tinyint", "smallint", "mediumint", "int", "bigint":
			d.intPK = true
		}
	}
	create, err := schema.ReadCreate(q, db, table)
	if err != nil {
		return nil, err
	}
	d.create = autoIncRE.ReplaceAllString(create, "")
	return d, nil
}

// querier is a schema.Querier over a copying connection.
type querier struct{ c *client.Conn }

func (q querier) Query(sql string) ([][][]byte, error) {
	r, err := q.c.Execute(sql)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rows := make([][][]byte, len(r.Values))
	for i := range r.Values {
		rows[i] = make([][]byte, len(r.Values[i]))
		for j := range r.Values[i] {
			rows[i][j] = cell(&r.Values[i][j])
		}
	}
	return rows, nil
}

var autoIncRE = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// createAs returns d's CREATE TABLE for db.table, IF NOT EXISTS.
func (d *tableDef) createAs(db, table string) string {
	// SHOW CREATE TABLE starts "CREATE TABLE `name` (".
	i := strings.Index(d.create, "(")
	return "CREATE TABLE IF NOT EXISTS " + qualified(db, table) + " " + d.create[i:]
}

// colList is the quoted, comma-separated column list.
func (d *tableDef) colList() string {
	q := make([]string, len(d.cols))
	for i, c := range d.cols {
		q[i] = mysql.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// selectList is the column list the copy reads: colList, except that an
// INET6 or UUID column is read as its 16 stored bytes (its text form,
// written back as the _binary literal every value is written as, is not
// 16 bytes and would be refused: non-strict mode stores NULL), and a
// FLOAT as the DOUBLE it is (the text protocol prints a FLOAT with 6
// digits, which would write back another FLOAT).
func (d *tableDef) selectList() string {
	q := make([]string, len(d.cols))
	for i, c := range d.cols {
		q[i] = mysql.QuoteIdent(c)
		switch d.types[i] {
		case "inet6", "uuid":
			q[i] = "CAST(" + q[i] + " AS BINARY(16))"
		case "float":
			q[i] = "CAST(" + q[i] + " AS DOUBLE)"
		}
	}
	return strings.Join(q, ", ")
}

// pkList is the quoted primary key column list.
func (d *tableDef) pkList() string {
	q := make([]string, len(d.pk))
	for i, j := range d.pk {
		q[i] = mysql.QuoteIdent(d.cols[j])
	}
	return strings.Join(q, ", ")
}

// col returns the index of column name (case-insensitive), -1 if absent.
func (d *tableDef) col(name string) int {
	for i, c := range d.cols {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// canonical is the SQL expression of column i's value in a canonical
// binary form, N for NULL. A number, date or time is its text and a comma
// (no such text holds a comma or is N); any other value (strings, binary
// strings, BIT, JSON, geometries, INET6, UUID) is its byte length, a colon
// and its stored bytes (CAST AS BINARY: no collation, character set or PAD
// SPACE rule can make two different values equal). So NULL, ” and 'N'
// all differ, and no value can be read as the start of the next column's.
// A FLOAT is written as the DOUBLE it is (its own text has 6 digits, which
// two FLOATs can share), an ENUM or SET as its index or bit mask (an
// ENUM's empty error value and an empty member print alike), TIMESTAMPs
// in the session's UTC.
func (d *tableDef) canonical(i int) string {
	c := mysql.QuoteIdent(d.cols[i])
	switch d.types[i] {
	case "float":
		c = "CAST(" + c + " AS DOUBLE)"
	case "enum", "set":
		c = "(" + c + " + 0)"
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric", "double", "real",
		"year", "date", "time", "datetime", "timestamp":
	default:
		return "IFNULL(CONCAT(LENGTH(" + c + "), ':', CAST(" + c + " AS BINARY)), 'N')"
	}
	return "IFNULL(CONCAT(" + c + ", ','), 'N')"
}

// rowImage is the expression of a whole row in canonical form.
func (d *tableDef) rowImage() string {
	parts := make([]string, len(d.cols))
	for i := range d.cols {
		parts[i] = d.canonical(i)
	}
	return "CONCAT(" + strings.Join(parts, ", ") + ")"
}

// keyHash is the expression hashing a row's primary key (canonical form),
// for bucketing rows by a key that is not a single integer.
func (d *tableDef) keyHash() string {
	parts := make([]string, len(d.pk))
	for i, j := range d.pk {
		parts[i] = d.canonical(j)
	}
	return "CRC32(CONCAT(" + strings.Join(parts, ", ") + "))"
}
