package xa

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/sidecar"
)

// FormatID is the XA format id of every branch shardgate starts ("SG");
// recovery leaves branches with any other format id alone (another
// transaction manager's).
const FormatID = 0x5347

// Txn is one distributed transaction: the proxy instance that runs it and
// its number there. Branch ids are "sg-<instance>-<id>" with the node's
// name as the branch qualifier.
type Txn struct {
	Instance, ID uint64
}

// Gtrid is the transaction's global id.
func (t Txn) Gtrid() string {
	return "sg-" + strconv.FormatUint(t.Instance, 10) + "-" + strconv.FormatUint(t.ID, 10)
}

// XID is the branch id on node as XA statements take it:
// X'gtrid',X'bqual',formatID.
func (t Txn) XID(node string) string {
	return xidSQL(t.Gtrid(), node)
}

func xidSQL(gtrid, bqual string) string {
	return "X'" + hex.EncodeToString([]byte(gtrid)) + "',X'" + hex.EncodeToString([]byte(bqual)) + "'," + strconv.Itoa(FormatID)
}

// parseGtrid reads "sg-<instance>-<id>".
func parseGtrid(g string) (Txn, bool) {
	rest, ok := strings.CutPrefix(g, "sg-")
	if !ok {
		return Txn{}, false
	}
	a, b, ok := strings.Cut(rest, "-")
	if !ok {
		return Txn{}, false
	}
	inst, err1 := strconv.ParseUint(a, 10, 64)
	id, err2 := strconv.ParseUint(b, 10, 64)
	return Txn{Instance: inst, ID: id}, err1 == nil && err2 == nil
}

// Branch is one prepared branch XA RECOVER listed.
type Branch struct {
	Node  string
	Txn   Txn
	Gtrid string
	Bqual string
}

// Outcome is what Decide settled.
type Outcome uint8

const (
	// Abort: no commit decision exists and none can be written any more;
	// every branch must roll back.
	Abort Outcome = iota
	// Commit: the decision is durable; every branch must commit.
	Commit
	// Unknown: the decision could be neither written nor read (the
	// sidecar is unreachable). The branches must stay prepared: recovery
	// finishes them once it can read the decision log.
	Unknown
)

// Options configures a Coordinator.
type Options struct {
	// Sidecar is the node holding the decision log, DB its database.
	Sidecar *backend.Node
	DB      string
	// Nodes returns the nodes whose prepared branches recovery finishes.
	Nodes func() []*backend.Node
	// Name is this proxy's instance name (config xa.instance).
	Name string
	// Interval is the recovery period, Lease how long an instance that
	// stopped renewing its registration counts as alive.
	Interval, Lease time.Duration
	Log             *zap.Logger
}

// Stats are counters of what the coordinator did, for metrics.
type Stats struct {
	OnePhase                        uint64 // one-node transactions committed (NoteOnePhase)
	Decided, Refused                uint64 // commit decisions written; refused (fenced, failed, unknown)
	RecoveredCommit, RecoveredAbort uint64 // branches recovery committed, rolled back
	InFlight                        int    // transactions between their first XA PREPARE and Finish
	Owed                            int    // transactions left to recovery by their session
}

// Coordinator is one proxy instance's side of two-phase commit: its
// registration in the sidecar, its transaction ids, the decision log and
// recovery. Safe for concurrent use.
type Coordinator struct {
	o  Options
	sc *sidecar.Sidecar
	db string // quoted database name

	instance atomic.Uint64 // registration id in xa_instances; 0 before registering
	next     atomic.Uint64 // last transaction number handed out
	usurper  uint64        // a live registration under this name that fenced ours (heartbeat goroutine only)

	mu       sync.Mutex
	inFlight map[Txn]struct{}
	owed     map[Txn]time.Time // session gave up on some branch at that time
	forget   []string          // gtrids whose decision can be deleted

	recoverMu sync.Mutex

	onePhase, decided, refused, recCommit, recAbort atomic.Uint64

	stop chan struct{}
	done chan struct{}
}

