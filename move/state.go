package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gmysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/shardgate/shardgate/config"
)

// Kinds of workflow.
const (
	KindReshard = "reshard"
	KindImport  = "import"
)

// Phases of a workflow, in order. Copying, CatchingUp and Ready run;
// Switched runs the reverse stream; the others have ended.
const (
	PhaseCopying    = "copying"
	PhaseCatchingUp = "catching-up"
	PhaseReady      = "ready" // caught up and verified; waiting for a cutover (reshard) or complete (import)
	PhaseSwitched   = "switched"
	PhaseRolledBack = "rolled-back"
	PhaseCompleted  = "completed"
	PhaseCancelled  = "cancelled"
)

// Spec is what a workflow was asked to do; it does not change.
type Spec struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	DB    string `json:"db"`    // the logical table's database
	Table string `json:"table"` // the logical table
	// From is the table's rule before (reshard); To the rule after (for
	// import, the table's rule).
	From config.ShardRule `json:"from"`
	To   config.ShardRule `json:"to"`
	// Source is the server an import reads (its table SourceDB.SourceTable).
	Source      *Endpoint `json:"source,omitempty"`
	SourceDB    string    `json:"source_db,omitempty"`
	SourceTable string    `json:"source_table,omitempty"`
	// AutoCutover cuts over as soon as the workflow is ready.
	AutoCutover bool               `json:"auto_cutover,omitempty"`
	Options     config.MoveOptions `json:"options"`
	Created     time.Time          `json:"created"`
}

// Logical is db.table.
func (s *Spec) Logical() string { return s.DB + "." + s.Table }

// Range is a primary-key range whose rows differ.
type Range struct {
	Bucket      int64  `json:"bucket"`
	SourceRows  int64  `json:"source_rows"`
	TargetRows  int64  `json:"target_rows"`
	Description string `json:"range"`
}

// State is a workflow's progress, saved in the sidecar.
type State struct {
	Phase string `json:"phase"`
	// Start is each source node's position before the copy began.
	Start map[string]string `json:"start,omitempty"`
	// Copied is, per source subtable, the primary key (JSON array) of the
	// last row copied; "done" once it is all copied.
	Copied map[string]string `json:"copied,omitempty"`
	// Applied is the catch-up's checkpoint: per source node, the position
	// through which its changes are applied.
	Applied map[string]string `json:"applied,omitempty"`
	// Reverse is the reverse stream's checkpoint after a cutover: per
	// node of the new layout, the position through which its changes are
	// applied to the old subtables.
	Reverse map[string]string `json:"reverse,omitempty"`
	// Figures.
	RowsTotal      int64     `json:"rows_total"`  // source rows when the copy began (estimate)
	RowsCopied     int64     `json:"rows_copied"` // since the copy began, resumed copies included
	CopySeconds    float64   `json:"copy_seconds"`
	ChangesApplied int64     `json:"changes_applied"`
	Verified       time.Time `json:"verified,omitzero"`
	// VerifyRows and VerifySeconds are the last verify's rows and time.
	VerifyRows    int64     `json:"verify_rows,omitempty"`
	VerifySeconds float64   `json:"verify_seconds,omitempty"`
	Diffs         []Range   `json:"diffs,omitempty"`
	Cutovers      int       `json:"cutover_attempts,omitempty"`
	PauseMillis   float64   `json:"pause_ms,omitempty"` // the last successful cutover's pause
	Error         string    `json:"error,omitempty"`
	Updated       time.Time `json:"updated"`
}

// Workflow is a spec and its state, as saved.
type Workflow struct {
	Spec  Spec  `json:"spec"`
	State State `json:"state"`
}

// Ended reports whether w has finished (nothing runs for it).
func (w *Workflow) Ended() bool {
	switch w.State.Phase {
	case PhaseRolledBack, PhaseCompleted, PhaseCancelled:
		return true
	}
	return false
}

// Store keeps workflows in the sidecar database.
type Store struct {
	ep Endpoint
	db string

	mu      sync.Mutex
	conn    *client.Conn
	created bool // the table is known to exist
}

// NewStore returns the store in database db on ep's server; the table is
// created on first use.
func NewStore(ep Endpoint, db string) *Store { return &Store{ep: ep, db: db} }

