package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// Faults under the result cache (issue 39): the binlog stream killed, a
// backend restarted, binary logs purged, writes at a high rate. Writers
// update hot rows directly on their nodes, behind the proxy's back, with
// values that only grow; readers read them through the proxy. A read is
// stale when it returns a value older than one whose write was
// acknowledged more than max_staleness before the read began: there must
// be none, and the cache's memory stays within its budget throughout.

const (
	faultHot  = 8   // rows 1..8 are written
	faultRows = 100 // rows 9..100 are only read, to fill the cache
)

// ack is a value of a row and when its write was acknowledged.
type ack struct {
	v  int
	at time.Time
}

// faultRun is one run's shared record; its counters are safe for
// concurrent use.
type faultRun struct {
	e     *shardEnv
	bound time.Duration

	seq  atomic.Int64 // the last value written
	mu   sync.Mutex
	acks map[int][]ack // per hot row, in the order written

	reads, stale, readErrs, writes, writeErrs atomic.Int64
	maxLag, maxBytes                          atomic.Int64
	overBudget                                atomic.Int64
	example                                   atomic.Value // string: the first stale read
}

// floor returns the newest value of row id acknowledged before at.
func (r *faultRun) floor(id int, at time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := 0
	for _, a := range r.acks[id] {
		if a.at.Before(at) {
			v = a.v
		}
	}
	return v
}

// newFaultEnv is the corpus table with faultRows rows, c of the hot rows
// at "0", the smallest memory budget (1 MiB, which the cold reads'
// answers of about 1 KiB each overflow), and max_staleness 200ms.
func newFaultEnv(t *testing.T) *shardEnv {
	e := newCorpusEnv(t, "rc_fault", 0, func(cfg *config.Config) {
		cfg.Cache.Memory, cfg.Cache.MaxEntry, cfg.Cache.MaxStaleness = 1<<20, 4<<10, 200*time.Millisecond
	})
	var vals []string
	for i := 1; i <= faultRows; i++ {
		c := "0"
		if i > faultHot {
			c = strings.Repeat("x", 30)
		}
		vals = append(vals, fmt.Sprintf("(%d, %d, '%s')", i, 1000+i, c))
	}
	for _, v := range vals { // one row per INSERT: a multi-row one across shards is refused
		mustExec(t, e.app, "INSERT INTO t VALUES "+v)
	}
	return e
}

// rowHome is the node and subtable of a row.
type rowHome struct {
	node int
	sub  string
}

// write updates the hot rows of writer k of n directly, each time to a
// greater value, until stop closes; pause is the time between writes.
// Each row has one writer, so its values commit in the order acknowledged.
func (r *faultRun) write(stop <-chan struct{}, k, n int, pause time.Duration, homes map[int]rowHome) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		id := 1 + k + n*rand.IntN(faultHot/n)
		h := homes[id]
		v := r.seq.Add(1)
		ctx, cancel := context.WithTimeout(r.e.t.Context(), 5*time.Second)
		_, err := r.e.direct[h.node].ExecContext(ctx, fmt.Sprintf("UPDATE %s SET c = '%d' WHERE id = %d", h.sub, v, id))
		cancel()
		if err != nil {
			r.writeErrs.Add(1)
			continue
		}
		r.writes.Add(1)
		r.mu.Lock()
		r.acks[id] = append(r.acks[id], ack{int(v), time.Now()})
		r.mu.Unlock()
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// read reads hot and cold rows through the proxy until stop closes, on
// a session it opens again every 50 reads, and counts stale reads.
func (r *faultRun) read(stop <-chan struct{}, app *sql.DB) {
	for {
		ctx, cancel := context.WithTimeout(r.e.t.Context(), 5*time.Second)
		c, err := app.Conn(ctx)
		cancel()
		if err != nil {
			r.readErrs.Add(1)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for range 50 {
			select {
			case <-stop:
				c.Close()
				return
			default:
			}
			r.readOne(c)
		}
		c.Close()
	}
}

// readOne reads one hot row (and one cold one) and checks the hot one.
func (r *faultRun) readOne(c *sql.Conn) {
	ctx, cancel := context.WithTimeout(r.e.t.Context(), 5*time.Second)
	defer cancel()
	var s string
	cold := faultHot + 1 + rand.IntN(faultRows-faultHot)
	q := fmt.Sprintf("SELECT c, '%0800d' FROM t WHERE id = %d", rand.IntN(1e6), cold) // a key of its own, mostly
	if err := c.QueryRowContext(ctx, q).Scan(&s, &s); err != nil {
		r.readErrs.Add(1)
	}
	id := 1 + rand.IntN(faultHot)
	started := time.Now()
	floor := r.floor(id, started.Add(-r.bound))
	if err := c.QueryRowContext(ctx, "SELECT c FROM t WHERE id = "+strconv.Itoa(id)).Scan(&s); err != nil {
		r.readErrs.Add(1)
		return
	}
	r.reads.Add(1)
	if v, _ := strconv.Atoi(s); v < floor {
		r.stale.Add(1)
		r.example.CompareAndSwap(nil, fmt.Sprintf("row %d read %d at %s, but %d was acknowledged before %s",
			id, v, started.Format("15:04:05.000"), floor, started.Add(-r.bound).Format("15:04:05.000")))
	}
}

// watch samples the cache's bytes and its readers' lag until stop
// closes.
func (r *faultRun) watch(stop <-chan struct{}) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		st := r.e.p.srv.Stats().Cache
		if st.Bytes > st.Budget {
			r.overBudget.Add(1)
		}
		if st.Bytes > r.maxBytes.Load() {
			r.maxBytes.Store(st.Bytes)
		}
		for _, n := range st.Nodes {
			if n.Up && int64(n.Lag) > r.maxLag.Load() {
				r.maxLag.Store(int64(n.Lag))
			}
		}
	}
}