// New returns a coordinator; Start registers it and starts recovery.
func New(o Options) *Coordinator {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	c := &Coordinator{o: o, sc: sidecar.New(o.Sidecar, o.DB), db: mysql.QuoteIdent(o.DB),
		inFlight: map[Txn]struct{}{}, owed: map[Txn]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{})}
	// Numbers start at a random point so that branch ids stay unique on a
	// node even when the proxy runs unregistered (instance 0).
	c.next.Store(rand.Uint64() >> 24)
	return c
}

// Start registers the instance in the sidecar, runs one recovery (so that
// branches an earlier life of this proxy left prepared are finished before
// clients come) and starts the background loop. A sidecar that cannot be
// reached is logged and retried by the loop: until then transactions that
// reach several nodes cannot commit (Decide refuses).
func (c *Coordinator) Start(ctx context.Context) {
	if err := c.register(ctx); err != nil {
		c.o.Log.Error("xa: cannot register in the sidecar; transactions across nodes cannot commit until it answers", zap.Error(err))
	} else if _, err := c.Recover(ctx); err != nil {
		c.o.Log.Warn("xa: recovery at start-up", zap.Error(err))
	}
	go c.loop()
}

// Close stops the background loop and closes the sidecar connections.
func (c *Coordinator) Close() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	<-c.done
	c.flushForget(context.Background())
	c.sc.Close()
}

// Instance is the registration id branch ids carry (0 before
// registration succeeded).
func (c *Coordinator) Instance() uint64 { return c.instance.Load() }

// Begin returns a new transaction id.
func (c *Coordinator) Begin() Txn {
	return Txn{Instance: c.instance.Load(), ID: c.next.Add(1)}
}

// Enter marks t in flight: its session is preparing or committing it, so
// recovery must not touch its branches.
func (c *Coordinator) Enter(t Txn) {
	c.mu.Lock()
	c.inFlight[t] = struct{}{}
	c.mu.Unlock()
}

// Finish ends t's flight. done says every branch was committed or rolled
// back; otherwise some are left prepared for recovery to finish.
func (c *Coordinator) Finish(t Txn, committed, done bool) {
	c.mu.Lock()
	delete(c.inFlight, t)
	switch {
	case !done:
		c.owed[t] = time.Now()
	case committed && len(c.forget) < 1<<16:
		c.forget = append(c.forget, t.Gtrid())
	}
	c.mu.Unlock()
}

// NoteOnePhase counts a one-node transaction committed with XA COMMIT
// ... ONE PHASE.
func (c *Coordinator) NoteOnePhase() { c.onePhase.Add(1) }

// Stats returns the coordinator's counters.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{OnePhase: c.onePhase.Load(), Decided: c.decided.Load(), Refused: c.refused.Load(),
		RecoveredCommit: c.recCommit.Load(), RecoveredAbort: c.recAbort.Load(),
		InFlight: len(c.inFlight), Owed: len(c.owed)}
}

// Decide writes t's commit decision. The insert reads the instance's
// registration under a shared lock and inserts nothing when recovery has
// fenced the instance: then the outcome is Abort. When the answer is lost
// (the connection broke), Decide settles it on another connection: an
// abort row is inserted unless a row is there already, and the row that is
// there is the outcome.
func (c *Coordinator) Decide(ctx context.Context, t Txn) (Outcome, error) {
	if t.Instance == 0 {
		c.refused.Add(1)
		return Abort, errors.New("the XA decision log in the sidecar is not available (this proxy could not register there)")
	}
	g := quote(t.Gtrid())
	res, err := c.exec(ctx, "INSERT INTO "+c.db+".xa_decisions (gtrid, instance, outcome) SELECT "+g+", id, 'commit' FROM "+
		c.db+".xa_instances WHERE id = "+strconv.FormatUint(t.Instance, 10)+" AND fenced IS NULL LOCK IN SHARE MODE")
	if err == nil {
		if res.OK.AffectedRows == 1 {
			c.decided.Add(1)
			return Commit, nil
		}
		c.refused.Add(1)
		return Abort, fmt.Errorf("this proxy's XA registration (instance %d) was fenced: another proxy took it for dead", t.Instance)
	}
	var se *mysql.SQLError
	if errors.As(err, &se) {
		c.refused.Add(1)
		return Abort, err
	}
	// The answer was lost: the insert may or may not have committed.
	// An abort row settles it (settleAborts), retried on new connections.
	for attempt := 0; attempt < 3; attempt++ {
		commit := map[string]bool{}
		if err2 := c.settleAborts(ctx, []Branch{{Txn: t, Gtrid: t.Gtrid()}}, commit); err2 != nil {
			err = err2
			continue
		}
		if commit[t.Gtrid()] {
			c.decided.Add(1)
			return Commit, nil
		}
		c.refused.Add(1)
		return Abort, err
	}
	c.refused.Add(1)
	return Unknown, err
}

