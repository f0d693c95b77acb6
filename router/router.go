package router

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions for the parser

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// Router holds the compiled routing configuration. It is immutable after
// New and safe for concurrent use.
type Router struct {
	schemas map[string]*userRules // by user
}

// userRules is one compiled schema_list entry: the shard rules and plans
// of one user (named apart from config.Schema and package schema, which
// mean other things).
type userRules struct {
	user  string
	def   string   // default node
	nodes []string // the schema's nodes, in config order

	defPlan   *Plan            // Forward, unchanged, to the default node
	hints     map[string]*Plan // node name -> Forward, unchanged, to that node
	dbPlan    *Plan            // Fanout, unchanged, to every node (CREATE/DROP DATABASE)
	rules     map[tableKey]*rule
	ruleNames []string           // distinct table names with rules, for parse-failure checks
	byDB      map[string][]*rule // rules per database, in config order
	cache     *planCache         // nil when disabled or without rules
	fallback  bool               // reads no merge answers run as an exact fallback
}

type tableKey struct{ db, table string }

// New compiles the routing configuration. cfg must have passed Validate.
func New(cfg *config.Config) (*Router, error) {
	r := &Router{schemas: make(map[string]*userRules, len(cfg.Schemas))}
	for i := range cfg.Schemas {
		s := &cfg.Schemas[i]
		sc := &userRules{
			user:    s.User,
			def:     s.Default,
			nodes:   s.Nodes,
			defPlan: &Plan{Kind: Forward, Targets: []Target{{Node: s.Default}}},
			hints:   make(map[string]*Plan, len(s.Nodes)),
			dbPlan:  &Plan{Kind: Fanout},
			rules:   make(map[tableKey]*rule, len(s.Shard)),
			byDB:    make(map[string][]*rule),
		}
		for _, n := range s.Nodes {
			sc.hints[n] = &Plan{Kind: Forward, Targets: []Target{{Node: n}}}
			sc.dbPlan.Targets = append(sc.dbPlan.Targets, Target{Node: n})
		}
		for k := range s.Shard {
			sr := &s.Shard[k]
			ru, err := compileRule(sr, s.Default)
			if err != nil {
				return nil, fmt.Errorf("router: schema_list[%d].shard[%d] (%s.%s): %w", i, k, sr.DB, sr.Table, err)
			}
			key := tableKey{sr.DB, sr.Table}
			if _, dup := sc.rules[key]; dup {
				return nil, fmt.Errorf("router: schema_list[%d].shard[%d]: %s.%s has two rules", i, k, sr.DB, sr.Table)
			}
			sc.rules[key] = ru
			sc.byDB[sr.DB] = append(sc.byDB[sr.DB], ru)
			if !contains(sc.ruleNames, sr.Table) {
				sc.ruleNames = append(sc.ruleNames, sr.Table)
			}
		}
		if len(sc.rules) > 0 {
			sc.cache = newPlanCache(cfg.PlanCacheSize)
		}
		sc.fallback = cfg.FallbackMaxRows > 0
		r.schemas[s.User] = sc
	}
	return r, nil
}

// Prepared checks a statement for COM_STMT_PREPARE: the proxy forwards
// binary prepared statements unchanged to the schema's default node, so
// a statement that would run anywhere else, or on a sharded table, is
// refused with 1235 rather than run against the wrong table.
func (r *Router) Prepared(sql string, s Session) error {
	sc := r.schemas[s.User]
	if sc == nil || len(sc.rules) == 0 {
		return nil
	}
	p, err := sc.plan(sql, s, nil)
	if err == nil && p.Kind == Forward && p.Targets[0].Node == sc.def && p.Targets[0].SQL == "" && hintIn(sql, sc.hints) == nil {
		return nil
	}
	tables := ""
	if p != nil && len(p.Tables) > 0 {
		tables = " (" + strings.Join(p.Tables, ", ") + ")"
	}
	return notSupported("binary prepared statements on sharded tables%s are not supported yet: shardgate would run them on the default node; send the statement as text (for Go's driver: interpolateParams=true)", tables)
}

