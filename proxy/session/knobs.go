package session

import "sync/atomic"

// Knobs are the hooks tests set on a server's sessions (CockroachDB's
// TestingKnobs): injected through server.Options and shared by the
// server's sessions, never package globals. The zero value calls nothing.
// The fields are atomic so a test can arm a hook while sessions run.
type Knobs struct {
	// BeforeCommit is called with the node's name before each COMMIT End
	// sends: a test can kill a server between the commits of a
	// transaction across nodes.
	BeforeCommit atomic.Pointer[func(node string)]
	// XAStage is called at each stage of a two-phase commit (XA stages)
	// with the node concerned ("" for XABeforeDecision); the proxy's
	// failpoint (server.FailpointKnobs) uses it too.
	XAStage atomic.Pointer[func(stage, node string)]
	// CacheChange is called by the result cache's binary log reader with
	// each change (op "insert", "update", "delete", "ddl", "statement" or
	// "mark"; after is the row's image after an insert or update) just
	// before the cache applies it, on the reader's goroutine: a test times
	// the invalidations with it, or holds the reader back to inject lag.
	CacheChange atomic.Pointer[func(node, op, table string, after map[string]any)]
}

// XA stages XAStage is called at.
const (
	// XABeforeDecision: every branch is prepared; the decision is not
	// written yet.
	XABeforeDecision = "before-decision"
	// XABeforeCommit: the decision is written; XA COMMIT is about to go
	// to node.
	XABeforeCommit = "before-commit"
)

// noKnobs are the knobs of a session given none.
var noKnobs = &Knobs{}

func (k *Knobs) xaStage(stage, node string) {
	if h := k.XAStage.Load(); h != nil {
		(*h)(stage, node)
	}
}

// SetKnobs gives the session its server's knobs (nil for none).
func (s *State) SetKnobs(k *Knobs) {
	if k == nil {
		k = noKnobs
	}
	s.knobs = k
}
