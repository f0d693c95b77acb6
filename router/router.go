package router

import (
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// Plan is what a statement executes as: plain data that the session reads
// and runs. A plan never executes itself and is never modified after Route
// returns it (plans may be shared between sessions).
type Plan struct {
	Targets []Target
}

// Target is one backend execution of a plan.
type Target struct {
	Node string // node name from ks.yaml
	// SQL is the physical statement; "" means the client's statement is
	// sent unchanged (so the raw packet can be forwarded).
	SQL string
}

// Router holds the compiled routing configuration. Safe for concurrent use.
type Router struct {
	defaults map[string]*Plan // schema user -> plan to the schema's default node
}

// New compiles the routing configuration.
func New(cfg *config.Config) (*Router, error) {
	r := &Router{defaults: make(map[string]*Plan, len(cfg.Schemas))}
	for i := range cfg.Schemas {
		s := &cfg.Schemas[i]
		r.defaults[s.User] = &Plan{Targets: []Target{{Node: s.Default}}}
	}
	return r, nil
}

// Route plans a statement sent by user. Until shard rules are executed,
// every statement goes unchanged to the user's schema default node.
func (r *Router) Route(user string, sql string) (*Plan, error) {
	p, ok := r.defaults[user]
	if !ok {
		return nil, mysql.NewError(mysql.ErDBAccessDenied, "no schema is configured for user '%s' in schema_list", user)
	}
	return p, nil
}

// DefaultNode returns the default node of user's schema.
func (r *Router) DefaultNode(user string) (string, bool) {
	p, ok := r.defaults[user]
	if !ok {
		return "", false
	}
	return p.Targets[0].Node, true
}