// Session is what Route needs to know about the client's session.
type Session struct {
	User string // login user: selects the schema
	DB   string // current database, for unqualified table names
	Mode Mode   // how the session's sql_mode reads text
	// Catalog answers the column order of logical tables (an INSERT
	// without a column list) and, when it is also an IntegerTyper, the
	// type of shard keys; a table it has not read has a key of unknown
	// type (a string compared with it may be a number: unreadKeys). nil
	// routes as kingshard does, strings by their own hash.
	Catalog Catalog
	// IDs hands out global sequence values for INSERTs into tables whose
	// rule has a sequence: values the caller reserved before routing
	// (Reserved), never a source that does I/O, so that routing stays
	// pure. With nil, such an INSERT gets a *NeedIDsError saying how many
	// values of which sequence to reserve before routing it again.
	IDs IDSource

	// explain is set while planning the statement of an EXPLAIN that does
	// not run it (EXPLAIN FORMAT='shard', EXPLAIN without ANALYZE): its
	// sequence values are looked at (IDPeeker, NeedIDsError.Peek), never
	// taken, so the next INSERT gets them.
	explain bool
}

// Catalog is what the router asks of the logical schema (package schema
// behind it, in the proxy).
type Catalog interface {
	// Columns returns the column names of logical table db.table in table
	// order; ok is false when the table is not known.
	Columns(db, table string) (cols []string, ok bool)
}

// IDSource hands out the values of global sequences that were reserved
// before routing (in memory: Route does no I/O).
type IDSource interface {
	// NextIDs fills ids with the next values of the sequence of logical
	// table db.table, in increasing order.
	NextIDs(db, table string, ids []uint64) error
}

// IDPeeker is an IDSource that can also tell the values NextIDs would
// hand out next without taking them. The statement of an EXPLAIN that does
// not run it is planned with PeekIDs when the source has it (Reserved
// values are given, not taken, either way).
type IDPeeker interface {
	PeekIDs(db, table string, ids []uint64) error
}

// NeedSchemaError is the error of a statement the router could plan only
// knowing the columns of db.table, which its Catalog does not: the caller
// may read the table's definition and route again. Otherwise it is the
// client's error (Unwrap).
type NeedSchemaError struct {
	DB, Table string
	Err       *mysql.SQLError
}

func (e *NeedSchemaError) Error() string { return e.Err.Error() }
func (e *NeedSchemaError) Unwrap() error { return e.Err }

// NeedIDsError is the error of an INSERT that needs N values of the global
// sequence of logical table DB.Table, which its Session's IDs did not
// hand out: the caller reserves them (sequence values come from the
// sidecar database, at execution time, outside the router) and routes
// again with them (Reserved). Without a source of values it is the
// client's error (Unwrap).
type NeedIDsError struct {
	DB, Table string
	N         int
	// Peek is set when the statement is only explained (EXPLAIN
	// FORMAT='shard', EXPLAIN without ANALYZE): the values are shown, not
	// stored, so the caller gives the values the sequence would hand out
	// next without taking them (EXPLAIN runs nothing and consumes nothing).
	Peek bool
	Err  *mysql.SQLError
}

func (e *NeedIDsError) Error() string { return e.Err.Error() }
func (e *NeedIDsError) Unwrap() error { return e.Err }

// Reserved is an IDSource of values reserved before routing: each call
// hands out its first values, so routing the same statement again gives
// the same plan.
type Reserved []uint64

// PeekIDs is NextIDs: reserved values are not taken by either.
func (r Reserved) PeekIDs(db, table string, ids []uint64) error { return r.NextIDs(db, table, ids) }

// NextIDs fills ids with the first len(ids) reserved values.
func (r Reserved) NextIDs(db, table string, ids []uint64) error {
	if len(ids) > len(r) {
		return mysql.NewError(mysql.ErUnknownError, "%d values of the sequence of %s.%s reserved, %d needed", len(r), db, table, len(ids))
	}
	copy(ids, r)
	return nil
}