// quote makes s a string literal: a gtrid (VARBINARY) or a name.
func quote(s string) string { return mysql.QuoteString(s, "") }

// inList is ('g1','g2',...).
func inList(gs []string) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, g := range gs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(g))
	}
	b.WriteByte(')')
	return b.String()
}

// exec runs one autocommitted statement in the sidecar.
func (c *Coordinator) exec(ctx context.Context, q string) (*backend.Result, error) {
	res, err := c.sc.Exec(ctx, tables, q)
	if err != nil {
		return nil, fmt.Errorf("xa decision log: %w", err)
	}
	return res, nil
}

// tables are the decision log's tables in the sidecar: the proxies'
// registrations and the commit (and abort) decisions.
var tables = &sidecar.Component{Name: "xa", Migrations: [][]string{
	{
		"CREATE TABLE IF NOT EXISTS xa_instances (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, " +
			"name VARCHAR(255) NOT NULL, started DATETIME(6) NOT NULL, heartbeat DATETIME(6) NOT NULL, fenced DATETIME(6) NULL, KEY (name)) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS xa_decisions (gtrid VARBINARY(64) NOT NULL PRIMARY KEY, instance BIGINT UNSIGNED NOT NULL, " +
			"outcome ENUM('commit','abort') NOT NULL, decided DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY (instance)) ENGINE=InnoDB",
	},
	// The nodes a registration's branches can be on (recovery forgets a
	// dead instance's decisions only after listing every one of them).
	{"ALTER TABLE xa_instances ADD COLUMN IF NOT EXISTS nodes TEXT NULL"},
}}

// leaseAgo is the SQL for one lease before now: a registration renewed
// since then is alive.
func (c *Coordinator) leaseAgo() string {
	return "NOW(6) - INTERVAL " + strconv.FormatInt(c.o.Lease.Microseconds(), 10) + " MICROSECOND"
}

