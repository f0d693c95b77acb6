package deadlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// Detector finds deadlocks across nodes among the transactions of the
// sessions registered with it and breaks them (see the package comment).
// Its goroutine runs from New to Close.
type Detector struct {
	after time.Duration
	log   *zap.Logger
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	// closing makes Close's close(stop) happen once (Shutdown may be
	// called again).
	closing sync.Once

	mu    sync.Mutex
	slots map[*Slot]struct{}

	// conns are the detector's own connections, per server address,
	// lastRead when each server was last read; these maps are touched by
	// its goroutine only.
	conns    map[string]*backend.Conn
	lastRead map[string]time.Time
	failing  map[string]bool // servers whose last read failed (logged once)

	waits, graphs, broken atomic.Uint64
	latMu                 sync.Mutex
	latencies             []time.Duration // the last maxLatencies breaks
	latSum, latMax        time.Duration
}

const maxLatencies = 4096

// cacheRenewal is how long after the last read InnoDB renews the cache
// INNODB_TRX and INNODB_LOCK_WAITS are read from (100 ms), with a margin.
const cacheRenewal = 105 * time.Millisecond

// Options configure a Detector.
type Options struct {
	// After is the threshold: a statement of a transaction that runs
	// longer than it makes the detector look (deadlock_detect_after).
	After time.Duration
	Log   *zap.Logger
}

// New starts a detector.
func New(o Options) *Detector {
	d := &Detector{
		after: o.After, log: o.Log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		slots: map[*Slot]struct{}{}, conns: map[string]*backend.Conn{}, lastRead: map[string]time.Time{}, failing: map[string]bool{},
	}
	if d.log == nil {
		d.log = zap.NewNop()
	}
	go d.run()
	return d
}

// Close stops the detector's goroutine and closes its connections (none
// for a nil Detector: the detector is off). It may be called again.
func (d *Detector) Close() {
	if d == nil {
		return
	}
	d.closing.Do(func() { close(d.stop) })
	<-d.done
}

// Wake makes the detector run a round (a statement has waited past the
// threshold). It never blocks.
func (d *Detector) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Stats are the detector's counts since it started.
type Stats struct {
	WaitsSeen uint64 // statements that ran past the threshold
	Graphs    uint64 // waits-for graphs built (each reads every server involved)
	Broken    uint64 // deadlocks broken
	// LatencySum and LatencyMax are the times from each deadlock's
	// forming (its last member's statement began) to its break; Recent
	// are the last ones, oldest first.
	LatencySum, LatencyMax time.Duration
	Recent                 []time.Duration
}

// Stats returns the counts of now.
func (d *Detector) Stats() Stats {
	d.latMu.Lock()
	defer d.latMu.Unlock()
	return Stats{WaitsSeen: d.waits.Load(), Graphs: d.graphs.Load(), Broken: d.broken.Load(),
		LatencySum: d.latSum, LatencyMax: d.latMax, Recent: slices.Clone(d.latencies)}
}

func (d *Detector) run() {
	defer close(d.done)
	defer func() {
		for _, c := range d.conns {
			c.Close()
		}
	}()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
			backoff = 0 // a new wait: look again soon if it is not a cycle yet
		case <-retry.C:
		}
		if d.round() {
			// Statements still wait past the threshold without a cycle
			// now: one may form by a wait that moves to another row
			// within the same statement (no new timer), so look again,
			// less and less often, while they wait.
			if backoff == 0 {
				backoff = 2 * d.after
			} else {
				backoff = min(2*backoff, 2*time.Second)
			}
			retry.Reset(backoff)
		} else {
			backoff = 0
			retry.Stop()
			// Nothing waits: the servers' threads go until a wait comes
			// (servers count them: Threads_connected, max_connections).
			for addr := range d.conns {
				d.drop(addr)
			}
		}
	}
}

// snapshot is the running statements of one moment.
type snapshot struct {
	members []Member
	slots   []*Slot
	nodes   map[string]*backend.Node // by server address
	waiting int                      // members past the threshold
}

