package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
)

// Plan is what applying a ks.yaml would change, computed against the
// configuration in force (POST /admin/plan). It is plain data: Apply
// computes it again and refuses when Version is no longer the version in
// force.
type Plan struct {
	// Version is the configuration version the plan was computed against
	// (1 at start, one more per reload or cutover); TopologyVersion, in a
	// fleet, the topology version (etcd revision) the proxy served.
	Version         uint64 `json:"version"`
	TopologyVersion int64  `json:"topology_version,omitempty"`

	NodesAdded   []string `json:"nodes_added,omitempty"`
	NodesRemoved []string `json:"nodes_removed,omitempty"`
	UsersAdded   []string `json:"users_added,omitempty"`
	UsersRemoved []string `json:"users_removed,omitempty"`
	// Rules are new rules for tables without rows: a reload applies them.
	Rules []PlanRule `json:"rules,omitempty"`
	// Reshards are changed rules of tables in force: their rows move in a
	// reshard workflow each.
	Reshards []PlanReshard `json:"reshards,omitempty"`
	// Refused names what cannot change, with the reason; an apply of a
	// plan with refusals changes nothing.
	Refused []string `json:"refused,omitempty"`
	// Reload is set when a reload changes something: the nodes, users and
	// rules above, or other reloadable keys (passwords, allow_ips,
	// limits, replicas, ...).
	Reload bool `json:"reload,omitempty"`
	// CopyRate is the copy rate (rows/s) of the newest workflow that
	// copied rows, the basis of the estimates; 0 when none has.
	CopyRate float64 `json:"copy_rows_per_sec,omitempty"`
	// Seconds is how long computing the plan took.
	Seconds float64 `json:"plan_seconds"`
}

// PlanRule is a new shard rule a reload applies directly.
type PlanRule struct {
	User  string           `json:"user"`
	Table string           `json:"table"` // db.table
	Rule  config.ShardRule `json:"rule"`
	Note  string           `json:"note,omitempty"`
}

// PlanReshard is a rule whose table's rows move: one reshard workflow.
type PlanReshard struct {
	User  string           `json:"user"`
	Table string           `json:"table"` // db.table
	From  config.ShardRule `json:"from"`
	To    config.ShardRule `json:"to"` // the next generation
	// Rows and Bytes are the source subtables' TABLE_ROWS and DATA_LENGTH
	// (information_schema: estimates for InnoDB).
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// EstimateSeconds is Rows at the plan's CopyRate (0 without one);
	// Estimate says it in words, or "no rate measured yet".
	EstimateSeconds float64 `json:"estimate_seconds,omitempty"`
	Estimate        string  `json:"estimate"`
	// Workflow names the running workflow that already moves the table to
	// To: an apply starts nothing for it.
	Workflow string `json:"workflow,omitempty"`
}

// Empty reports whether applying the plan changes nothing.
func (p *Plan) Empty() bool {
	if p.Reload || len(p.Refused) > 0 {
		return false
	}
	for _, r := range p.Reshards {
		if r.Workflow == "" {
			return false
		}
	}
	return true
}

// ApplyRequest is the body of POST /admin/apply.
type ApplyRequest struct {
	Config  string `json:"config"`  // the ks.yaml text
	Version uint64 `json:"version"` // the Plan's Version
}

// Applied is what an apply did.
type Applied struct {
	Plan *Plan `json:"plan"`
	// Reloaded is set when the file (without the rules that move) was
	// put in force as configuration Version.
	Reloaded bool   `json:"reloaded"`
	Version  uint64 `json:"version"`
	// Started names the workflows started, one per table whose rows move.
	Started []string `json:"started,omitempty"`
}

// Planner computes and applies plans (the server's).
type Planner interface {
	Plan(yaml []byte) (*Plan, error)
	Apply(yaml []byte, version uint64) (*Applied, error)
}

// Errors a Planner wraps to say which answer the request gets: a file
// that does not parse or validate (400), and an apply that cannot go
// ahead: a stale version, refusals, a fleet (409).
var (
	ErrBadConfig = errors.New("bad configuration")
	ErrConflict  = errors.New("conflict")
)

// servePlan answers POST /admin/plan (body: a ks.yaml text) with the plan
// as JSON.
func (c *Console) servePlan(w http.ResponseWriter, r *http.Request) {
	if !c.planning(w, r) {
		return
	}
	text, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
	if err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	p, err := c.env.Plans.Plan(text)
	if err != nil {
		planError(w, err)
		return
	}
	replyJSON(w, p)
}

// serveApply answers POST /admin/apply (ApplyRequest) with what it did
// (Applied), or 409 with why nothing changed.
func (c *Console) serveApply(w http.ResponseWriter, r *http.Request) {
	if !c.planning(w, r) {
		return
	}
	var req ApplyRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := c.env.Plans.Apply([]byte(req.Config), req.Version)
	if err != nil {
		c.env.Log.Warn("apply refused", zap.Error(err))
		planError(w, err)
		return
	}
	c.env.Log.Info("plan applied", zap.Uint64("planned_version", req.Version), zap.Bool("reloaded", res.Reloaded),
		zap.Uint64("version", res.Version), zap.Strings("workflows", res.Started))
	replyJSON(w, res)
}

func (c *Console) planning(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return false
	}
	if c.env.Plans == nil {
		http.Error(w, "this proxy does not plan configuration changes", http.StatusServiceUnavailable)
		return false
	}
	return true
}

func planError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrBadConfig):
		code = http.StatusBadRequest
	case errors.Is(err, ErrConflict):
		code = http.StatusConflict
	}
	http.Error(w, err.Error(), code)
}

func replyJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