// TableInfo describes one logical table with a rule, for the proxy's
// schema and sequence set-up.
type TableInfo struct {
	DB, Table string
	Global    bool
	// Subtables are the physical tables (for a global table, the table on
	// each of its nodes).
	Subtables []Target
	// Sequence is the column a global sequence fills ("" when none) and
	// SequenceBlock the ids one reservation takes.
	Sequence      string
	SequenceBlock int
}

// Tables lists the tables with rules of every schema, each once.
func (r *Router) Tables() []TableInfo {
	var out []TableInfo
	seen := map[tableKey]bool{}
	for _, sc := range r.schemas {
		for k, ru := range sc.rules {
			if seen[k] {
				continue
			}
			seen[k] = true
			ti := TableInfo{DB: ru.db, Table: ru.table, Global: !ru.sharded(), Sequence: ru.seq, SequenceBlock: ru.seqBlock}
			if ru.sharded() {
				for _, sub := range ru.subs {
					ti.Subtables = append(ti.Subtables, Target{Node: sub.node, Subtable: sub.name})
				}
			} else {
				for _, n := range ru.nodes {
					ti.Subtables = append(ti.Subtables, Target{Node: n, Subtable: ru.table})
				}
			}
			out = append(out, ti)
		}
	}
	return out
}

// parsers holds idle parsers: a parser.Parser is not safe for concurrent
// use and is costly to build.
var parsers = sync.Pool{New: func() any { return parser.New() }}

// Route plans a statement (the text of one COM_QUERY). The returned plan
// must not be modified: plans without sharded tables are shared.
//
// Before parsing, it recognises EXPLAIN FORMAT='shard' and kingshard node
// hints (a /*node*/ comment before or right after the first keyword sends
// the statement unchanged to that node). A schema without shard rules gets
// its default plan without parsing and without allocating.
func (r *Router) Route(sql string, s Session) (*Plan, error) {
	return r.route(sql, s, nil, false)
}

// route plans sql; args are the bound values of a prepared statement's
// placeholders when prepared is set.
func (r *Router) route(sql string, s Session, args []Arg, prepared bool) (*Plan, error) {
	sc := r.schemas[s.User]
	if sc == nil {
		return nil, mysql.NewError(mysql.ErDBAccessDenied, "no schema is configured for user '%s' in schema_list", s.User)
	}
	if inner, ok := explainShard(sql); ok {
		s.explain = true
		p, err := r.route(inner, s, args, prepared)
		if err != nil {
			return nil, err
		}
		out := explainPlan(p, inner)
		s.explain = false
		out.Cache, out.CacheTable = r.cacheVerdict(inner, s, args)
		return out, nil
	}
	if p := hintIn(sql, sc.hints); p != nil {
		return p, nil
	}
	if len(sc.rules) == 0 {
		return sc.defPlan, nil
	}
	if rest, into, ok := splitIntoVars(sql, s.Mode); ok {
		p, err := r.route(rest, s, args, prepared)
		if err != nil {
			return nil, err
		}
		return withIntoVars(p, into)
	}
	var p *Plan
	ok := false
	if prepared {
		p, ok = sc.cachedArgs(sql, s, args)
	} else {
		p, ok = sc.cachedText(sql, s)
	}
	if ok {
		sc.cache.hits.Add(1)
		return p, nil
	}
	if sc.cache != nil {
		sc.cache.misses.Add(1)
	}
	if prepared {
		return sc.plan(sql, s, argsBinder(args))
	}
	return sc.plan(sql, s, nil)
}

// explainPlan is the plan of EXPLAIN FORMAT='shard': the inner plan's
// targets with their SQL spelled out.
func explainPlan(p *Plan, inner string) *Plan {
	out := &Plan{Kind: Explain, Renames: p.Renames, Tables: p.Tables, Copies: p.Copies}
	for _, g := range p.Gathers {
		// An exact fallback first copies these into temporary tables.
		for _, t := range g.Subtables {
			t.SQL = "/* copied into temporary table " + g.Temp + " */ " + t.SQL
			out.Targets = append(out.Targets, t)
		}
	}
	for _, t := range p.Targets {
		if t.SQL == "" {
			t.SQL = inner
		}
		out.Targets = append(out.Targets, t)
	}
	return out
}

