package move

import (
	"reflect"
	"slices"

	"github.com/shardgate/shardgate/config"
)

// StreamCutover is a resharding workflow's cutover as the change streams
// order it (kafkasink.Cutover, which the caller builds from it).
type StreamCutover struct {
	Table     string            // the logical table, db.table
	Subtables []string          // the new rule's subtables, db.name
	Applied   map[string]string // per old node, the cutover's position (State.Applied)
}

// ForStreams reads what the change streams need of the workflows ws: the
// old and new rules of every workflow (their subtables name the logical
// table, changestream.NamesWith) and the cutovers of the resharding
// workflows that have one (switched, or completed since).
func ForStreams(ws []*Workflow) (rules []config.ShardRule, cutovers []StreamCutover) {
	for _, w := range ws {
		rules = append(rules, w.Spec.From, w.Spec.To)
		if w.Spec.Kind != KindReshard || len(w.State.Applied) == 0 ||
			w.State.Phase != PhaseSwitched && w.State.Phase != PhaseCompleted {
			continue
		}
		c := StreamCutover{Table: w.Spec.Logical(), Applied: w.State.Applied}
		n := 0
		for _, l := range w.Spec.To.Locations {
			n += l
		}
		for i := range n {
			c.Subtables = append(c.Subtables, w.Spec.To.DB+"."+w.Spec.To.Subtable(i))
		}
		cutovers = append(cutovers, c)
	}
	return rules, cutovers
}

// AddRules appends to known the rules of more it does not hold yet (a rule
// without a table, as a workflow's empty rule, is left out) and reports
// whether it appended any.
func AddRules(known []config.ShardRule, more []config.ShardRule) ([]config.ShardRule, bool) {
	added := false
	for _, rule := range more {
		if rule.Table == "" {
			continue
		}
		if !slices.ContainsFunc(known, func(o config.ShardRule) bool { return reflect.DeepEqual(o, rule) }) {
			known = append(known, rule)
			added = true
		}
	}
	return known, added
}
