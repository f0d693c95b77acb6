package router

import (
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/shardgate/shardgate/mysql"
)

// Load describes how LOAD DATA LOCAL INFILE into a sharded table splits the
// client's file: the proxy reads the file, cuts it into lines as the server
// would (FIELDS and LINES options), sends each line to the subtable its
// shard key field maps to, and runs the statement once per subtable with
// that subtable's lines as its file. Lines pass unchanged, so every server
// reads its rows exactly as one server would have read the whole file.
type Load struct {
	// Path is the file name the client's statement gives: the proxy asks
	// the client for it, as the server would.
	Path                string
	FieldTerm, LineTerm string // FIELDS TERMINATED BY, LINES TERMINATED BY
	Enclosed, Escaped   byte   // 0 when empty
	Ignore              uint64 // IGNORE n LINES, applied by the proxy once
	// KeyField is the field of a line that holds the shard key.
	KeyField int
	rule     *rule
	numeric  bool // the key column is numeric: its text reads as a number
}

// Subtable returns the index of the plan target (one per subtable, in
// subtable order) that a line whose key field is key (unescaped, without
// enclosure; null for \N) goes to.
func (l *Load) Subtable(key string, null bool) (int, error) {
	v := value{kind: valString, s: key}
	if null {
		v = value{kind: valNull}
	} else if l.numeric {
		if i, err := strconv.ParseInt(strings.TrimSpace(key), 10, 64); err == nil {
			v = value{kind: valInt, i: i}
		} else if u, err := strconv.ParseUint(strings.TrimSpace(key), 10, 64); err == nil {
			v = value{kind: valUint, u: u}
		}
	}
	i, ok, err := l.rule.index(v)
	if err != nil {
		return 0, outOfRange(l.rule, v)
	}
	if !ok {
		return 0, notSupported("LOAD DATA into sharded table %s: the shard key %s of a line is %s, which the %s rule cannot map", l.rule.table, l.rule.key, v, ruleTypeName(l.rule.kind))
	}
	return i, nil
}

// planLoad plans LOAD DATA: unchanged for tables without rules, split by
// shard key for a sharded table (LOCAL files only: the proxy must read
// the rows), to every node for a global table.
func (sc *userRules) planLoad(x *ast.LoadDataStmt, s Session) (*Plan, error) {
	db := x.Table.Schema.O
	if db == "" {
		db = s.DB
	}
	r := sc.rules[tableKey{db, x.Table.Name.O}]
	if r == nil {
		return sc.defPlan, nil
	}
	if x.FileLocRef != ast.FileLocClient {
		return nil, notSupported("LOAD DATA INFILE into %s table %s reads a file on one server; use LOAD DATA LOCAL INFILE (mariadb-import --local), which shardgate splits", ruleTypeName(r.kind), r.table)
	}
	if x.Format != nil || len(x.Options) > 0 {
		return nil, notSupported("LOAD DATA with FORMAT or options into table %s is not supported", r.table)
	}
	l := &Load{Path: x.Path, FieldTerm: "\t", LineTerm: "\n", Escaped: '\\', rule: r}
	if f := x.FieldsInfo; f != nil {
		if f.Terminated != nil {
			l.FieldTerm = *f.Terminated
		}
		if f.Enclosed != nil && *f.Enclosed != "" {
			l.Enclosed = (*f.Enclosed)[0]
		}
		if f.Escaped != nil {
			l.Escaped = 0
			if *f.Escaped != "" {
				l.Escaped = (*f.Escaped)[0]
			}
		}
		if f.DefinedNullBy != nil {
			return nil, notSupported("LOAD DATA ... NULL DEFINED BY into table %s is not supported", r.table)
		}
	}
	if li := x.LinesInfo; li != nil {
		if li.Starting != nil && *li.Starting != "" {
			return nil, notSupported("LOAD DATA ... LINES STARTING BY into sharded table %s is not supported", r.table)
		}
		if li.Terminated != nil {
			l.LineTerm = *li.Terminated
		}
	}
	if l.LineTerm == "" || l.FieldTerm == "" {
		return nil, notSupported("LOAD DATA into sharded table %s with an empty field or line terminator (fixed-width rows) is not supported", r.table)
	}
	if x.IgnoreLines != nil {
		l.Ignore = *x.IgnoreLines
	}
	// Where the key is: the column list (user variables take a field), or
	// every column of the table.
	l.KeyField = -1
	if len(x.ColumnsAndUserVars) > 0 {
		for i, c := range x.ColumnsAndUserVars {
			if c.ColumnName != nil && c.ColumnName.Name.L == r.key {
				l.KeyField = i
			}
		}
	} else if r.sharded() {
		var cols []string
		ok := false
		if s.Catalog != nil {
			cols, ok = s.Catalog.Columns(r.db, r.table)
		}
		if !ok {
			return nil, &NeedSchemaError{DB: r.db, Table: r.table, Err: mysql.NewError(mysql.ErNotSupported,
				"LOAD DATA into sharded table %s without a column list: shardgate does not know the table's columns; name the columns", r.table)}
		}
		for i, c := range cols {
			if strings.EqualFold(c, r.key) {
				l.KeyField = i
			}
		}
	}
	for _, a := range x.ColumnAssignments {
		if a.Column.Name.L == r.key {
			l.KeyField = -1
		}
	}
	if r.sharded() && l.KeyField < 0 {
		return nil, notSupported("LOAD DATA into sharded table %s must read its shard key %s from a field of the file (not SET, not a user variable)", r.table, r.key)
	}
	if r.sharded() && s.Catalog != nil {
		if typer, ok := s.Catalog.(ColumnTyper); ok {
			l.numeric = typer.Numeric(r.db, r.table, r.key)
		}
	}
	// Each target runs the statement on its subtable, without IGNORE (the
	// proxy skipped those lines already).
	ignore := x.IgnoreLines
	name := x.Table.Name
	defer func() { x.IgnoreLines, x.Table.Name = ignore, name }()
	x.IgnoreLines = nil
	p := &Plan{Kind: LoadSplit, Load: l, Tables: []string{r.table}}
	var subs []subtable
	if r.sharded() {
		subs = r.subs
	} else {
		for _, n := range r.nodes {
			subs = append(subs, subtable{name: r.table, node: n})
		}
		p.Copies = true
	}
	for _, sub := range subs {
		x.Table.Name = ast.NewCIStr(sub.name)
		sql, err := restore(x, nil, s.Mode)
		if err != nil {
			return nil, err
		}
		p.Targets = append(p.Targets, Target{Node: sub.node, Subtable: sub.name, SQL: sql})
	}
	return p, nil
}

// ColumnTyper is what a Catalog may also answer: whether a column is
// numeric, so that a key read from text maps as the server stores it.
type ColumnTyper interface {
	Numeric(db, table, column string) bool
}