// DefaultNode returns the default node of user's schema.
func (r *Router) DefaultNode(user string) (string, bool) {
	sc := r.schemas[user]
	if sc == nil {
		return "", false
	}
	return sc.def, true
}

// Sharded reports whether the user's schema has shard rules.
func (r *Router) Sharded(user string) bool {
	sc := r.schemas[user]
	return sc != nil && len(sc.rules) > 0
}

// plan parses sql and plans it.
func (sc *userRules) plan(sql string, s Session, bind binder) (*Plan, error) {
	if s.Mode&ModeForeign != 0 {
		for _, name := range sc.ruleNames {
			if mentionsWord(sql, name) {
				return nil, notSupported("statements on sharded table %s are not supported by shardgate under sql_mode=ORACLE: its parser does not read that grammar", name)
			}
		}
		return sc.defPlan, nil
	}
	stmts, release, err := parsePooled(sql, s.Mode)
	defer release()
	if err != nil {
		for _, name := range sc.ruleNames {
			if mentionsWord(sql, name) && sc.mayNameRule(sql, name, s.DB) {
				if what := storedProgram(sql); what != "" {
					return nil, notSupported("%s that names sharded table %s is not supported: a stored program runs inside one server (%s), which holds only some of the table's rows; create it without the sharded table, or run its statements through the proxy", what, name, sc.def)
				}
				return nil, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: %s (shardgate must understand every statement on a sharded table, here %s, and could not parse this one)",
					strings.TrimSpace(err.Error()), name)
			}
		}
		// Syntax the parser does not know (MariaDB extensions) still
		// works on tables without rules.
		return sc.defPlan, nil
	}
	switch len(stmts) {
	case 0:
		return sc.defPlan, nil
	case 1:
		return sc.planStmt(stmts[0], sql, s, bind)
	}
	for _, st := range stmts {
		if sc.walk(st, s, bind).ruleInsts() {
			return nil, notSupported("multi-statements on sharded tables are not supported yet; send the statements one by one")
		}
	}
	return sc.defPlan, nil
}

// parsePooled parses sql with a parser from the pool. The syntax tree may
// point into the parser's memory: release returns the parser to the pool
// and must be called only once the tree is no longer used. A parser that
// panicked is dropped, its state unknown.
func parsePooled(sql string, mode Mode) (stmts []ast.StmtNode, release func(), err error) {
	p := parsers.Get().(*parser.Parser)
	p.SetSQLMode(mode.parserMode())
	stmts, err = parse(p, sql)
	if err == errParserPanic {
		return nil, func() {}, err
	}
	return stmts, func() { parsers.Put(p) }, err
}

// errParserPanic reports a panic inside the parser.
var errParserPanic = errors.New("the statement is beyond what the SQL parser handles (for example a numeric literal of more than 81 digits)")

// parse parses sql. The parser's value package (test_driver) panics on
// some valid input, notably decimal literals of more than 81 digits, so a
// panic here is turned into a parse failure instead of reaching the
// connection boundary: such text then goes unchanged to the default node
// unless it names a sharded table, like any text the parser rejects.
func parse(p *parser.Parser, sql string) (stmts []ast.StmtNode, err error) {
	defer func() {
		if recover() != nil {
			stmts, err = nil, errParserPanic
		}
	}()
	stmts, _, err = p.Parse(sql, "", "")
	if err == nil {
		numberMarkers(stmts)
	}
	return stmts, err
}

// numberMarkers sets each ? placeholder's Order, its position among the
// statement's placeholders in text order: the parser records only the
// offset (TiDB's planner numbers them later), and binding a prepared
// statement's values goes by Order.
func numberMarkers(stmts []ast.StmtNode) {
	for _, st := range stmts {
		f := &markerFinder{}
		st.Accept(f)
		for i, m := range f.markers {
			m.Order = i
		}
	}
}

