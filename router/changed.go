package router

import (
	"errors"

	"github.com/pingcap/tidb/pkg/parser/ast"
	tmysql "github.com/pingcap/tidb/pkg/parser/mysql"
)

// ChangedTable is a table a DDL statement changes.
type ChangedTable struct{ DB, Name string }

// ErrNotParsed is a statement the parser refused (or panicked on).
var ErrNotParsed = errors.New("the statement does not parse")

// ChangedTables returns the tables a DDL statement changes, read from the
// parsed statement (a table named in a comment or a string is not one):
// CREATE TABLE, ALTER TABLE (both names of a RENAME TO), CREATE INDEX,
// DROP INDEX, DROP TABLE (not of views or temporary tables), TRUNCATE and
// RENAME TABLE (old and new names); db is the default database. dropDB is
// the database of a DROP DATABASE, whose tables only the caller can name.
// Any other statement changes none. err is ErrNotParsed when the parser
// refuses sql: the caller must not guess what it names.
func ChangedTables(sql, db string, mode Mode) (out []ChangedTable, dropDB string, err error) {
	stmts, release, err := parsePooled(sql, mode)
	defer release()
	if err != nil {
		return nil, "", ErrNotParsed
	}
	add := func(t *ast.TableName) {
		if t == nil {
			return
		}
		in := t.Schema.O
		if in == "" {
			in = db
		}
		for _, have := range out {
			if have.DB == in && have.Name == t.Name.O {
				return
			}
		}
		out = append(out, ChangedTable{in, t.Name.O})
	}
	for _, st := range stmts {
		switch s := st.(type) {
		case *ast.CreateTableStmt:
			add(s.Table)
		case *ast.AlterTableStmt:
			add(s.Table)
			for _, spec := range s.Specs {
				if spec.Tp == ast.AlterTableRenameTable {
					add(spec.NewTable)
				}
			}
		case *ast.DropTableStmt:
			if s.IsView || s.TemporaryKeyword != ast.TemporaryNone {
				continue
			}
			for _, t := range s.Tables {
				add(t)
			}
		case *ast.TruncateTableStmt:
			add(s.Table)
		case *ast.RenameTableStmt:
			for _, tt := range s.TableToTables {
				add(tt.OldTable)
				add(tt.NewTable)
			}
		case *ast.CreateIndexStmt:
			add(s.Table)
		case *ast.DropIndexStmt:
			add(s.Table)
		case *ast.DropDatabaseStmt:
			dropDB = s.Name.O
		}
	}
	return out, dropDB, nil
}

// ModeOfBits is the Mode of a sql_mode given as the server's bit set (as a
// binary log's query event carries it, Q_SQL_MODE_CODE): MariaDB's bits
// for these flags are MySQL's, which the parser's SQLMode uses too.
func ModeOfBits(bits uint64) Mode {
	sm := tmysql.SQLMode(bits)
	var m Mode
	for _, f := range []struct {
		bit  tmysql.SQLMode
		mode Mode
	}{
		{tmysql.ModeANSIQuotes, ModeANSIQuotes},
		{tmysql.ModeNoBackslashEscapes, ModeNoBackslashEscapes},
		{tmysql.ModePipesAsConcat, ModePipesAsConcat},
		{tmysql.ModeHighNotPrecedence, ModeHighNotPrecedence},
		{tmysql.ModeIgnoreSpace, ModeIgnoreSpace},
	} {
		if sm&f.bit != 0 {
			m |= f.mode
		}
	}
	return m
}
