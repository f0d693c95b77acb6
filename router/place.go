package router

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/shardgate/shardgate/mysql"
)

// tgt is one planned execution: the node and, per group, the subtable
// index its references are rewritten to.
type tgt struct {
	node string
	gidx []int
}

// structural reports whether the groups form one tree of shard key
// equalities (see the comment at the top of analyze.go) and returns the
// shallowest group.
func (st *stmt) structural() (int, bool) {
	if len(st.groups) == 0 {
		return -1, false
	}
	first := st.groups[0].rule
	g0, min := -1, -1
	for gi, g := range st.groups {
		if g.rule.coloc != first.coloc {
			return -1, false
		}
		switch d := g.sc.depth; {
		case min < 0 || d < min:
			g0, min = gi, d
		}
	}
	for gi, g := range st.groups {
		if gi != g0 && g.sc.depth == min {
			return -1, false
		}
	}
	order := make([]int, 0, len(st.groups))
	for gi := range st.groups {
		if gi != g0 {
			order = append(order, gi)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return st.groups[order[a]].sc.depth < st.groups[order[b]].sc.depth })
	valid := make([]bool, len(st.groups))
	valid[g0] = true
	for _, gi := range order {
		for _, l := range st.groups[gi].links {
			if l.group >= 0 && valid[l.group] {
				valid[gi] = true
				break
			}
		}
		if !valid[gi] {
			return -1, false
		}
	}
	return g0, true
}

// emptyIndex is where a statement whose conditions no subtable can satisfy
// runs (it returns nothing wherever it runs): the first subtable on the
// default node, else the first subtable.
func (st *stmt) emptyIndex(r *rule) int {
	for i, s := range r.subs {
		if s.node == st.sc.def {
			return i
		}
	}
	return 0
}

