package schema

import (
	"fmt"
	"strings"
)

// Querier runs one query and returns its rows as text; a nil cell is SQL
// NULL. The proxy backs it with a backend connection.
type Querier interface {
	Query(sql string) ([][][]byte, error)
}

// Read reads the definition of the physical table db.table through q and
// returns it named logical (the logical table it belongs to, which may be
// the same). It returns nil, nil when the table does not exist.
func Read(q Querier, db, table, logical string) (*Table, error) {
	rows, err := q.Query("SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_KEY, EXTRA " +
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = " + quote(db) + " AND TABLE_NAME = " + quote(table) +
		" ORDER BY ORDINAL_POSITION")
	if err != nil {
		return nil, fmt.Errorf("schema: reading %s.%s: %w", db, table, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	t := &Table{DB: db, Name: logical}
	for _, r := range rows {
		if len(r) != 6 {
			return nil, fmt.Errorf("schema: reading %s.%s: %d columns in a row of information_schema.COLUMNS", db, table, len(r))
		}
		c := Column{
			Name:       string(r[0]),
			Type:       string(r[1]),
			Nullable:   string(r[2]) == "YES",
			Default:    string(r[3]),
			HasDefault: r[3] != nil,
			Key:        string(r[4]),
			Extra:      string(r[5]),
		}
		if strings.Contains(strings.ToLower(c.Extra), "auto_increment") {
			t.AutoIncrement = c.Name
		}
		t.Columns = append(t.Columns, c)
	}
	return t, nil
}

// quote writes s as an SQL string literal that reads the same under every
// sql_mode: plainly quoted, or in hex when it holds a quote, a backslash
// or NUL.
func quote(s string) string {
	if strings.ContainsAny(s, "\\'\x00") {
		return fmt.Sprintf("CONVERT(X'%x' USING utf8mb4)", s)
	}
	return "'" + s + "'"
}