// runFault runs writers (n, pausing between writes), two readers and
// the watcher for about d, calls fault a third of the way in, and checks
// that no read was stale and the memory stayed within budget.
func (e *shardEnv) runFault(t *testing.T, d time.Duration, n int, pause time.Duration, fault func()) *faultRun {
	r := &faultRun{e: e, bound: e.p.cfg.Cache.MaxStaleness, acks: map[int][]ack{}}
	homes := map[int]rowHome{}
	for id := 1; id <= faultHot; id++ {
		node, sub := e.home(t, id)
		homes[id] = rowHome{node, sub}
	}
	before := *e.p.srv.Stats().Cache
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() { r.write(stop, k, n, pause, homes) })
	}
	for range 2 {
		wg.Go(func() { r.read(stop, e.app) })
	}
	wg.Go(func() { r.watch(stop) })
	time.Sleep(d / 3) // load before the fault
	fault()
	time.Sleep(2 * d / 3) // and after it
	close(stop)
	wg.Wait()
	after := *e.p.srv.Stats().Cache
	t.Logf("%d writes (%d failed), %d hot reads (%d failed), %d stale; hits %d, fills %d, flushes %d; max lag %v, max bytes %d of %d",
		r.writes.Load(), r.writeErrs.Load(), r.reads.Load(), r.readErrs.Load(), r.stale.Load(), after.Hits-before.Hits,
		after.Fills-before.Fills, after.Flushes-before.Flushes, time.Duration(r.maxLag.Load()), r.maxBytes.Load(), after.Budget)
	if n := r.stale.Load(); n != 0 {
		t.Errorf("%d stale reads (max_staleness %v); the first: %v", n, r.bound, r.example.Load())
	}
	if n := r.overBudget.Load(); n != 0 {
		t.Errorf("%d samples of the cache's bytes over its budget (max %d of %d)", n, r.maxBytes.Load(), after.Budget)
	}
	return r
}

// recovers waits until the cache serves a hit again.
func (e *shardEnv) recovers(t *testing.T, within time.Duration) {
	c := conn(t, e.app)
	start := time.Now()
	eventually(t, within, "the cache to serve hits again", func() bool {
		h := e.p.srv.Stats().Cache.Hits
		var s string
		for range 2 {
			c.QueryRowContext(t.Context(), "SELECT c FROM t WHERE id = 9").Scan(&s)
		}
		return e.p.srv.Stats().Cache.Hits > h
	})
	t.Logf("hits again %v after the fault ended", time.Since(start))
}

// killDumps kills the binary log dump connections on every node (the
// cache's stream is the only reader) and returns how many.
func (e *shardEnv) killDumps(t *testing.T) int {
	n := 0
	for _, d := range e.direct {
		rows, err := d.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'")
		if err != nil {
			t.Error(err)
			continue
		}
		got, err := scanStrings(rows)
		if err != nil {
			t.Error(err)
		}
		for _, id := range got {
			if _, err := d.Exec("KILL " + id[0]); err == nil {
				n++
			}
		}
	}
	return n
}

// waitDumps waits until every node has a binary log dump connection.
func (e *shardEnv) waitDumps(t *testing.T) {
	eventually(t, 20*time.Second, "the cache's stream on every node", func() bool {
		for _, d := range e.direct {
			var n int
			if err := d.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'").Scan(&n); err != nil || n == 0 {
				return false
			}
		}
		return true
	})
}

