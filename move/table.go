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
	cols []string // stored columns, in table order
	pk   []int    // indexes into cols of the primary key columns
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

// rowCRC is the expression checksumming one row: a CRC-32 of every
// stored column with its NULL flag, so NULL and ” differ.
func (d *tableDef) rowCRC() string {
	parts := make([]string, 0, 2*len(d.cols))
	for _, c := range d.cols {
		parts = append(parts, mysql.QuoteIdent(c))
	}
	for _, c := range d.cols {
		parts = append(parts, "ISNULL("+mysql.QuoteIdent(c)+")")
	}
	return "CRC32(CONCAT_WS('|', " + strings.Join(parts, ", ") + "))"
}
