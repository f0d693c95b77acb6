package admin

import (
	"crypto/subtle"
	"net/http"
	"net/http/pprof"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/metrics"
)

// Env is what the console needs of the server. The funcs are called at
// each request or statement, so they see the configuration and counts of
// the moment.
type Env struct {
	Log *zap.Logger // required
	// Config returns the configuration in force and its version (1 at
	// start, one more per reload or cutover).
	Config func() (*config.Config, uint64)
	// Nodes returns the nodes in force in configuration order (a reload
	// may add and remove nodes); the slice is not to be changed.
	Nodes   func() []*backend.Node
	Metrics *metrics.Metrics
	Stats   func() metrics.Stats
	// Sessions and Queries are the client sessions open and the statements
	// run so far (show proxy config).
	Sessions func() int
	Queries  func() uint64
	// Draining reports that Shutdown has begun: /healthz answers 503.
	Draining func() bool
	// Reload validates and applies a configuration; ReloadFile reads one
	// first, and returns the shard rule changes it left for shardgate
	// apply (they move rows). ConfigPath is the file POST /admin/reload
	// reads ("" refuses).
	Reload     func(*config.Config) error
	ReloadFile func(path string) (waiting []string, err error)
	ConfigPath string
	// ReplicaAdded is called when admin SQL adds a replica to a node.
	ReplicaAdded func()
	// Workflows runs data movement; nil without the sidecar's node.
	Workflows Workflows
	// Plans computes and applies ks.yaml edits (plan.go); nil refuses.
	Plans Planner
}

// Workflows is the data movement the console starts and commands.
type Workflows interface {
	List() ([]move.Status, error)
	// Spec checks a request against the configuration in force.
	Spec(MoveRequest) (move.Spec, error)
	// Start starts a workflow; statements on its table pass its gate
	// from then on.
	Start(move.Spec) (*move.Workflow, error)
	Command(name, cmd string) error
}

// Console serves the admin HTTP listener and answers admin SQL.
type Console struct {
	env     Env
	flows   flows
	streams streams // the GET /changes streams open (streams.go)
}

// New returns the console of env.
func New(env Env) *Console {
	return &Console{env: env, flows: flows{env.Workflows, env.Log}}
}

// node returns the node named name in force (nil when there is none).
func (c *Console) node(name string) *backend.Node {
	for _, n := range c.env.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *Console) cfg() *config.Config {
	cfg, _ := c.env.Config()
	return cfg
}

// HTTP serves the admin listener (web_addr): /healthz (no
// authentication), / and /status (the status page), /stats, /metrics and
// /debug/pprof/ (HTTP basic
// authentication with web_user/web_password when web_user is set).
func (c *Console) HTTP() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", c.serveHealth)
	mux.Handle("/stats", c.auth(http.HandlerFunc(c.serveStats)))
	mux.Handle("/metrics", c.auth(http.HandlerFunc(c.serveMetrics)))
	mux.Handle("/admin/switch_master", c.auth(http.HandlerFunc(c.serveSwitchMaster)))
	mux.Handle("/admin/reload", c.auth(http.HandlerFunc(c.serveReload)))
	mux.Handle("/admin/config", c.auth(http.HandlerFunc(c.serveAdminConfig)))
	mux.Handle("/admin/plan", c.auth(http.HandlerFunc(c.servePlan)))
	mux.Handle("/admin/apply", c.auth(http.HandlerFunc(c.serveApply)))
	mux.Handle("/changes", c.auth(http.HandlerFunc(c.serveChanges)))
	mux.Handle("/admin/workflows", c.auth(http.HandlerFunc(c.flows.serve)))
	mux.Handle("/admin/workflows/", c.auth(http.HandlerFunc(c.flows.serve)))
	mux.Handle("/admin/digest", c.auth(http.HandlerFunc(c.serveDigest)))
	mux.Handle("/admin/series", c.auth(http.HandlerFunc(c.serveSeries)))
	mux.Handle("/status", c.auth(http.HandlerFunc(c.serveStatus)))
	mux.Handle("/admin/streams", c.auth(http.HandlerFunc(c.serveStreams)))
	mux.Handle("/{$}", c.auth(http.HandlerFunc(c.serveStatus))) // the status page is the listener's front page
	mux.Handle("/debug/pprof/", c.auth(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", c.auth(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", c.auth(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", c.auth(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", c.auth(http.HandlerFunc(pprof.Trace)))
	return mux
}

// MetricsHTTP serves /metrics alone, for prometheus_addr.
func (c *Console) MetricsHTTP() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", c.serveMetrics)
	return mux
}

func (c *Console) auth(h http.Handler) http.Handler {
	if c.cfg().WebUser == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(c.cfg().WebUser)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(c.cfg().WebPassword)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="shardgate"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveMetrics serves the Prometheus exposition of the proxy's registry.
func (c *Console) serveMetrics(w http.ResponseWriter, r *http.Request) {
	c.env.Metrics.Handler(c.env.Log).ServeHTTP(w, r)
}
