package move

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
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

// readDef reads db.table's definition from c.
func readDef(c *client.Conn, db, table string) (*tableDef, error) {
	r, err := c.Execute(fmt.Sprintf("SELECT COLUMN_NAME, COLUMN_KEY, EXTRA, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
		stringLit(db), stringLit(table)))
	if err != nil {
		return nil, err
	}
	d := &tableDef{}
	types := map[string]string{}
	for i := range r.Values {
		name, _ := r.GetString(i, 0)
		extra, _ := r.GetString(i, 2)
		typ, _ := r.GetString(i, 3)
		if strings.Contains(strings.ToUpper(extra), "GENERATED") {
			continue
		}
		types[name] = strings.ToLower(typ)
		d.cols = append(d.cols, name)
	}
	if len(d.cols) == 0 {
		return nil, fmt.Errorf("table %s.%s does not exist", db, table)
	}
	k, err := c.Execute(fmt.Sprintf("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
		stringLit(db), stringLit(table)))
	if err != nil {
		return nil, err
	}
	for i := range k.Values {
		name, _ := k.GetString(i, 0)
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
	sc, err := c.Execute("SHOW CREATE TABLE " + qualified(db, table))
	if err != nil {
		return nil, err
	}
	create, _ := sc.GetString(0, 1)
	d.create = autoIncRE.ReplaceAllString(create, "")
	return d, nil
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
		q[i] = quoteName(c)
	}
	return strings.Join(q, ", ")
}

// pkList is the quoted primary key column list.
func (d *tableDef) pkList() string {
	q := make([]string, len(d.pk))
	for i, j := range d.pk {
		q[i] = quoteName(d.cols[j])
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
		parts = append(parts, quoteName(c))
	}
	for _, c := range d.cols {
		parts = append(parts, "ISNULL("+quoteName(c)+")")
	}
	return "CRC32(CONCAT_WS('|', " + strings.Join(parts, ", ") + "))"
}

func stringLit(s string) string {
	var b strings.Builder
	quoteString(&b, s)
	return strings.TrimPrefix(b.String(), "_binary")
}
