package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// A reload from the file (reloadFile) holds the shard rules that would
// move rows: those changes are a reshard workflow's (shardgate apply,
// plan.go), never a reload's.

// holdMoves returns cfg with the rule changes that would move rows from
// old undone, and names them: a rule of an existing schema that differs
// from the one in force (but for the generation, as plan.go's sameRule)
// becomes the one in force; a rule in force the file dropped is put back;
// a new rule is left out when its table has rows on the nodes in force
// (checkNoRows; a rule on a node the reload adds is checked by the reload
// itself). cfg is not changed.
func holdMoves(old, cfg *config.Config, nodes *nodeSet) (*config.Config, []string) {
	c := *cfg
	c.Schemas = slices.Clone(cfg.Schemas)
	var waiting []string
	for i := range c.Schemas {
		sc := &c.Schemas[i]
		prev := old.SchemaFor(sc.User)
		if prev == nil {
			continue // a new user's schema: compareConfigs and plan.go judge it
		}
		sc.Shard = slices.Clone(sc.Shard)
		for k := range sc.Shard {
			nr := &sc.Shard[k]
			pr := ruleIn(prev, nr.DB, nr.Table)
			if pr == nil {
				continue
			}
			if !sameRule(pr, nr) {
				waiting = append(waiting, fmt.Sprintf("%s.%s (user %s): the file's rule (%s) moves its rows; the rule in force (%s) stays until shardgate apply",
					nr.DB, nr.Table, sc.User, describeRule(nr), describeRule(pr)))
			}
			*nr = *pr
		}
		for k := range prev.Shard {
			pr := prev.Shard[k]
			if ruleIn(sc, pr.DB, pr.Table) == nil {
				sc.Shard = append(sc.Shard, pr)
				waiting = append(waiting, fmt.Sprintf("%s.%s (user %s): the file has no rule for it; the rule in force (%s) stays (a reload keeps the rule of a table with rows; shardgate apply refuses its removal)",
					pr.DB, pr.Table, sc.User, describeRule(&pr)))
			}
		}
	}
	ch, _ := compareConfigs(old, &c)
	lookup := func(name string) *backend.Node { return nodes.byName[name] }
	for _, ar := range ch.addRules {
		known := !slices.ContainsFunc(ar.rule.Nodes, func(n string) bool { return lookup(n) == nil })
		if sc := c.SchemaFor(ar.user); sc == nil || !known || lookup(sc.Default) == nil {
			continue
		}
		err := checkNoRows(&c, []addedRule{ar}, lookup)
		if err == nil {
			continue
		}
		for i := range c.Schemas {
			if sc := &c.Schemas[i]; sc.User == ar.user {
				sc.Shard = slices.DeleteFunc(slices.Clone(sc.Shard), func(r config.ShardRule) bool { return r.DB == ar.rule.DB && r.Table == ar.rule.Table })
			}
		}
		waiting = append(waiting, fmt.Sprintf("%s.%s (user %s): the new rule is left out: %v (shardgate apply refuses it too: import the table with shardgate import, or shard it while it is empty)",
			ar.rule.DB, ar.rule.Table, ar.user, err))
	}
	return &c, waiting
}

// describeRule is a rule's placement in a few words: type(key) and its
// subtables.
func describeRule(r *config.ShardRule) string {
	if t := move.Targets(*r); len(t) > 0 {
		return fmt.Sprintf("%s(%s) %s", r.Type, r.Key, strings.Join(t, ","))
	}
	return fmt.Sprintf("%s(%s) on %s", r.Type, r.Key, strings.Join(r.Nodes, ","))
}