// nodeNames lists the nodes this instance's branches can be on (kept with
// its registration: recovery forgets a dead instance's decisions only
// after listing every one of them).
func (c *Coordinator) nodeNames() string {
	var names []string
	for _, n := range c.o.Nodes() {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// register inserts this instance's registration and fences every earlier
// registration under the same name: a proxy that starts under a name is
// the one that had it before, restarted, so what that one left prepared
// is recovery's now, without waiting for its lease to run out.
func (c *Coordinator) register(ctx context.Context) error {
	res, err := c.exec(ctx, "INSERT INTO "+c.db+".xa_instances (name, nodes, started, heartbeat) VALUES ("+quote(c.o.Name)+", "+
		quote(c.nodeNames())+", NOW(6), NOW(6))")
	if err != nil {
		return err
	}
	id := res.OK.LastInsertID
	if _, err := c.exec(ctx, "UPDATE "+c.db+".xa_instances SET fenced = NOW(6) WHERE name = "+quote(c.o.Name)+
		" AND id <> "+strconv.FormatUint(id, 10)+" AND fenced IS NULL"); err != nil {
		return err
	}
	c.instance.Store(id)
	c.o.Log.Info("xa: registered", zap.String("instance", c.o.Name), zap.Uint64("id", id))
	return nil
}

// heartbeat renews the registration; a fenced (or removed) registration
// is replaced by a new one: transactions begun under the old id can no
// longer commit across nodes, new ones can.
func (c *Coordinator) heartbeat(ctx context.Context) error {
	id := c.instance.Load()
	if id == 0 {
		return c.register(ctx)
	}
	res, err := c.exec(ctx, "UPDATE "+c.db+".xa_instances SET heartbeat = NOW(6), nodes = "+quote(c.nodeNames())+
		" WHERE id = "+strconv.FormatUint(id, 10)+" AND fenced IS NULL")
	if err != nil {
		return err
	}
	if res.OK.AffectedRows != 0 {
		return nil
	}
	// A newer registration under this name that is renewed is another
	// live proxy with the same xa.instance (a restart fences the one it
	// replaces, which is dead). Taking the name back would fence it in
	// turn, and each would keep failing the other's commits: this proxy
	// yields until that one stops renewing.
	res, err = c.exec(ctx, "SELECT MAX(id) FROM "+c.db+".xa_instances WHERE name = "+quote(c.o.Name)+
		" AND id > "+strconv.FormatUint(id, 10)+" AND fenced IS NULL AND heartbeat >= "+c.leaseAgo())
	if err != nil {
		return err
	}
	if other, _ := strconv.ParseUint(string(res.Rows[0][0]), 10, 64); other != 0 {
		if other != c.usurper {
			c.usurper = other
			c.o.Log.Error("xa: another live proxy registered under this proxy's xa.instance name and fenced it; "+
				"transactions across nodes cannot commit here (1402) until that proxy stops: give every proxy its own xa.instance",
				zap.String("instance", c.o.Name), zap.Uint64("id", id), zap.Uint64("other", other))
		}
		return nil
	}
	c.usurper = 0
	c.o.Log.Warn("xa: this proxy's registration was fenced by another proxy (it missed its lease); registering again", zap.Uint64("id", id))
	return c.register(ctx)
}

func (c *Coordinator) loop() {
	defer close(c.done)
	// Renewals have a goroutine of their own: a slow recovery round (a
	// node that does not answer) must not make the lease run out.
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		beat := time.NewTicker(max(c.o.Lease/4, 10*time.Millisecond))
		defer beat.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-beat.C:
				ctx, cancel := context.WithTimeout(context.Background(), c.o.Lease)
				if err := c.heartbeat(ctx); err != nil {
					c.o.Log.Warn("xa: renewing the registration", zap.Error(err))
				}
				cancel()
			}
		}
	}()
	defer func() { <-beatDone }()
	rec := time.NewTicker(c.o.Interval)
	defer rec.Stop()
	flush := time.NewTicker(200 * time.Millisecond)
	defer flush.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), c.o.Interval+c.o.Lease)
		select {
		case <-c.stop:
			cancel()
			return
		case <-rec.C:
			if c.instance.Load() != 0 {
				if _, err := c.Recover(ctx); err != nil {
					c.o.Log.Warn("xa: recovery", zap.Error(err))
				}
			}
		case <-flush.C:
			c.flushForget(ctx)
		}
		cancel()
	}
}

// flushForget deletes the decisions of transactions that committed
// everywhere, in one statement.
func (c *Coordinator) flushForget(ctx context.Context) {
	c.mu.Lock()
	batch := c.forget
	c.forget = nil
	c.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), 500)
		if _, err := c.exec(ctx, "DELETE FROM "+c.db+".xa_decisions WHERE gtrid IN "+inList(batch[:n])); err != nil {
			c.o.Log.Warn("xa: forgetting decisions", zap.Error(err))
			c.mu.Lock()
			if len(c.forget) < 1<<16 {
				c.forget = append(c.forget, batch...)
			}
			c.mu.Unlock()
			return
		}
		batch = batch[n:]
	}
}
