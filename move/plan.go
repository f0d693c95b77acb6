package move

import "github.com/shardgate/shardgate/config"

// A ks.yaml edit planned against the configuration in force (the
// proxy's POST /admin/plan, shardgate plan) and what applying it did
// (POST /admin/apply, shardgate apply). The proxy computes them; the
// command line prints them.

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