// place chooses the targets of a statement with sharded references. Several
// targets are returned only when the shallowest group is in the main scope;
// callers decide whether they can run them, then call checkNodes.
func (st *stmt) place() ([]tgt, error) {
	var out []tgt
	if g0, ok := st.structural(); ok {
		g := st.groups[g0]
		idxs := g.keys.members(len(g.rule.subs))
		if len(idxs) == 0 {
			idxs = []int{st.emptyIndex(g.rule)}
		}
		if len(idxs) > 1 && g.sc != st.main {
			in := g.insts[0]
			return nil, notSupported("sharded table %s is read in a subquery, derived table or UNION branch that spans %d subtables; add a condition on its shard key %s there that pins it to one subtable",
				in.rule.table, len(idxs), in.rule.key)
		}
		for _, i := range idxs {
			t := tgt{node: g.rule.subs[i].node, gidx: make([]int, len(st.groups))}
			for k := range t.gidx {
				t.gidx[k] = i
			}
			out = append(out, t)
		}
	} else {
		t := tgt{gidx: make([]int, len(st.groups))}
		for gi, g := range st.groups {
			idxs := g.keys.members(len(g.rule.subs))
			if len(idxs) == 0 {
				idxs = []int{st.emptyIndex(g.rule)}
			}
			if len(idxs) > 1 {
				return nil, st.joinRefusal()
			}
			t.gidx[gi] = idxs[0]
			n := g.rule.subs[idxs[0]].node
			if t.node == "" {
				t.node = n
			} else if n != t.node {
				return nil, notSupported("statement reads sharded tables %s from subtables on different nodes (%s); a statement runs on one node",
					strings.Join(st.shardedNames(), ", "), st.pinnedList(t.gidx))
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// checkNodes runs checkNode on every target.
func (st *stmt) checkNodes(ts []tgt) error {
	for _, t := range ts {
		if err := st.checkNode(t); err != nil {
			return err
		}
	}
	return nil
}

func (st *stmt) shardedNames() []string {
	var out []string
	for _, in := range st.insts {
		if in.sharded() && !contains(out, in.rule.table) {
			out = append(out, in.rule.table)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (st *stmt) pinnedList(gidx []int) string {
	var parts []string
	for gi, g := range st.groups {
		for _, in := range g.insts {
			s := in.rule.subs[gidx[gi]]
			p := s.name + " on " + s.node
			if !contains(parts, p) {
				parts = append(parts, p)
			}
		}
	}
	return strings.Join(parts, ", ")
}

// joinRefusal explains why sharded references cannot run together.
func (st *stmt) joinRefusal() error {
	names := st.shardedNames()
	var first *rule
	for _, g := range st.groups {
		if first == nil {
			first = g.rule
		} else if g.rule.coloc != first.coloc {
			return notSupported("statement combines sharded tables %s, which are not co-located (same type, nodes, locations and ranges), and conditions on their shard keys do not pin each to one subtable on the same node",
				strings.Join(names, ", "))
		}
	}
	if len(names) == 1 {
		in := st.groups[0].insts[0]
		return notSupported("statement uses sharded table %s more than once without joining the references on its shard key %s (a.%s = b.%s), and conditions do not pin each to one subtable on the same node",
			in.rule.table, in.rule.key, in.rule.key, in.rule.key)
	}
	var keys []string
	for _, in := range st.insts {
		if !in.sharded() {
			continue
		}
		if k := in.rule.table + "." + in.rule.key; !contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return notSupported("statement combines sharded tables %s that are not joined on their shard keys (%s) in the same query block, and conditions do not pin each to one subtable on the same node",
		strings.Join(names, ", "), strings.Join(keys, " = "))
}

// checkNode verifies that every other table of the statement exists on
// the target's node: unsharded tables only on the default node, global
// tables on their rule's nodes.
func (st *stmt) checkNode(t tgt) error {
	// where names the target's subtable, for the messages only.
	where := func() string {
		var w string
		for _, in := range st.insts {
			if in.sharded() {
				s := in.rule.subs[t.gidx[in.group]]
				return fmt.Sprintf("subtable %s of %s", s.name, in.rule.table)
			}
			if in.skip {
				w = fmt.Sprintf("subtable %s of %s", in.phys, in.rule.table)
			}
		}
		return w
	}
	for _, in := range st.insts {
		switch {
		case in.plain() && t.node != st.sc.def:
			return notSupported("statement combines %s on node %s with table %s, which is not sharded and lives on the default node %s",
				where(), t.node, in.tn.Name.O, st.sc.def)
		case in.global() && !in.rule.hasNode(t.node):
			return notSupported("statement combines %s on node %s with global table %s, which has no copy on %s",
				where(), t.node, in.rule.table, t.node)
		}
	}
	return nil
}

// qualify prepares the rewrite of qualifiers that name a sharded table
// without an alias (t.col, db.t.col, t.*, DELETE t FROM ...). With alias,
// such tables get their logical name as an alias (FROM t_0001 AS t) and
// db-qualified references lose the database; otherwise (DELETE, the INSERT
// target) the qualifiers are rewritten to the physical name per target.
func (st *stmt) qualify(alias bool) {
	target := func(db, table string, s *scope) *inst {
		in := st.lookup(db, table, s)
		if in == nil || in.rule == nil || !in.rule.sharded() || in.alias() != "" {
			return nil
		}
		return in
	}
	canAlias := func(in *inst) bool { return alias && in.ts != nil && !in.skip }
	type fix struct {
		in  *inst
		col *ast.ColumnName
		w   *ast.WildCardField
	}
	var fixes []fix
	for _, c := range st.cols {
		if in := target(c.col.Schema.O, c.col.Table.O, c.sc); in != nil {
			fixes = append(fixes, fix{in: in, col: c.col})
		}
	}
	for _, w := range st.wilds {
		if in := target(w.w.Schema.O, w.w.Table.O, w.sc); in != nil {
			fixes = append(fixes, fix{in: in, w: w.w})
		}
	}
	for _, d := range st.dels {
		if in := target(d.tn.Schema.O, d.tn.Name.O, d.sc); in != nil {
			in.dquals = append(in.dquals, d.tn)
		}
	}
	for _, f := range fixes {
		switch {
		case canAlias(f.in):
			f.in.needAlias = true
			if f.col != nil {
				f.col.Schema = ast.CIStr{}
			} else {
				f.w.Schema = ast.CIStr{}
			}
		case f.col != nil:
			f.in.quals = append(f.in.quals, f.col)
		default:
			f.in.wquals = append(f.in.wquals, f.w)
		}
	}
	for _, in := range st.insts {
		if in.needAlias {
			in.ts.AsName = ast.NewCIStr(in.tn.Name.O)
		}
	}
}

// render rewrites the sharded references to target t's subtables and
// restores n as SQL.
func (st *stmt) render(n ast.Node, t tgt) (string, error) {
	for _, in := range st.insts {
		if in.rule == nil || !in.rule.sharded() {
			continue
		}
		if !in.skip {
			in.phys = in.rule.subs[t.gidx[in.group]].name
		}
		in.rename(in.phys)
	}
	for _, sp := range st.splits {
		var keep []ast.ExprNode
		for k, i := range sp.idx {
			if i == t.gidx[sp.g] {
				keep = append(keep, sp.orig[k])
			}
		}
		if len(keep) == 0 {
			// The target is there for another condition; a value mapping
			// elsewhere matches no row here, as the whole list did not.
			keep = sp.orig[:1]
		}
		sp.in.List = keep
	}
	return restore(n, st.lockShare, st.sess.Mode)
}

// rename writes physical name phys where the statement names the instance:
// its table name and the qualifiers that refer to it.
func (in *inst) rename(phys string) {
	name := ast.NewCIStr(phys)
	in.tn.Name = name
	for _, q := range in.quals {
		q.Table = name
	}
	for _, w := range in.wquals {
		w.Table = name
	}
	for _, d := range in.dquals {
		d.Name = name
	}
}

// restore turns n back into SQL. MariaDB does not know FOR SHARE, which
// the parser writes for LOCK IN SHARE MODE; the root SELECT gets the old
// spelling back.
func restore(n ast.Node, lockShare *ast.SelectStmt, mode Mode) (string, error) {
	var sb strings.Builder
	var saved *ast.SelectLockInfo
	if lockShare != nil {
		saved, lockShare.LockInfo = lockShare.LockInfo, nil
	}
	err := n.Restore(format.NewRestoreCtx(mode.restoreFlags(), &sb))
	if lockShare != nil {
		lockShare.LockInfo = saved
		sb.WriteString(" LOCK IN SHARE MODE")
	}
	if err != nil {
		return "", mysql.NewError(mysql.ErUnknownError, "shardgate could not rewrite the statement: %v", err)
	}
	return sb.String(), nil
}

// subtableOf is the Target.Subtable of t: the first sharded reference's
// physical table.
func (st *stmt) subtableOf(t tgt) string {
	for _, in := range st.insts {
		if in.skip {
			return in.phys
		}
		if in.sharded() {
			return in.rule.subs[t.gidx[in.group]].name
		}
	}
	return ""
}