func (s *Store) exec(ctx context.Context, q string, create bool) (r *resultRows, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 0; attempt < 2; attempt++ {
		if s.conn == nil {
			c, err := dial(s.ep)
			if err != nil {
				return nil, fmt.Errorf("sidecar: %w", err)
			}
			s.conn, s.created = c, false
		}
		if create && !s.created {
			c := s.conn
			if _, err := c.Execute("CREATE DATABASE IF NOT EXISTS " + quoteName(s.db)); err != nil {
				return nil, fmt.Errorf("sidecar: %w", err)
			}
			if _, err := c.Execute("CREATE TABLE IF NOT EXISTS " + qualified(s.db, "move_workflows") +
				" (name VARCHAR(64) NOT NULL PRIMARY KEY, spec LONGTEXT NOT NULL, state LONGTEXT NOT NULL," +
				" owner VARCHAR(255) NOT NULL DEFAULT '', lease_until TIMESTAMP(3) NULL," +
				" updated TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)) ENGINE=InnoDB"); err != nil {
				return nil, fmt.Errorf("sidecar: %w", err)
			}
			s.created = true
		}
		res, err := s.conn.Execute(q)
		if err == nil {
			out := &resultRows{affected: res.AffectedRows}
			if res.Resultset != nil {
				for i := range res.Values {
					row := make([]string, len(res.Values[i]))
					for j := range row {
						row[j] = string(res.Values[i][j].AsString())
					}
					out.rows = append(out.rows, row)
				}
			}
			return out, nil
		}
		var me *gmysql.MyError
		if errors.As(err, &me) && !create && (me.Code == 1146 || me.Code == 1049) {
			return &resultRows{}, nil // no workflow was ever saved
		}
		if errors.As(err, &me) || ctx.Err() != nil {
			return nil, fmt.Errorf("sidecar: %w", err)
		}
		s.conn.Close()
		s.conn = nil
		if attempt == 1 {
			return nil, fmt.Errorf("sidecar: %w", err)
		}
	}
	return nil, nil
}

type resultRows struct {
	rows     [][]string
	affected uint64
}

// Save writes w.
func (s *Store) Save(ctx context.Context, w *Workflow) error {
	w.State.Updated = time.Now().UTC()
	spec, err := json.Marshal(w.Spec)
	if err != nil {
		return err
	}
	st, err := json.Marshal(w.State)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, fmt.Sprintf("INSERT INTO %s (name, spec, state) VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE spec = VALUES(spec), state = VALUES(state)",
		qualified(s.db, "move_workflows"), stringLit(w.Spec.Name), stringLit(string(spec)), stringLit(string(st))), true)
	return err
}

// Claim takes (or renews) the lease of workflow name for owner, for ttl:
// only the proxy holding it runs the workflow. It fails while another
// owner's lease runs.
func (s *Store) Claim(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	r, err := s.exec(ctx, fmt.Sprintf("UPDATE %s SET owner = %s, lease_until = NOW(3) + INTERVAL %d MICROSECOND WHERE name = %s AND (owner = %s OR owner = '' OR lease_until IS NULL OR lease_until < NOW(3))",
		qualified(s.db, "move_workflows"), stringLit(owner), ttl.Microseconds(), stringLit(name), stringLit(owner)), true)
	if err != nil {
		return false, err
	}
	return r.affected == 1, nil
}

// Release gives up owner's lease of workflow name.
func (s *Store) Release(ctx context.Context, name, owner string) error {
	_, err := s.exec(ctx, fmt.Sprintf("UPDATE %s SET owner = '', lease_until = NULL WHERE name = %s AND owner = %s",
		qualified(s.db, "move_workflows"), stringLit(name), stringLit(owner)), true)
	return err
}

// Owner returns who holds workflow name's lease ("" when nobody does).
func (s *Store) Owner(ctx context.Context, name string) (string, error) {
	r, err := s.exec(ctx, fmt.Sprintf("SELECT owner FROM %s WHERE name = %s AND lease_until >= NOW(3)", qualified(s.db, "move_workflows"), stringLit(name)), false)
	if err != nil || len(r.rows) == 0 {
		return "", err
	}
	return r.rows[0][0], nil
}

// List reads every workflow, oldest first.
func (s *Store) List(ctx context.Context) ([]*Workflow, error) {
	r, err := s.exec(ctx, "SELECT spec, state FROM "+qualified(s.db, "move_workflows"), false)
	if err != nil {
		return nil, err
	}
	var out []*Workflow
	for _, row := range r.rows {
		w := &Workflow{}
		if err := json.Unmarshal([]byte(row[0]), &w.Spec); err != nil {
			return nil, fmt.Errorf("sidecar: workflow spec: %w", err)
		}
		if err := json.Unmarshal([]byte(row[1]), &w.State); err != nil {
			return nil, fmt.Errorf("sidecar: workflow %s state: %w", w.Spec.Name, err)
		}
		out = append(out, w)
	}
	sortWorkflows(out)
	return out, nil
}

// Close closes the store's connection.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

func sortWorkflows(ws []*Workflow) {
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Spec.Created.Before(ws[j].Spec.Created) })
}
