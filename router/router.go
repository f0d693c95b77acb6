package router

import (
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// Router holds the compiled routing configuration. Safe for concurrent use.
type Router struct {
	defaults map[string]*Plan // schema user -> plan to the schema's default node
}

// New compiles the routing configuration.
func New(cfg *config.Config) (*Router, error) {
	r := &Router{defaults: make(map[string]*Plan, len(cfg.Schemas))}
	for i := range cfg.Schemas {
		s := &cfg.Schemas[i]
		r.defaults[s.User] = &Plan{Kind: Forward, Targets: []Target{{Node: s.Default}}}
	}
	return r, nil
}

// Session is what Route needs to know about the client's session.
type Session struct {
	User string // login user: selects the schema
	DB   string // current database, for unqualified table names
}

// Route plans a statement. Until shard rules are executed, every statement
// goes unchanged to the user's schema default node.
func (r *Router) Route(sql string, s Session) (*Plan, error) {
	p, ok := r.defaults[s.User]
	if !ok {
		return nil, mysql.NewError(mysql.ErDBAccessDenied, "no schema is configured for user '%s' in schema_list", s.User)
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
