package changestream

import (
	"encoding/binary"
	"errors"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	tmysql "github.com/pingcap/tidb/pkg/parser/mysql"

	// The parser's value package: without it, parsing a literal panics.
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// A DDL change (Options.DDL) is one statement the binary log carries as a
// query event of its own (a standalone or DDL-flagged GTID group) that
// changes a streamed table: CREATE TABLE, ALTER TABLE (and CREATE INDEX,
// DROP INDEX), DROP TABLE, TRUNCATE TABLE and RENAME TABLE of one of its
// subtables. Which tables a statement changes is read from the statement
// parsed as the server read it (the sql_mode flags that change how text
// reads come with the event), never from its text: a table named in a
// comment or a string is not a table the statement changes. A statement
// the parser refuses is passed on with no Table, whatever it names: the
// reader does not guess.

// ddlTable is one table a statement changes.
type ddlTable struct{ db, name string }

// errNotParsed is a statement the parser refused (or panicked on).
var errNotParsed = errors.New("changestream: the statement does not parse")

// ddlParser reads the statements of query events; one per reader, owned
// by its goroutine (a parser.Parser is not safe for concurrent use).
type ddlParser struct {
	p *parser.Parser
}

// parserFlags are the sql_mode flags that change how statement text reads;
// the parser's SQLMode has MySQL's bit for each, which is also MariaDB's
// and the binary log's (Q_SQL_MODE_CODE).
const parserFlags = tmysql.ModeANSIQuotes | tmysql.ModePipesAsConcat | tmysql.ModeIgnoreSpace |
	tmysql.ModeNoBackslashEscapes | tmysql.ModeHighNotPrecedence

var defaultParserMode, _ = tmysql.GetSQLMode(tmysql.DefaultSQLMode)

// tables returns the tables the statement of e changes (nil: none, or not
// a statement that changes a table), its default database being e's
// schema. dropDB is the database of a DROP DATABASE (whose tables only the
// caller can name). err is errNotParsed when the parser refuses it.
func (d *ddlParser) tables(e *replication.QueryEvent) (out []ddlTable, dropDB string, err error) {
	if d.p == nil {
		d.p = parser.New()
	}
	d.p.SetSQLMode(defaultParserMode | tmysql.SQLMode(sqlMode(e.StatusVars))&parserFlags)
	var stmts []ast.StmtNode
	func() {
		defer func() {
			if recover() != nil {
				err = errNotParsed
			}
		}()
		stmts, _, err = d.p.Parse(string(e.Query), "", "")
	}()
	if err != nil {
		return nil, "", errNotParsed
	}
	schema := string(e.Schema)
	add := func(t *ast.TableName) {
		if t == nil {
			return
		}
		db := t.Schema.O
		if db == "" {
			db = schema
		}
		for _, have := range out {
			if have.db == db && have.name == t.Name.O {
				return
			}
		}
		out = append(out, ddlTable{db, t.Name.O})
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

// sqlMode reads the sql_mode a query event was logged under from its
// status variables: MariaDB writes Q_FLAGS2_CODE (0, 4 bytes) and then
// Q_SQL_MODE_CODE (1, 8 bytes) first; anything else means no mode here (0).
func sqlMode(vars []byte) uint64 {
	for len(vars) > 0 {
		switch vars[0] {
		case 0: // Q_FLAGS2_CODE
			if len(vars) < 5 {
				return 0
			}
			vars = vars[5:]
		case 1: // Q_SQL_MODE_CODE
			if len(vars) < 9 {
				return 0
			}
			return binary.LittleEndian.Uint64(vars[1:])
		default:
			return 0
		}
	}
	return 0
}