func (d *Detector) snapshot() snapshot {
	now := time.Now()
	sn := snapshot{nodes: map[string]*backend.Node{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for s := range d.slots {
		s.mu.Lock()
		if s.active {
			m := Member{Session: s.session, Seq: s.seq, Start: s.start}
			for _, h := range s.running {
				m.Running = append(m.Running, h.t)
				sn.nodes[h.t.Addr] = h.node
			}
			for _, h := range s.holds {
				m.Holds = append(m.Holds, h.t)
				sn.nodes[h.t.Addr] = h.node
			}
			if now.Sub(s.start) >= d.after {
				sn.waiting++
				if s.counted != s.seq {
					s.counted = s.seq
					d.waits.Add(1)
				}
			}
			sn.members = append(sn.members, m)
			sn.slots = append(sn.slots, s)
		}
		s.mu.Unlock()
	}
	return sn
}

// round looks for deadlocks once and breaks those it confirms; it
// reports whether statements still wait past the threshold.
func (d *Detector) round() bool {
	first := d.snapshot()
	if first.waiting == 0 {
		return false
	}
	d.awaitFresh(first)
	if first = d.snapshot(); first.waiting == 0 {
		return false
	}
	if len(d.graph(first).cycles()) == 0 {
		return true
	}
	// Confirmed by a second read of renewed caches, every member blocked
	// in the same statement since the first.
	d.awaitFresh(first)
	second := d.snapshot()
	g2 := d.graph(second)
	for _, c := range g2.cycles() {
		// Every member must be blocked in the very statement it was in
		// at the first read: the cycle held for the whole interval.
		same := true
		var formed time.Time
		for _, i := range c.Members {
			m := second.members[i]
			same = same && slices.ContainsFunc(first.members, func(f Member) bool { return f.Session == m.Session && f.Seq == m.Seq })
			if m.Start.After(formed) {
				formed = m.Start
			}
		}
		if same {
			d.breakCycle(second, c, formed)
		}
	}
	return true
}

// awaitFresh waits until the servers of sn can be read afresh: InnoDB
// fills INNODB_TRX and INNODB_LOCK_WAITS from a cache it renews only when
// nobody has read it for 100 ms, so a read sooner after the detector's
// previous one could miss the wait that closed a cycle, or show one that
// has ended.
func (d *Detector) awaitFresh(sn snapshot) {
	var wait time.Duration
	for a := range sn.nodes {
		if t, ok := d.lastRead[a]; ok {
			wait = max(wait, cacheRenewal-time.Since(t))
		}
	}
	if wait > 0 {
		select {
		case <-d.stop:
		case <-time.After(wait):
		}
	}
}

// graph reads the servers of sn's transactions and builds the graph.
func (d *Detector) graph(sn snapshot) *graph {
	trx := map[string][]Trx{}
	addrs := make([]string, 0, len(sn.nodes))
	for a := range sn.nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, a := range addrs {
		d.lastRead[a] = time.Now()
		rows, err := d.read(a, sn.nodes[a])
		if err != nil {
			if !d.failing[a] { // once until it works again (a missing PROCESS privilege fails every round)
				d.log.Warn("deadlock detector: cannot read the lock waits of a node", zap.String("node", sn.nodes[a].Name), zap.String("addr", a), zap.Error(err))
			}
			d.failing[a] = true
			continue
		}
		delete(d.failing, a)
		trx[a] = rows
	}
	d.graphs.Add(1)
	return build(sn.members, trx, func(a string) string {
		if n := sn.nodes[a]; n != nil {
			return n.Name
		}
		return a
	})
}

// lockWaits lists a server's transactions with the transactions each
// waits for: both tables are filled from one InnoDB cache within one
// statement, so they agree.
const lockWaits = "SELECT t.trx_id, t.trx_mysql_thread_id, t.trx_weight, IFNULL(w.blocking_trx_id, '') " +
	"FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.INNODB_LOCK_WAITS w ON w.requesting_trx_id = t.trx_id"

// read runs lockWaits on the detector's connection to the server at addr.
func (d *Detector) read(addr string, n *backend.Node) ([]Trx, error) {
	c, err := d.conn(addr, n)
	if err != nil {
		return nil, err
	}
	res, err := c.Exec(lockWaits)
	if err != nil {
		d.drop(addr)
		return nil, err
	}
	out := make([]Trx, 0, len(res.Rows))
	for _, r := range res.Rows {
		if len(r) < 4 {
			continue
		}
		thread, _ := strconv.ParseUint(string(r[1]), 10, 32)
		weight, _ := strconv.ParseUint(string(r[2]), 10, 64)
		out = append(out, Trx{ID: string(r[0]), Thread: uint32(thread), Weight: weight, Blocker: string(r[3])})
	}
	return out, nil
}

// conn returns the detector's connection to addr, dialing it through n.
func (d *Detector) conn(addr string, n *backend.Node) (*backend.Conn, error) {
	if c := d.conns[addr]; c != nil && !c.Broken() {
		return c, nil
	}
	d.drop(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := n.Dial(ctx)
	if err != nil {
		return nil, err
	}
	d.conns[addr] = c
	return c, nil
}

func (d *Detector) drop(addr string) {
	if c := d.conns[addr]; c != nil {
		c.Close()
		delete(d.conns, addr)
	}
}

// breakCycle makes c's victim's statement stop: the slot is marked (the
// session answers 1213 and rolls the transaction back on every node) and
// its waiting statement is killed on each server it runs on.
func (d *Detector) breakCycle(sn snapshot, c Cycle, formed time.Time) {
	m := sn.members[c.Victim]
	err := mysqlDeadlock(strings.Join(c.Nodes, ", "))
	running, ok := sn.slots[c.Victim].mark(m.Seq, err)
	if !ok {
		return // its statement ended meanwhile
	}
	took := time.Since(formed)
	d.broken.Add(1) // before the kill: the victim's client may look at once
	d.latMu.Lock()
	d.latSum += took
	d.latMax = max(d.latMax, took)
	if len(d.latencies) == maxLatencies {
		d.latencies = slices.Delete(d.latencies, 0, 1)
	}
	d.latencies = append(d.latencies, took)
	d.latMu.Unlock()
	for _, h := range running {
		kc, cerr := d.conn(h.t.Addr, h.node)
		if cerr == nil {
			cerr = kc.KillQuery(h.t.ID, true)
		}
		if cerr != nil {
			d.log.Warn("deadlock detector: cannot stop the victim's statement", zap.String("node", h.node.Name), zap.Uint32("thread", h.t.ID), zap.Error(cerr))
		}
	}
	d.log.Info("deadlock across nodes broken", zap.Uint32("victim_session", m.Session), zap.Int("transactions", len(c.Members)),
		zap.Strings("nodes", c.Nodes), zap.Duration("after", took))
}

// String describes a cycle for logs and tests.
func (c Cycle) String() string {
	return fmt.Sprintf("members %v victim %d nodes %v", c.Members, c.Victim, c.Nodes)
}

// mysqlDeadlock is the error a victim's client gets: MariaDB's own for a
// deadlock, with the nodes the cycle went through.
func mysqlDeadlock(nodes string) *mysql.SQLError {
	return mysql.NewError(mysql.ErLockDeadlock, "Deadlock found when trying to get lock; try restarting transaction (shardgate: across nodes %s)", nodes)
}