// planStmt plans one parsed statement.
func (sc *userRules) planStmt(n ast.StmtNode, sql string, s Session, bind binder) (*Plan, error) {
	switch x := n.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		if strings.EqualFold(s.DB, "information_schema") || containsFold(sql, "information_schema") {
			if p, ok, err := sc.planInfoSchema(x, s); ok {
				return p, err
			}
		}
		p, err := sc.planSelect(x, s, bind)
		var se *mysql.SQLError
		if err != nil && bind == nil && sc.fallback && errors.As(err, &se) && se.Code == mysql.ErNotSupported {
			// No streaming merge gives this answer: one server, over a
			// copy of the rows, does (also SQL_CALC_FOUND_ROWS: the
			// session reads FOUND_ROWS() there right after).
			if fp, ok := sc.planFallback(sql, s); ok {
				return fp, nil
			}
		}
		return p, err
	case *ast.InsertStmt:
		return sc.planInsert(x, s, bind)
	case *ast.UpdateStmt:
		return sc.planUpdate(x, s, bind)
	case *ast.DeleteStmt:
		return sc.planDelete(x, s, bind)
	case *ast.CreateTableStmt, *ast.AlterTableStmt, *ast.DropTableStmt, *ast.TruncateTableStmt,
		*ast.CreateIndexStmt, *ast.DropIndexStmt, *ast.RenameTableStmt:
		return sc.planDDL(x, sql, s)
	case *ast.CreateDatabaseStmt, *ast.DropDatabaseStmt:
		return sc.dbPlan, nil
	case *ast.LockTablesStmt:
		return sc.planLock(x, s)
	case *ast.LoadDataStmt:
		return sc.planLoad(x, s)
	case *ast.ShowStmt:
		return sc.planShow(x, x, s)
	case *ast.ExplainStmt:
		return sc.planExplain(x, sql, s, bind)
	case *ast.PrepareStmt:
		// PREPARE name FROM 'text': the text runs later, on the
		// connection that prepared it, so it must not name sharded tables
		// (PREPARE FROM @variable cannot be checked and runs as is).
		if x.SQLText != "" {
			if p, err := sc.plan(x.SQLText, s, nil); err != nil || p != sc.defPlan {
				return nil, notSupported("PREPARE of a statement on a sharded table is not supported yet; send the statement as text")
			}
		}
	}
	st := sc.walk(n, s, bind)
	if st.ruleInsts() {
		if _, ok := n.(*ast.CreateViewStmt); ok {
			return nil, notSupported("CREATE VIEW over sharded table %s is not supported: a view runs inside one server (%s), which holds only some of the table's rows; query the table through the proxy instead", st.tables()[0], sc.def)
		}
		return nil, notSupported("%s statements on sharded table %s are not supported yet", Classify(sql, s.Mode).Keyword, st.tables()[0])
	}
	return sc.defPlan, nil
}

// mayNameRule reports whether text the parser could not read, which
// mentions table name, may mean a table with a rule: one in the session's
// database, or in a database the text mentions too.
func (sc *userRules) mayNameRule(sql, name, db string) bool {
	for rdb, rules := range sc.byDB {
		for _, r := range rules {
			if r.table == name && (rdb == db || mentionsWord(sql, rdb)) {
				return true
			}
		}
	}
	return false
}

// storedProgram names the kind of stored program a CREATE statement
// defines (CREATE [OR REPLACE] [DEFINER=...] FUNCTION, PROCEDURE, TRIGGER,
// EVENT, also inside executable comments), or "" for any other text.
func storedProgram(sql string) string {
	if kw, _ := firstKeyword(sql); kw != "CREATE" {
		return ""
	}
	up := strings.ToUpper(sql)
	first, kind := len(up), ""
	for _, w := range []string{"FUNCTION", "PROCEDURE", "TRIGGER", "EVENT"} {
		if i := indexWord(up, w); i >= 0 && i < first {
			first, kind = i, w
		}
	}
	if kind == "" || indexWord(up[:first], "TABLE") >= 0 || indexWord(up[:first], "VIEW") >= 0 {
		return ""
	}
	return "CREATE " + kind
}

