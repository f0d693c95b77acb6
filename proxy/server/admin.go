package server

import (
	"net/http"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/admin"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/xa"
)

// The operator's side (admin HTTP, the status page, admin SQL) is
// proxy/admin's; what it reads and acts on, the server gives it here.

// newConsole returns the admin console over s.
func newConsole(s *Server, configPath string) *admin.Console {
	env := admin.Env{
		Log:          s.log,
		Config:       func() (*config.Config, uint64) { lv := s.lv(); return lv.cfg, lv.version },
		Nodes:        s.allNodes,
		Metrics:      s.metrics.Metrics,
		Stats:        s.Stats,
		Sessions:     s.count,
		Queries:      s.queries.Load,
		Draining:     s.draining.Load,
		Reload:       s.Reload,
		ReloadFile:   s.reloadFile,
		ConfigPath:   configPath,
		ReplicaAdded: func() { s.hasReplicas.Store(true) },
		Plans:        planner{s},
	}
	if s.flows != nil {
		env.Workflows = s.flows
	}
	return admin.New(env)
}

// collector is what each Prometheus scrape reads of s.
func collector(s *Server) metrics.Collector {
	return metrics.Collector{
		Stats: s.Stats,
		XA: func() (xa.Stats, bool) {
			if s.xa == nil {
				return xa.Stats{}, false
			}
			return s.xa.Stats(), true
		},
		Deadlock: s.DeadlockStats,
		Workflows: func() []move.Status {
			if s.flows == nil {
				return nil
			}
			return s.flows.m.Running()
		},
	}
}

// AdminHandler serves the admin listener (web_addr): /healthz (no
// authentication), /stats, /metrics, /status, /admin/..., /changes and
// /debug/pprof/ (HTTP basic authentication with web_user/web_password
// when web_user is set). See proxy/admin.
func (s *Server) AdminHandler() http.Handler { return s.console.HTTP() }

// MetricsHandler serves /metrics alone, for prometheus_addr.
func (s *Server) MetricsHandler() http.Handler { return s.console.MetricsHTTP() }

// adminSQL answers sql when it is admin SQL (admin.Console.SQL); handled
// is false otherwise.
func (h *handler) adminSQL(sql, keyword string) (handled bool, err error) {
	c := h.c
	res, handled, err := c.srv.console.SQL(admin.Session{User: c.user, Log: c.log}, sql, keyword)
	switch {
	case !handled || err != nil:
		return handled, err
	case res.Columns != nil:
		return true, engine.WriteResultSet(c, res.Columns, res.Rows)
	}
	return true, c.writeOK(mysql.OK{AffectedRows: res.Affected, Status: c.status(), Info: res.Info})
}
