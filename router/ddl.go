package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/shardgate/shardgate/mysql"
)

// ruleOf returns the rule of a table named in DDL, or nil.
func (sc *userRules) ruleOf(tn *ast.TableName, s Session) *rule {
	if tn == nil {
		return nil
	}
	db := tn.Schema.O
	if db == "" {
		db = s.DB
	}
	return sc.rules[tableKey{db, tn.Name.O}]
}

// planDDL plans table DDL. On a sharded table it fans out to every
// subtable on its node; on a global table to every node of its rule,
// unchanged.
func (sc *userRules) planDDL(n ast.StmtNode, sql string, s Session) (*Plan, error) {
	st := sc.walk(n, s, nil) // also drops default charset introducers before restore
	if !st.ruleInsts() {
		return sc.defPlan, nil
	}
	var tn *ast.TableName
	switch x := n.(type) {
	case *ast.CreateTableStmt:
		tn = x.Table
		r := sc.ruleOf(tn, s)
		if r == nil {
			return sc.refersToSharded("CREATE TABLE", tn, st)
		}
		switch {
		case x.TemporaryKeyword != ast.TemporaryNone:
			return nil, notSupported("CREATE TEMPORARY TABLE %s would shadow sharded table %s; use another name", tn.Name.O, r.table)
		case x.ReferTable != nil:
			return nil, notSupported("CREATE TABLE %s LIKE ... is not supported for sharded table %s yet; write the column definitions", r.table, r.table)
		case x.Select != nil:
			return nil, notSupported("CREATE TABLE %s ... AS SELECT is not supported for sharded table %s", r.table, r.table)
		}
		for _, c := range x.Constraints {
			if err := sc.checkForeignKey(r, c, s); err != nil {
				return nil, err
			}
		}
	case *ast.AlterTableStmt:
		tn = x.Table
		if r := sc.ruleOf(tn, s); r != nil {
			for _, sp := range x.Specs {
				if sp.Tp == ast.AlterTableRenameTable {
					return nil, notSupported("renaming table %s, which has a shard rule, is not supported", r.table)
				}
				if sp.Tp == ast.AlterTableAddConstraint {
					if err := sc.checkForeignKey(r, sp.Constraint, s); err != nil {
						return nil, err
					}
				}
			}
		} else {
			return sc.refersToSharded("ALTER TABLE", tn, st)
		}
	case *ast.TruncateTableStmt:
		tn = x.Table
	case *ast.CreateIndexStmt:
		tn = x.Table
	case *ast.DropIndexStmt:
		tn = x.Table
	case *ast.RenameTableStmt:
		return nil, notSupported("RENAME TABLE of table %s, which has a shard rule, is not supported", st.tables()[0])
	case *ast.DropTableStmt:
		return sc.planDrop(x, st, s)
	}
	r := sc.ruleOf(tn, s)
	if r == nil {
		return sc.defPlan, nil
	}
	p := &Plan{Kind: Fanout, Tables: []string{r.table}}
	if !r.sharded() {
		for _, node := range r.nodes {
			p.Targets = append(p.Targets, Target{Node: node, Subtable: r.table})
		}
		return p, nil
	}
	for _, sub := range r.subs {
		tn.Name = ast.NewCIStr(sub.name)
		q, err := restore(n, nil, s.Mode)
		if err != nil {
			return nil, err
		}
		p.Targets = append(p.Targets, Target{Node: sub.node, Subtable: sub.name, SQL: dropEnforced(q)})
	}
	return p, nil
}