// purge flushes and purges every node's binary logs up to the one now
// written, then kills the dump connections (which hold the logs they
// read) and purges again, so the stream restarts with its files gone.
func (e *shardEnv) purge(t *testing.T) {
	for round := range 2 {
		for i, d := range e.direct {
			mustExec(t, d, "FLUSH BINARY LOGS")
			var file, pos, doDB, ignoreDB, gtid sql.NullString
			if err := d.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB, &gtid); err != nil {
				if err := d.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
					t.Fatal(err)
				}
			}
			_, err := d.Exec("PURGE BINARY LOGS TO '" + file.String + "'")
			t.Logf("round %d node %d: PURGE BINARY LOGS TO %s: %v; logs left %d", round, i+1, file.String, err,
				len(queryStrings(t, d, "SHOW BINARY LOGS")))
		}
		if round == 0 {
			t.Logf("killed %d dump connections", e.killDumps(t))
		}
	}
}

// lag holds the cache's binary log reader back (20 ms before each change
// it applies, through the CacheChange knob) until it is behind by more
// than max_staleness, checks that the cache then serves nothing for a
// second, purges the binary logs while the reader is still behind (the
// stream starts again past a gap), and lets the reader go.
func (e *shardEnv) lag(t *testing.T) {
	var hold atomic.Bool
	hold.Store(true)
	hook := func(_, _, _ string, _ map[string]any) {
		if hold.Load() {
			time.Sleep(20 * time.Millisecond)
		}
	}
	knobs := e.p.srv.Knobs()
	knobs.CacheChange.Store(&hook)
	defer knobs.CacheChange.Store(nil)
	defer hold.Store(false)
	bound := e.p.cfg.Cache.MaxStaleness
	time.Sleep(2 * bound) // the writes go on: the reader falls behind
	st0 := *e.p.srv.Stats().Cache
	time.Sleep(time.Second)
	st1 := *e.p.srv.Stats().Cache
	var lags []string
	for _, n := range st1.Nodes {
		lags = append(lags, fmt.Sprintf("%s up %v lag %v", n.Name, n.Up, n.Lag))
	}
	t.Logf("held back for %v: %s; in the last second: hits %d, misses %d, bypassed %d", 2*bound+time.Second, strings.Join(lags, ", "),
		st1.Hits-st0.Hits, st1.Misses-st0.Misses, st1.Bypassed-st0.Bypassed)
	if st1.Hits != st0.Hits {
		t.Errorf("%d hits while the reader was behind by more than max_staleness (%v)", st1.Hits-st0.Hits, bound)
	}
	e.purge(t)
}

// TestCacheFaults: faults under the cache with writes going on behind
// the proxy: 0 stale reads, memory within budget, and hits again after.
func TestCacheFaults(t *testing.T) {
	e := newFaultEnv(t)
	defer func() { t.Logf("cache stats %+v", *e.p.srv.Stats().Cache) }()
	e.recovers(t, 10*time.Second)
	e.run("binlog stream killed", func(t *testing.T) {
		e.runFault(t, 3*time.Second, 2, 5*time.Millisecond, func() {
			for range 3 {
				start := time.Now()
				e.waitDumps(t)
				t.Logf("killed %d dump connections (%v after the last kill)", e.killDumps(t), time.Since(start))
			}
		})
		e.recovers(t, 20*time.Second)
	})
	e.run("PURGE BINARY LOGS", func(t *testing.T) {
		e.runFault(t, 3*time.Second, 2, 5*time.Millisecond, func() { e.purge(t) })
		e.recovers(t, 20*time.Second)
	})
	e.run("backend restarted", func(t *testing.T) {
		e.runFault(t, 4*time.Second, 2, 5*time.Millisecond, func() {
			start := time.Now()
			if err := e.servers[1].Restart(); err != nil {
				t.Error(err)
			}
			t.Logf("node2 restarted in %v", time.Since(start))
		})
		e.recovers(t, 30*time.Second)
	})
	e.run("injected lag, then PURGE BINARY LOGS while behind", func(t *testing.T) {
		r := e.runFault(t, 4*time.Second, 2, 5*time.Millisecond, func() { e.lag(t) })
		if lag := time.Duration(r.maxLag.Load()); lag <= r.bound {
			t.Errorf("the readers' lag reached only %v with the reader held back: the fault did not happen", lag)
		}
		e.recovers(t, 20*time.Second)
	})
	e.run("high write rate", func(t *testing.T) {
		r := e.runFault(t, 4*time.Second, 4, 0, func() {})
		if lag := time.Duration(r.maxLag.Load()); lag > 2*time.Second {
			t.Errorf("the readers' lag reached %v under writes", lag)
		}
		e.recovers(t, 20*time.Second)
	})
}
