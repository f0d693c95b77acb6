package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/mysql"
)

// Querier runs one query and returns its rows as text; a nil cell is SQL
// NULL. The proxy backs it with a backend connection, data movement with
// its own connections to the servers it copies between.
type Querier interface {
	Query(sql string) ([][][]byte, error)
}

// This file is the one place that reads table definitions from a server:
// the columns (Read), the primary key's order (ReadPrimaryKey), the CREATE
// TABLE statement (ReadCreate) and the AUTO_INCREMENT counter
// (ReadAutoIncrement). Names are written with mysql.QuoteString and
// mysql.QuoteIdent, so the queries read the same under every sql_mode.

// Read reads the definition of the physical table db.table through q and
// returns it named logical (the logical table it belongs to, which may be
// the same). It returns nil, nil when the table does not exist.
func Read(q Querier, db, table, logical string) (*Table, error) {
	rows, err := q.Query("SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_KEY, EXTRA " +
		"FROM information_schema.COLUMNS WHERE " + where(db, table) + " ORDER BY ORDINAL_POSITION")
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

// ReadPrimaryKey returns the names of db.table's primary key columns in
// key order; none when it has no primary key (or does not exist).
// information_schema.COLUMNS marks the key's columns but not their order,
// and a join of the two views scans every table's keys, so this is a
// query of its own.
func ReadPrimaryKey(q Querier, db, table string) ([]string, error) {
	rows, err := q.Query("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE " + where(db, table) +
		" AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION")
	if err != nil {
		return nil, fmt.Errorf("schema: reading the primary key of %s.%s: %w", db, table, err)
	}
	var names []string
	for _, r := range rows {
		if len(r) != 1 {
			return nil, fmt.Errorf("schema: reading the primary key of %s.%s: %d columns in a row", db, table, len(r))
		}
		names = append(names, string(r[0]))
	}
	return names, nil
}

// ReadCreate returns db.table's CREATE TABLE statement as SHOW CREATE
// TABLE writes it.
func ReadCreate(q Querier, db, table string) (string, error) {
	rows, err := q.Query("SHOW CREATE TABLE " + mysql.QuoteIdent(db) + "." + mysql.QuoteIdent(table))
	if err != nil {
		return "", fmt.Errorf("schema: reading %s.%s: %w", db, table, err)
	}
	if len(rows) != 1 || len(rows[0]) < 2 {
		return "", fmt.Errorf("schema: SHOW CREATE TABLE %s.%s answered no definition", db, table)
	}
	return string(rows[0][1]), nil
}

// ReadAutoIncrement returns db.table's AUTO_INCREMENT counter (the next
// value it would generate); ok is false when the table has none or does
// not exist.
func ReadAutoIncrement(q Querier, db, table string) (next uint64, ok bool, err error) {
	rows, err := q.Query("SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE " + where(db, table))
	if err != nil {
		return 0, false, fmt.Errorf("schema: reading the AUTO_INCREMENT of %s.%s: %w", db, table, err)
	}
	if len(rows) != 1 || len(rows[0]) != 1 || rows[0][0] == nil {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(string(rows[0][0]), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("schema: the AUTO_INCREMENT of %s.%s is %q", db, table, rows[0][0])
	}
	return v, true, nil
}

// where selects db.table in an information_schema view.
func where(db, table string) string {
	return "TABLE_SCHEMA = " + mysql.QuoteString(db, "utf8mb4") + " AND TABLE_NAME = " + mysql.QuoteString(table, "utf8mb4")
}