// checkForeignKey refuses a foreign key of table r (a CREATE TABLE
// constraint or ALTER TABLE ADD) that the fan-out could not create
// everywhere: one to a sharded table, one to a table missing on a node
// where r has a subtable or copy (tables without rules live only on the
// default node), and a named one where a node holds several subtables of
// r (InnoDB constraint names are unique per database, and those
// subtables share one).
func (sc *userRules) checkForeignKey(r *rule, c *ast.Constraint, s Session) error {
	if c == nil || c.Tp != ast.ConstraintForeignKey || c.Refer == nil {
		return nil
	}
	fr := sc.ruleOf(c.Refer.Table, s)
	if fr != nil && fr.sharded() {
		return notSupported("foreign key from %s to sharded table %s is not supported", r.table, fr.table)
	}
	// where lists r's nodes with the subtable or copy on each.
	type place struct{ node, what string }
	var where []place
	if r.sharded() {
		for _, sub := range r.subs {
			where = append(where, place{sub.node, "subtable " + sub.name})
		}
	} else {
		for _, n := range r.nodes {
			where = append(where, place{n, "a copy of " + r.table})
		}
	}
	for _, w := range where {
		switch {
		case fr == nil && w.node != sc.def:
			return notSupported("foreign key from %s to %s is not supported: %s has no shard rule and lives on the default node %s, but %s is on %s",
				r.table, c.Refer.Table.Name.O, c.Refer.Table.Name.O, sc.def, w.what, w.node)
		case fr != nil && !fr.hasNode(w.node):
			return notSupported("foreign key from %s to global table %s is not supported: %s has no copy on %s, where %s is",
				r.table, fr.table, fr.table, w.node, w.what)
		}
	}
	if c.Name != "" && r.sharded() {
		seen := map[string]bool{}
		for _, sub := range r.subs {
			if seen[sub.node] {
				return notSupported("named foreign key %s on sharded table %s is not supported: constraint names are unique per database and node %s holds several subtables of %s; leave the constraint unnamed",
					c.Name, r.table, sub.node, r.table)
			}
			seen[sub.node] = true
		}
	}
	return nil
}

