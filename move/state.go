package move

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/sidecar"
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

// Store keeps workflows in the sidecar database (package sidecar), one
// row each in its table move_workflows.
type Store struct {
	sc *sidecar.Sidecar
}

// NewStore returns the store in database db on ep's server; the table is
// created on first write.
func NewStore(ep Endpoint, db string) *Store {
	return &Store{sc: sidecar.NewAt(ep.Addr, ep.User, ep.Password, db)}
}

// CloseIdleAfter makes the store's idle sidecar connections close after d
// (sidecar.Sidecar.CloseIdleAfter; the proxy passes its pools' idle
// timeout).
func (st *Store) CloseIdleAfter(d time.Duration) { st.sc.CloseIdleAfter(d) }

// tables is the workflows' table in the sidecar: per workflow its spec and
// state (JSON), the lease of the proxy running it, and the fleet term (the
// election revision of the leader) that proxy claimed it in (0 outside a
// fleet).
var tables = &sidecar.Component{Name: "move", Migrations: [][]string{
	{"CREATE TABLE IF NOT EXISTS move_workflows (name VARCHAR(64) NOT NULL PRIMARY KEY, spec LONGTEXT NOT NULL, state LONGTEXT NOT NULL," +
		" owner VARCHAR(255) NOT NULL DEFAULT '', lease_until TIMESTAMP(3) NULL," +
		" updated TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)) ENGINE=InnoDB"},
	{"ALTER TABLE move_workflows ADD COLUMN IF NOT EXISTS term BIGINT NOT NULL DEFAULT 0 AFTER lease_until"},
}}

// ErrNotOwner is returned by a save of a workflow whose lease another proxy
// (or a later fleet term) holds now: the run that tried must stop, and its
// state is the other's to write.
var ErrNotOwner = errors.New("the workflow's lease is held by another proxy")

// exec runs one statement in the sidecar: a write (creating the table
// first) or, with write false, a read that finds no rows while no
// workflow was ever saved. Every statement of the store can run twice, so
// one that lost its connection is tried once more on a new one (an idle
// connection may have outlived a restart of the server).
func (s *Store) exec(ctx context.Context, q string, write bool) (*resultRows, error) {
	run := s.sc.Read
	if write {
		run = s.sc.Exec
	}
	for attempt := 0; ; attempt++ {
		res, err := run(ctx, tables, q)
		var se *mysql.SQLError
		if err != nil && attempt == 0 && !errors.As(err, &se) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, err
		}
		out := &resultRows{affected: res.OK.AffectedRows}
		for _, row := range res.Rows {
			cells := make([]string, len(row))
			for j, v := range row {
				cells[j] = string(v)
			}
			out.rows = append(out.rows, cells)
		}
		return out, nil
	}
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
		s.sc.Table("move_workflows"), text(w.Spec.Name), text(string(spec)), text(string(st))), true)
	return err
}

// Claim takes (or renews) the lease of workflow name for owner, for ttl:
// only the proxy holding it runs the workflow. It fails while another
// owner's lease runs.
//
// In a fleet, term is the election revision of the leader that claims
// (0 outside a fleet, where the term is not looked at): a later term takes
// the lease at once, whoever holds it and however long it still runs (the
// leader it was claimed under has been deposed), and an earlier term never
// takes it back. Saves are conditioned on the lease (SaveOwned), so a
// deposed leader that has not noticed yet writes nothing.
func (s *Store) Claim(ctx context.Context, name, owner string, term int64, ttl time.Duration) (bool, error) {
	free := fmt.Sprintf("owner = %s OR owner = '' OR lease_until IS NULL OR lease_until < NOW(3)", text(owner))
	cond := "(" + free + ")"
	if term > 0 {
		cond = fmt.Sprintf("(term < %d OR term = %d AND (%s))", term, term, free)
	}
	r, err := s.exec(ctx, fmt.Sprintf("UPDATE %s SET owner = %s, term = %d, lease_until = NOW(3) + INTERVAL %d MICROSECOND WHERE name = %s AND %s",
		s.sc.Table("move_workflows"), text(owner), term, ttl.Microseconds(), text(name), cond), true)
	if err != nil {
		return false, err
	}
	if r.affected == 1 {
		return true, nil
	}
	// No row changed: the lease is another's, or this very claim was
	// made twice (exec's retry) within the same millisecond.
	o, t, err := s.lease(ctx, name)
	return err == nil && o == owner && t == term, err
}

// lease reads who holds workflow name's lease and in which term.
func (s *Store) lease(ctx context.Context, name string) (owner string, term int64, err error) {
	r, err := s.exec(ctx, fmt.Sprintf("SELECT owner, term FROM %s WHERE name = %s", s.sc.Table("move_workflows"), text(name)), false)
	if err != nil || len(r.rows) == 0 {
		return "", 0, err
	}
	term, _ = strconv.ParseInt(r.rows[0][1], 10, 64)
	return r.rows[0][0], term, nil
}

// SaveOwned writes w's state if owner holds its lease in term (compare
// and set on the row), and returns ErrNotOwner otherwise: the write of a
// proxy whose lease another took (a later fleet term, or an expired
// lease) changes nothing.
func (s *Store) SaveOwned(ctx context.Context, w *Workflow, owner string, term int64) error {
	// Updated changes at every save (nanoseconds), so a save that matches
	// the row always changes it: no row changed means the row is not ours,
	// unless exec ran this very statement twice.
	w.State.Updated = time.Now().UTC()
	st, err := json.Marshal(w.State)
	if err != nil {
		return err
	}
	r, err := s.exec(ctx, fmt.Sprintf("UPDATE %s SET state = %s WHERE name = %s AND owner = %s AND term = %d",
		s.sc.Table("move_workflows"), text(string(st)), text(w.Spec.Name), text(owner), term), true)
	if err != nil {
		return err
	}
	if r.affected == 1 {
		return nil
	}
	o, t, err := s.lease(ctx, w.Spec.Name)
	if err != nil {
		return err
	}
	if o == owner && t == term {
		return nil
	}
	return fmt.Errorf("%w (%s in term %d)", ErrNotOwner, cmp.Or(o, "nobody"), t)
}

// Release gives up owner's lease of workflow name, claimed in term (the
// term stays: an earlier one cannot claim it again).
func (s *Store) Release(ctx context.Context, name, owner string, term int64) error {
	_, err := s.exec(ctx, fmt.Sprintf("UPDATE %s SET owner = '', lease_until = NULL WHERE name = %s AND owner = %s AND term = %d",
		s.sc.Table("move_workflows"), text(name), text(owner), term), true)
	return err
}

// Owner returns who holds workflow name's lease ("" when nobody does).
func (s *Store) Owner(ctx context.Context, name string) (string, error) {
	r, err := s.exec(ctx, fmt.Sprintf("SELECT owner FROM %s WHERE name = %s AND lease_until >= NOW(3)", s.sc.Table("move_workflows"), text(name)), false)
	if err != nil || len(r.rows) == 0 {
		return "", err
	}
	return r.rows[0][0], nil
}

// List reads every workflow, oldest first.
func (s *Store) List(ctx context.Context) ([]*Workflow, error) {
	r, err := s.exec(ctx, "SELECT spec, state FROM "+s.sc.Table("move_workflows"), false)
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

// Close closes the store's connections.
func (s *Store) Close() { s.sc.Close() }

func sortWorkflows(ws []*Workflow) {
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Spec.Created.Before(ws[j].Spec.Created) })
}