// indexWord returns the index of word in s as a whole word, or -1.
func indexWord(s, word string) int {
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return -1
		}
		j += i
		before := j == 0 || !isWordByte(s[j-1])
		after := j+len(word) == len(s) || !isWordByte(s[j+len(word)])
		if before && after {
			return j
		}
		i = j + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80
}

// SplitStatements returns the statements of a multi-statement text, each
// as its own text; ok is false when the text does not parse.
func SplitStatements(sql string, m Mode) (texts []string, ok bool) {
	if m&ModeForeign != 0 {
		return nil, false
	}
	stmts, release, err := parsePooled(sql, m)
	defer release()
	if err != nil {
		return nil, false
	}
	return statementTexts(stmts)
}

// statementTexts returns each parsed statement's own text, without its
// semicolon; ok is false when one is empty.
func statementTexts(stmts []ast.StmtNode) (texts []string, ok bool) {
	for _, st := range stmts {
		t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(st.Text()), ";"))
		if t == "" {
			return nil, false
		}
		texts = append(texts, t)
	}
	return texts, true
}

// SplitSharded returns the statements of a multi-statement text that
// touches sharded tables, each as its own text, so the session can route
// and run them one by one (Route refuses such a text as a whole). ok is
// false for any other text.
func (r *Router) SplitSharded(sql string, s Session) (texts []string, ok bool) {
	sc := r.schemas[s.User]
	if sc == nil || len(sc.rules) == 0 {
		return nil, false
	}
	stmts, release, err := parsePooled(sql, s.Mode)
	defer release()
	if s.Mode&ModeForeign == 0 && err != nil {
		return sc.splitWithInto(sql, s)
	}
	if s.Mode&ModeForeign != 0 || len(stmts) < 2 {
		return nil, false
	}
	if texts, ok = statementTexts(stmts); !ok {
		return nil, false
	}
	for _, st := range stmts {
		if sc.walk(st, s, nil).ruleInsts() {
			return texts, true
		}
	}
	return nil, false
}

// splitWithInto is SplitSharded for a text the parser rejects because a
// SELECT in it assigns variables (INTO @v, which the parser reads only
// for files): it is split at its semicolons, and each statement must
// parse, without its INTO clause, as one statement. A text with an
// executable comment, or any other text the parser rejects (a stored
// program's body), is not split.
func (sc *userRules) splitWithInto(sql string, s Session) (texts []string, ok bool) {
	if HasExecutableComment(sql) {
		return nil, false
	}
	toks, ok := lexTokens(sql, s.Mode)
	if !ok {
		return nil, false
	}
	sharded, into, start := false, false, 0
	one := func(end int) bool {
		q := strings.TrimSpace(sql[start:end])
		rest, _, hasInto := splitIntoVars(q, s.Mode)
		if !hasInto {
			rest = q
		}
		stmts, release, err := parsePooled(rest, s.Mode)
		defer release()
		if q == "" || err != nil || len(stmts) != 1 {
			return false
		}
		sharded = sharded || sc.walk(stmts[0], s, nil).ruleInsts()
		into = into || hasInto
		texts = append(texts, q)
		return true
	}
	for _, t := range toks {
		if t.kind == 'p' && sql[t.start] == ';' {
			if !one(t.start) {
				return nil, false
			}
			start = t.end
		}
	}
	if strings.TrimSpace(sql[start:]) != "" && !one(len(sql)) {
		return nil, false
	}
	return texts, sharded && into && len(texts) > 1
}

// containsFold reports whether s contains substr, ASCII case-insensitively.
func containsFold(s, substr string) bool {
	n := len(substr)
	for i := 0; i+n <= len(s); i++ {
		if strings.EqualFold(s[i:i+n], substr) {
			return true
		}
	}
	return false
}