// dropEnforced removes the ENFORCED attribute the parser's restore writes
// after every CHECK constraint (MySQL 8 syntax): MariaDB rejects it and
// always enforces CHECK constraints. Restored SQL quotes every name, so a
// bare ENFORCED outside quotes is that keyword. NOT ENFORCED is kept, for
// the server to judge as if the client had sent it directly.
func dropEnforced(q string) string {
	const kw = ") ENFORCED"
	if !strings.Contains(q, kw) {
		return q
	}
	var b strings.Builder
	for i := 0; i < len(q); {
		switch c := q[i]; c {
		case '\'', '`', '"':
			j := i + 1
			for j < len(q) {
				if q[j] == '\\' && c != '`' {
					j += 2
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(q))
			b.WriteString(q[i:j])
			i = j
			continue
		case ')':
			if strings.HasPrefix(q[i:], kw) && (i+len(kw) == len(q) || !isIdent(q[i+len(kw)])) {
				b.WriteByte(')')
				i += len(kw)
				continue
			}
		}
		b.WriteByte(q[i])
		i++
	}
	return b.String()
}

// refersToSharded plans DDL on a table without a rule that names other
// tables (LIKE, AS SELECT, foreign keys): fine unless one is sharded.
func (sc *userRules) refersToSharded(what string, tn *ast.TableName, st *stmt) (*Plan, error) {
	for _, in := range st.insts {
		if in.rule != nil && in.rule.sharded() {
			return nil, notSupported("%s %s refers to sharded table %s (LIKE, AS SELECT or a foreign key), which is not supported", what, tn.Name.O, in.rule.table)
		}
	}
	return sc.defPlan, nil
}

// planDrop plans DROP TABLE: each sharded table is dropped on every
// subtable, each global table on every node of its rule, the other tables
// together on the default node.
func (sc *userRules) planDrop(x *ast.DropTableStmt, st *stmt, s Session) (*Plan, error) {
	if x.IsView || x.TemporaryKeyword != ast.TemporaryNone {
		return sc.defPlan, nil
	}
	p := &Plan{Kind: Fanout, Tables: st.tables()}
	all := x.Tables
	defer func() { x.Tables = all }()
	one := func(tn *ast.TableName, node, sub string) error {
		x.Tables = []*ast.TableName{tn}
		q, err := restore(x, nil, s.Mode)
		if err != nil {
			return err
		}
		p.Targets = append(p.Targets, Target{Node: node, Subtable: sub, SQL: q})
		return nil
	}
	var plain []*ast.TableName
	plainAt := -1
	for _, tn := range all {
		r := sc.ruleOf(tn, s)
		switch {
		case r == nil:
			if plainAt < 0 {
				plainAt = len(p.Targets)
			}
			plain = append(plain, tn)
		case !r.sharded():
			for _, node := range r.nodes {
				if err := one(tn, node, r.table); err != nil {
					return nil, err
				}
			}
		default:
			for _, sub := range r.subs {
				c := *tn
				c.Name = ast.NewCIStr(sub.name)
				if err := one(&c, sub.node, sub.name); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(plain) > 0 {
		x.Tables = plain
		q, err := restore(x, nil, s.Mode)
		if err != nil {
			return nil, err
		}
		t := Target{Node: sc.def, SQL: q}
		p.Targets = append(p.Targets[:plainAt], append([]Target{t}, p.Targets[plainAt:]...)...)
	}
	return p, nil
}

// planShow plans SHOW statements and DESCRIBE; outer is the statement to
// restore (the ShowStmt, or the ExplainStmt around it for DESCRIBE).
func (sc *userRules) planShow(x *ast.ShowStmt, outer ast.StmtNode, s Session) (*Plan, error) {
	switch x.Tp {
	case ast.ShowTables:
		return sc.showTables(x, s)
	case ast.ShowTableStatus:
		return sc.showTableStatus(x, s)
	case ast.ShowColumns, ast.ShowIndex, ast.ShowCreateTable:
	default:
		return sc.defPlan, nil
	}
	if x.Table == nil {
		return sc.defPlan, nil
	}
	db := x.DBName
	if db == "" {
		db = x.Table.Schema.O
	}
	if db == "" {
		db = s.DB
	}
	r := sc.rules[tableKey{db, x.Table.Name.O}]
	if r == nil {
		return sc.defPlan, nil
	}
	if !r.sharded() {
		return &Plan{Kind: Forward, Targets: []Target{{Node: r.readNode, Subtable: r.table}}, Tables: []string{r.table}}, nil
	}
	sc.walk(outer, s, nil) // drops default charset introducers
	sub := r.subs[0]
	x.Table.Name = ast.NewCIStr(sub.name)
	q, err := restore(outer, nil, s.Mode)
	if err != nil {
		return nil, err
	}
	return &Plan{
		Kind:    Forward,
		Targets: []Target{{Node: sub.node, Subtable: sub.name, SQL: q}},
		Renames: []Rename{{Physical: sub.name, Logical: r.table}},
		Tables:  []string{r.table},
	}, nil
}

// showTables plans SHOW [FULL] TABLES on a database with rules. The
// default node answers for the tables without rules and its own
// subtables; every other node that holds subtables or global copies of
// the database's rules is asked for those by name only, since any other
// table there cannot be used through the proxy (statements on tables
// without rules go to the default node). The executor maps subtables
// back to their logical table. A LIKE pattern is matched against the
// logical names here: the default node gets it as a WHERE that also lets
// the matching tables' subtables through (and keeps other tables'
// subtables out), the other nodes only the names of matching tables.
func (sc *userRules) showTables(x *ast.ShowStmt, s Session) (*Plan, error) {
	db := x.DBName
	if db == "" {
		db = s.DB
	}
	rules := sc.byDB[db]
	if db == "" || len(rules) == 0 {
		return sc.defPlan, nil
	}
	if x.Where != nil {
		return nil, notSupported("SHOW TABLES ... WHERE on database %s, which has sharded tables, is not supported yet; use SHOW TABLES LIKE", db)
	}
	p := &Plan{Kind: ShowTables}
	p.Tables, p.Renames = logicalNames(rules)
	match := func(*rule) bool { return true }
	var pat string
	if x.Pattern != nil {
		pv, ok := x.Pattern.Pattern.(ast.ValueExpr)
		if !ok {
			return nil, notSupported("SHOW TABLES LIKE needs a string pattern")
		}
		pat = pv.GetDatumString()
		match = func(r *rule) bool { return likeMatch(r.table, pat, x.Pattern.Escape) }
	}
	col := mysql.QuoteIdent("Tables_in_" + db)
	show := func(where string) string {
		var b strings.Builder
		b.WriteString("SHOW ")
		if x.Full {
			b.WriteString("FULL ")
		}
		b.WriteString("TABLES FROM " + mysql.QuoteIdent(db) + " WHERE " + where)
		return b.String()
	}
	// q is the default node's statement; "" sends the client's text.
	// With a pattern, the default node's subtables of matching tables
	// are let through and those of other tables held back, since the
	// pattern is about logical names.
	var q string
	if x.Pattern != nil {
		var in, out []string
		for _, r := range rules {
			if !r.sharded() {
				continue
			}
			for _, sub := range r.subs {
				switch {
				case sub.node != sc.def:
				case match(r):
					in = append(in, quoteString(sub.name))
				case likeMatch(sub.name, pat, x.Pattern.Escape):
					out = append(out, quoteString(sub.name))
				}
			}
		}
		if len(in) > 0 || len(out) > 0 {
			where := col + " LIKE " + quoteString(pat)
			if x.Pattern.Escape != '\\' {
				where += " ESCAPE " + quoteString(string(x.Pattern.Escape))
			}
			if len(out) > 0 {
				where += " AND " + col + " NOT IN (" + strings.Join(out, ",") + ")"
			}
			if len(in) > 0 {
				where += " OR " + col + " IN (" + strings.Join(in, ",") + ")"
			}
			q = show(where)
		}
	}
	for _, n := range sc.nodes {
		if n == sc.def {
			p.Targets = append(p.Targets, Target{Node: n, SQL: q})
			continue
		}
		names := heldOn(rules, n, match)
		if len(names) > 0 {
			p.Targets = append(p.Targets, Target{Node: n, SQL: show(col + " IN (" + strings.Join(names, ",") + ")")})
		}
	}
	return p, nil
}

// showTableStatus plans SHOW TABLE STATUS on a database with rules: the
// default node's tables, and on every other node the subtables and global
// copies it holds; the executor sums each sharded table's subtables into
// one row under its logical name (Rows, Data_length, Index_length,
// Data_free; the largest Auto_increment, the first Create_time, the last
// Update_time), keeps one copy of a global table, and matches the LIKE
// pattern (Plan.Pattern) against the logical names.
func (sc *userRules) showTableStatus(x *ast.ShowStmt, s Session) (*Plan, error) {
	db := x.DBName
	if db == "" {
		db = s.DB
	}
	rules := sc.byDB[db]
	if db == "" || len(rules) == 0 {
		return sc.defPlan, nil
	}
	if x.Where != nil {
		return nil, notSupported("SHOW TABLE STATUS ... WHERE on database %s, which has sharded tables, is not supported yet; use SHOW TABLE STATUS LIKE", db)
	}
	p := &Plan{Kind: ShowTableStatus, Pattern: "%", Escape: '\\'}
	if x.Pattern != nil {
		pv, ok := x.Pattern.Pattern.(ast.ValueExpr)
		if !ok {
			return nil, notSupported("SHOW TABLE STATUS LIKE needs a string pattern")
		}
		p.Pattern, p.Escape = pv.GetDatumString(), x.Pattern.Escape
	}
	p.Tables, p.Renames = logicalNames(rules)
	show := "SHOW TABLE STATUS FROM " + mysql.QuoteIdent(db)
	for _, n := range sc.nodes {
		if n == sc.def {
			p.Targets = append(p.Targets, Target{Node: n, SQL: show})
			continue
		}
		// Copies of global tables the default node has too are dropped by
		// the executor, as duplicates.
		names := heldOn(rules, n, func(*rule) bool { return true })
		if len(names) > 0 {
			p.Targets = append(p.Targets, Target{Node: n, SQL: show + " WHERE `Name` IN (" + strings.Join(names, ",") + ")"})
		}
	}
	return p, nil
}

// logicalNames returns the tables of rules and the renaming of their
// subtables to them, for SHOW results.
func logicalNames(rules []*rule) (tables []string, renames []Rename) {
	for _, r := range rules {
		tables = append(tables, r.table)
		if r.sharded() {
			for _, sub := range r.subs {
				renames = append(renames, Rename{Physical: sub.name, Logical: r.table})
			}
		}
	}
	return tables, renames
}

// heldOn returns, quoted, the physical tables of the rules match accepts
// that node holds: subtables, and copies of global tables.
func heldOn(rules []*rule, node string, match func(*rule) bool) []string {
	var names []string
	for _, r := range rules {
		switch {
		case !match(r):
		case r.sharded():
			for _, sub := range r.subs {
				if sub.node == node {
					names = append(names, quoteString(sub.name))
				}
			}
		case r.hasNode(node):
			names = append(names, quoteString(r.table))
		}
	}
	return names
}

// LikeMatch reports whether name matches a LIKE pattern with escape
// character esc (byte-wise, as SHOW TABLES LIKE matches on case-sensitive
// file systems).
func LikeMatch(name, pattern string, esc byte) bool { return likeMatch(name, pattern, esc) }

// quoteString writes s as a string literal every sql_mode reads alike
// (mysql.QuoteString): the statement runs in the client's session.
func quoteString(s string) string { return mysql.QuoteString(s, "") }
