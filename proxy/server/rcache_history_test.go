package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/resultcache"
)

// The result cache's history checks (issue 39, "Done means"): sessions
// through the proxy write and read keys of a cached table while each
// operation's call and return times and values are recorded, and the
// histories are checked afterwards: read-your-writes (porcupine's
// per-key register model over each session's own keys, plus a count of
// reads older than the session's own acknowledged write), convergence
// after writers stop (every cached answer equals the node's row), the
// staleness other sessions see, and the window between a row's change
// and its fill. Every statement is text (no arguments, so the driver
// sends COM_QUERY) so the text cache path is what is checked.
//
// A row's value c is "v<id>" as inserted, then "s<session>-<seq>" where
// seq grows with each write of a session, so a read tells which write it
// saw.

// historyOps is the number of operations TestCacheReadYourWrites runs:
// SG_CACHE_HISTORY_OPS, 100 000 by default (about 10 s on a loaded
// 2-core machine). The figure is 1 000 000 (about 80 to 100 s).
func historyOps(t *testing.T) int {
	t.Helper()
	s := os.Getenv("SG_CACHE_HISTORY_OPS")
	if s == "" {
		return 100_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("SG_CACHE_HISTORY_OPS=%q: want a positive count", s)
	}
	return n
}

// newHistoryEnv is newCacheEnv (rows 1..n) with pools large enough for
// every session of these tests at once, once the cache's readers follow
// both nodes. The tables of more rules are cached too.
func newHistoryEnv(t *testing.T, db string, n int, more ...config.ShardRule) *shardEnv {
	t.Helper()
	rules := append([]config.ShardRule{{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}, more...)
	e := newShardEnvWith(t, db, func(cfg *config.Config) {
		cfg.Cache = &config.Cache{Memory: 8 << 20, MaxEntry: 64 << 10, MaxStaleness: time.Second, MaxWaiters: 64}
		for _, r := range rules {
			cfg.Cache.Tables = append(cfg.Cache.Tables, db+"."+r.Table)
			if r.Sequence != "" {
				cfg.Sidecar = config.Sidecar{Node: "node1", DB: db + "_sidecar"}
			}
		}
		for i := range cfg.Nodes {
			cfg.Nodes[i].MaxConnsLimit = 64
		}
	}, rules...)
	mustExec(t, e.app, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, u INT UNIQUE, c VARCHAR(40) NOT NULL)")
	for i := 1; i <= n; i++ {
		mustExec(t, e.app, fmt.Sprintf("INSERT INTO t VALUES (%d, %d, 'v%d')", i, 100+i, i))
	}
	histCaughtUp(t, e, time.Now())
	return e
}

// histStats is the proxy's cache counters now.
func histStats(e *shardEnv) resultcache.Stats { return *e.p.srv.Stats().Cache }

// histDelta says what the cache did between two snapshots.
func histDelta(a, b resultcache.Stats) string {
	return fmt.Sprintf("hits %d, misses %d, fills %d, refused by the guard %d, waits %d, bypassed %d, changes %d, invalidated %d, flushes %d+%d",
		b.Hits-a.Hits, b.Misses-a.Misses, b.Fills-a.Fills, b.FillsRefused-a.FillsRefused, b.Waits-a.Waits, b.Bypassed-a.Bypassed,
		b.Changes-a.Changes, b.Invalidated-a.Invalidated, b.TableFlushes-a.TableFlushes, b.Flushes-a.Flushes)
}

// histCaughtUp waits until the cache's reader of every node was known
// caught up with the node at a moment after since: it applied a position
// the node reported after since, so every write acknowledged before since
// is applied. The nodes' own @@gtid_binlog_pos, read directly, is logged.
func histCaughtUp(t *testing.T, e *shardEnv, since time.Time) {
	t.Helper()
	var pos []string
	for _, d := range e.direct {
		var p string
		if err := d.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	eventually(t, 10*time.Second, "the cache to apply @@gtid_binlog_pos "+strings.Join(pos, " / "), func() bool {
		now := time.Now()
		st := histStats(e)
		for _, n := range st.Nodes {
			if !n.Up || n.Lag < 0 || !now.Add(-n.Lag).After(since) {
				return false
			}
		}
		return len(st.Nodes) == len(e.direct)
	})
}

// histValue is what c says of a row: the seq of the write it holds, 0 for
// the row as inserted, -1 for anything but a write of owner's (owner -1:
// any session's).
func histValue(c string, id, owner int) int64 {
	if c == "v"+itoa(id) {
		return 0
	}
	s, seq, ok := strings.Cut(strings.TrimPrefix(c, "s"), "-")
	n, err1 := strconv.Atoi(s)
	v, err2 := strconv.ParseInt(seq, 10, 64)
	if !ok || !strings.HasPrefix(c, "s") || err1 != nil || err2 != nil || v <= 0 || owner >= 0 && n != owner {
		return -1
	}
	return v
}

func histRead(c *sql.Conn, q string) (string, error) {
	var s string
	err := c.QueryRowContext(context.Background(), q).Scan(&s)
	return s, err
}

func histExec(c *sql.Conn, q string) error {
	_, err := c.ExecContext(context.Background(), q)
	return err
}

// histOp is one operation of a session's history.
type histOp struct {
	key       int
	write     bool
	seq       int64 // written, or read (see histValue)
	call, ret int64 // ns since the history's start
}

// histRegIn is a register operation for porcupine.
type histRegIn struct {
	key   int
	write bool
	seq   int64
}

// histRegister is one register per key, each starting at 0 (the row
// as inserted).
var histRegister = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(histRegIn).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(histRegIn)
		if in.write {
			return true, in.seq
		}
		return output.(int64) == state.(int64), state
	},
}

// TestCacheReadYourWrites: 16 sessions, each owning 4 keys, write one of
// their keys and read it back, read another key of theirs, and read 3
// keys of other sessions, through the proxy. A session's reads of its
// own keys must be linearizable per key (porcupine) and never older than
// its own last acknowledged write; reads of others' keys must return a
// value their owner wrote.
func TestCacheReadYourWrites(t *testing.T) {
	const sessions, own = 16, 4
	ops := historyOps(t)
	e := newHistoryEnv(t, "rc_ryw", sessions*own)
	st0 := histStats(e)
	start := time.Now()
	hist := make([][]histOp, sessions)
	var wg sync.WaitGroup
	for s := range sessions {
		c := conn(t, e.app)
		wg.Go(func() { hist[s] = histSession(t, c, s, own, sessions*own, ops/sessions, start) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	st1 := histStats(e)
	porc, total, reads, older := histCheckOwn(t, hist, own)
	checkStart := time.Now()
	res := porcupine.CheckOperationsTimeout(histRegister, porc, time.Minute)
	hits := st1.Hits - st0.Hits
	t.Logf("%d ops (%d reads, %d own-key ops checked) in %v (%.0f ops/s); porcupine %s in %v; reads older than own write %d; hits %.1f%% of reads; %s",
		total, reads, len(porc), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		res, time.Since(checkStart).Round(time.Millisecond), older, 100*float64(hits)/float64(reads), histDelta(st0, st1))
	if res != porcupine.Ok {
		t.Errorf("porcupine: the sessions' reads of their own keys are %s for a register per key", res)
	}
	if hits < uint64(reads)/5 {
		t.Errorf("only %d of %d reads were cache hits: the history says little about the cache", hits, reads)
	}
}

// histCheckOwn checks each session's history: a read of its own key
// must return its last acknowledged write of the key (each failure is
// reported with the key's operations before it), a read of another's
// key a value that session wrote. It returns the own-key operations for
// porcupine and the counts of operations, reads and reads older than
// the session's own write.
func histCheckOwn(t *testing.T, hist [][]histOp, own int) (porc []porcupine.Operation, total, reads, older int) {
	t.Helper()
	for s, h := range hist {
		total += len(h)
		last := map[int]int64{}
		for i, op := range h {
			switch {
			case op.write:
				last[op.key] = op.seq
			case (op.key-1)/own != s:
				reads++
				if op.seq < 0 {
					t.Errorf("session %d read key %d of session %d: a value its owner never wrote (op %d)", s, op.key, (op.key-1)/own, i)
				}
				continue
			default:
				reads++
				if op.seq != last[op.key] {
					older++
					histReport(t, hist, s, i, last[op.key])
				}
			}
			porc = append(porc, porcupine.Operation{ClientId: s, Input: histRegIn{op.key, op.write, op.seq}, Call: op.call, Output: op.seq, Return: op.ret})
		}
	}
	return porc, total, reads, older
}

// histReport reports the read hist[s][i], which did not return the
// session's last acknowledged write of its key (want), with the key's
// operations before it, and other sessions' reads of the key from 20 ms
// before to 20 ms after it (did they see the old value too?).
func histReport(t *testing.T, hist [][]histOp, s, i int, want int64) {
	t.Helper()
	h := hist[s]
	r := h[i]
	var before, others []string
	for j := i - 1; j >= 0 && len(before) < 4; j-- {
		if op := h[j]; op.key == r.key {
			before = append(before, fmt.Sprintf("[%d] write=%v seq=%d call=%dus ret=%dus", j, op.write, op.seq, op.call/1000, op.ret/1000))
		}
	}
	for o, oh := range hist {
		for _, op := range oh {
			if o != s && op.key == r.key && op.call > r.call-20e6 && op.call < r.ret+20e6 {
				others = append(others, fmt.Sprintf("s%d seq=%d call=%dus ret=%dus", o, op.seq, op.call/1000, op.ret/1000))
			}
		}
	}
	t.Errorf("session %d op %d: read of own key %d returned seq %d, want the session's last acknowledged write %d (call=%dus ret=%dus); before it: %s; others' reads around it: %s",
		s, i, r.key, r.seq, want, r.call/1000, r.ret/1000, strings.Join(before, "; "), strings.Join(others, "; "))
}

// histSession runs n operations of session s on c: write an own key, read
// it, read an own key at random, read 3 keys of others.
func histSession(t *testing.T, c *sql.Conn, s, own, keys, n int, start time.Time) []histOp {
	r := rand.New(rand.NewPCG(uint64(s), 39))
	h := make([]histOp, 0, n)
	first := s*own + 1
	var seq int64
	do := func(k int, write bool) bool {
		op := histOp{key: k, write: write, call: time.Since(start).Nanoseconds()}
		var err error
		if write {
			seq++
			op.seq = seq
			err = histExec(c, fmt.Sprintf("UPDATE t SET c = 's%d-%d' WHERE id = %d", s, seq, k))
		} else {
			var v string
			v, err = histRead(c, fmt.Sprintf("SELECT c FROM t WHERE id = %d", k))
			op.seq = histValue(v, k, (k-1)/own)
		}
		op.ret = time.Since(start).Nanoseconds()
		if err != nil {
			t.Errorf("session %d, key %d, write=%v: %v", s, k, write, err)
			return false
		}
		h = append(h, op)
		return len(h) < n
	}
	for i := 0; ; i++ {
		k := first + i%own
		if !do(k, true) || !do(k, false) || !do(first+r.IntN(own), false) {
			return h
		}
		for range 3 {
			o := 1 + r.IntN(keys-own)
			if o >= first {
				o += own
			}
			if !do(o, false) {
				return h
			}
		}
	}
}

// histGroup is sessions of one kind for histHammer: n connections of db, each
// running step (s: the session, i: its iteration) until the time is up.
type histGroup struct {
	db   *sql.DB
	n    int
	step func(c *sql.Conn, s, i int, r *rand.Rand) error
}

// histHammer runs every group's sessions at once for d and returns how many
// steps ran; a step's error fails the test and ends its session.
func histHammer(t *testing.T, d time.Duration, groups ...histGroup) int64 {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var steps int64
	stop := time.Now().Add(d)
	base := 0
	for _, g := range groups {
		for s := range g.n {
			c := conn(t, g.db)
			r := rand.New(rand.NewPCG(uint64(base+s), 39))
			wg.Go(func() {
				i := 0
				for ; time.Now().Before(stop); i++ {
					if err := g.step(c, s, i, r); err != nil {
						t.Errorf("session %d, step %d: %v", s, i, err)
						break
					}
				}
				mu.Lock()
				steps += int64(i)
				mu.Unlock()
			})
		}
		base += g.n
	}
	wg.Wait()
	return steps
}

// histLocate returns the node (index of e.direct) and the subtable that hold
// row id, read directly.
func histLocate(t *testing.T, e *shardEnv, id int) (int, string) {
	t.Helper()
	for _, s := range hashSubs("t") {
		var n int
		if err := e.direct[s.node].QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE id = %d", s.name, id)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return s.node, s.name
		}
	}
	t.Fatalf("row %d is on no node", id)
	return 0, ""
}

// histProbe is a cacheable statement that reads c of row key.
type histProbe struct {
	q   string
	key int
}

// histPointProbes reads c of each key by primary key.
func histPointProbes(keys ...int) []histProbe {
	var ps []histProbe
	for _, k := range keys {
		ps = append(ps, histProbe{fmt.Sprintf("SELECT c FROM t WHERE id = %d", k), k})
	}
	return ps
}

// histConverged waits, once the writers have stopped, until the cache
// has applied both nodes' positions, then reads each probe 5 times
// through the proxy from a new session: every answer must equal the row
// read directly on its node, first of all the answers kept from before
// (a first read that hits), then those filled now.
func histConverged(t *testing.T, e *shardEnv, probes []histProbe) {
	t.Helper()
	histCaughtUp(t, e, time.Now())
	c := conn(t, e.app)
	st0 := histStats(e)
	stale, kept := 0, 0
	for _, p := range probes {
		node, table := histLocate(t, e, p.key)
		var want string
		if err := e.direct[node].QueryRow(fmt.Sprintf("SELECT c FROM %s WHERE id = %d", table, p.key)).Scan(&want); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			h0 := histStats(e).Hits
			got, err := histRead(c, p.q)
			if err != nil {
				t.Fatalf("%s: %v", p.q, err)
			}
			hit := histStats(e).Hits > h0
			if i == 0 && hit {
				kept++
			}
			if got != want {
				stale++
				t.Errorf("%s, read %d after the cache caught up (hit: %v): %q, the node has %q", p.q, i, hit, got, want)
			}
		}
	}
	st1 := histStats(e)
	t.Logf("converged: %d entries; %d probes x 5 reads, %d answered first by an entry kept from the load, %d stale; %s",
		st0.Entries, len(probes), kept, stale, histDelta(st0, st1))
	if st1.Hits-st0.Hits < uint64(len(probes)) {
		t.Errorf("%d hits over %d probes read 5 times: the cache did not answer", st1.Hits-st0.Hits, len(probes))
	}
}

// histRounds rounds of histRound each: the convergence checks stop the
// writers several times, so that more fills race a key's last write.
const (
	histRounds = 5
	histRound  = 600 * time.Millisecond
)

// TestCacheConvergesHotKeys: 16 sessions read and write 10 hot keys
// half and half, reading through the proxy, half of them writing
// through the proxy and half directly on the nodes (so that their reads
// are not held back by their own writes); once they stop and the cache
// has applied the nodes' positions, no cached answer is stale (in
// histRounds rounds).
func TestCacheConvergesHotKeys(t *testing.T) {
	const hot = 10
	e := newHistoryEnv(t, "rc_hot", hot)
	var direct [hot + 1]string
	var on [hot + 1]*sql.DB
	for k := 1; k <= hot; k++ {
		node, table := histLocate(t, e, k)
		on[k], direct[k] = e.direct[node], fmt.Sprintf("UPDATE %s SET c = '%%s' WHERE id = %d", table, k)
	}
	step := func(c *sql.Conn, s, i int, r *rand.Rand) error {
		k, v := 1+r.IntN(hot), fmt.Sprintf("s%d-%d", s, i+1)
		switch {
		case r.IntN(2) == 0:
			_, err := histRead(c, fmt.Sprintf("SELECT c FROM t WHERE id = %d", k))
			return err
		case s%2 == 1:
			_, err := on[k].Exec(fmt.Sprintf(direct[k], v))
			return err
		}
		return histExec(c, fmt.Sprintf("UPDATE t SET c = '%s' WHERE id = %d", v, k))
	}
	for round := range histRounds {
		st0 := histStats(e)
		n := histHammer(t, histRound, histGroup{db: e.app, n: 16, step: step})
		t.Logf("round %d: %d ops in %v; %s", round, n, histRound, histDelta(st0, histStats(e)))
		histConverged(t, e, histPointProbes(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
	}
}

// histAck is a write acknowledged to its writer.
type histAck struct {
	seq int64
	at  int64 // ns since the start, when the OK arrived
}

// TestCacheStalenessUnderWrites: sysbench oltp_write_only with 16
// threads writes a cached table through the proxy (the write load the
// cache's reader follows), while one more session updates 8 probe keys in
// turn every 5 ms and 8 other sessions each read one probe key in a loop
// through the proxy. A probe write's staleness is how long after its
// acknowledgement the cache still held the answer it made wrong: the
// moment the reader applied its change (the CacheChange knob) less the
// moment the writer had its OK, or 0 when the change was applied first;
// once applied, neither a kept answer nor a fill under way serves the old
// row (TestCacheFillRacesInvalidation, TestCacheFillWindow). The readers'
// histories give the same from the client's side, as bounds
// (histStaleness). The bound is max < 1 s (asserted) and its goal
// p99 < 10 ms (reported: timings are not asserted on a shared machine).
func TestCacheStalenessUnderWrites(t *testing.T) {
	const probes = 8
	e := newHistoryEnv(t, "rc_stale", probes, config.ShardRule{Table: "sbtest1", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}, Sequence: "id", SequenceBlock: 1000})
	t.Cleanup(func() {
		if err := dropDirect(e.servers[0], e.db+"_sidecar"); err != nil {
			t.Error(err)
		}
	})
	bin, args := sysbenchFor(t, e.p, e.db, 10000)
	args[0] = "oltp_write_only"
	histCaughtUp(t, e, time.Now())

	start := time.Now()
	var mu sync.Mutex
	applied := map[int64]int64{} // probe write seq -> ns since start when the reader applied it
	hook := func(_, op, table string, after map[string]any) {
		if op != "update" || !strings.EqualFold(table, e.db+".t") {
			return
		}
		at := time.Since(start).Nanoseconds()
		c, _ := after["c"].(string)
		if b, ok := after["c"].([]byte); ok {
			c = string(b)
		}
		if seq := histValue(c, 0, 0); seq > 0 {
			mu.Lock()
			applied[seq] = at
			mu.Unlock()
		}
	}
	e.p.srv.Knobs().CacheChange.Store(&hook)
	defer e.p.srv.Knobs().CacheChange.Store(nil)

	const d = 4 * time.Second
	sb := exec.Command(bin, append(slices.Clone(args), "--threads=16", "--time="+strconv.Itoa(int(d/time.Second)+1), "--report-interval=0", "run")...)
	var sbOut bytes.Buffer
	sb.Stdout, sb.Stderr = &sbOut, &sbOut
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // sysbench connects and starts writing
	acks := make([][]histAck, probes+1)
	reads := make([][]histOp, probes)
	st0 := histStats(e)
	histHammer(t, d-time.Second, histGroup{db: e.app, n: 1, step: func(c *sql.Conn, _, i int, _ *rand.Rand) error {
		time.Sleep(5 * time.Millisecond) // pacing: a probe key changes every 40 ms
		k, seq := 1+i%probes, int64(i+1)
		if err := histExec(c, fmt.Sprintf("UPDATE t SET c = 's0-%d' WHERE id = %d", seq, k)); err != nil {
			return err
		}
		acks[k] = append(acks[k], histAck{seq, time.Since(start).Nanoseconds()})
		return nil
	}}, histGroup{db: e.app, n: probes, step: func(c *sql.Conn, s, _ int, _ *rand.Rand) error {
		op := histOp{key: s + 1, call: time.Since(start).Nanoseconds()}
		v, err := histRead(c, fmt.Sprintf("SELECT c FROM t WHERE id = %d", s+1))
		op.ret, op.seq = time.Since(start).Nanoseconds(), histValue(v, s+1, 0)
		reads[s] = append(reads[s], op)
		return err
	}})
	st1 := histStats(e)
	if err := sb.Wait(); err != nil {
		t.Fatalf("sysbench oltp_write_only: %v\n%s", err, sbOut.String())
	}
	var tps string
	for _, l := range strings.Split(sbOut.String(), "\n") {
		if strings.Contains(l, "transactions:") || strings.Contains(l, "ignored errors:") {
			tps += strings.Join(strings.Fields(l), " ") + "; "
		}
	}
	e.p.srv.Knobs().CacheChange.Store(nil)

	var stale, seen, asked, visible []time.Duration
	n, writes := 0, 0
	mu.Lock()
	for k := 1; k <= probes; k++ {
		n += len(reads[k-1])
		for _, op := range reads[k-1] {
			if op.seq < 0 {
				t.Errorf("read of key %d at %dus: a value its writer never wrote", op.key, op.call/1000)
			}
		}
		for _, w := range acks[k] {
			writes++
			at, ok := applied[w.seq]
			if !ok {
				t.Errorf("probe write %d of key %d (acknowledged at %v) was never applied by the cache's reader", w.seq, k, time.Duration(w.at))
				continue
			}
			stale = append(stale, time.Duration(max(0, at-w.at)))
			if s, a, v, ok := histStaleness(reads[k-1], w); ok {
				seen, asked, visible = append(seen, s), append(asked, a), append(visible, v)
			}
		}
	}
	mu.Unlock()
	if len(stale) == 0 || len(visible) == 0 {
		t.Fatal("no probe write was measured")
	}
	p, ps, pa, pv := histPercentiles(stale), histPercentiles(seen), histPercentiles(asked), histPercentiles(visible)
	t.Logf("sysbench oltp_write_only, 16 threads: %s%d probe writes, %d probe reads in %v", tps, writes, n, d-time.Second)
	t.Logf("staleness p50/p99/max: applied after the OK %v/%v/%v; from the readers' side: last stale read sent %v/%v/%v, first fresh read sent %v/%v/%v, returned %v/%v/%v",
		p[0], p[1], p[2], ps[0], ps[1], ps[2], pa[0], pa[1], pa[2], pv[0], pv[1], pv[2])
	t.Logf("cache: %s", histDelta(st0, st1))
	if p[2] >= time.Second || ps[2] >= time.Second {
		t.Errorf("max staleness %v (applied) / %v (stale read seen): want under 1s", p[2], ps[2])
	}
	if hits := st1.Hits - st0.Hits; hits < uint64(n)/5 {
		t.Errorf("only %d of %d probe reads were cache hits: the staleness measured is not the cache's", hits, n)
	}
}

// histStaleness measures write w of a key from its reader's reads, sent
// back to back: the latest read sent after w's acknowledgement that
// returned an older value (seen, a lower bound of w's staleness), and
// the first that returned w or newer: when it was sent (asked, the
// staleness to within one hit's time, as the read before it returned
// the old value) and when it returned (visible, an upper bound that
// includes the backend read of a miss). ok is false when no read saw w.
func histStaleness(reads []histOp, w histAck) (seen, asked, visible time.Duration, ok bool) {
	i, _ := slices.BinarySearchFunc(reads, w.at, func(op histOp, at int64) int { return int(op.call - at) })
	for _, op := range reads[i:] {
		if op.seq >= w.seq {
			return seen, time.Duration(max(0, op.call-w.at)), time.Duration(op.ret - w.at), true
		}
		seen = time.Duration(op.call - w.at)
	}
	return 0, 0, 0, false
}

// histPercentiles returns p50, p99 and max of ds.
func histPercentiles(ds []time.Duration) [3]time.Duration {
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return [3]time.Duration{at(0.50), at(0.99), ds[len(ds)-1]}
}

// histReadAll reads q n times on c and fails the test on any answer but
// want.
func histReadAll(t *testing.T, c *sql.Conn, q, want string, n int, when string) {
	t.Helper()
	for i := range n {
		got, err := histRead(c, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got != want {
			t.Fatalf("%s, read %d %s: %q, want %q", q, i, when, got, want)
		}
	}
}

// TestCacheFillWindow holds a row locked by a transaction of the node's
// own that changed it and has not committed (as a commit is while its
// binary log event is written but not yet visible in InnoDB): a fill of
// the row must not keep anything (its locking read NOWAIT fails and the
// statement runs as written, reading the committed row); once the
// transaction commits, every read returns the new row, before and after
// the cache has applied the commit.
func TestCacheFillWindow(t *testing.T) {
	e := newHistoryEnv(t, "rc_window", 8)
	const q = "SELECT c FROM t WHERE id = 5"
	node, table := histLocate(t, e, 5)
	c, other := conn(t, e.app), conn(t, e.app)
	tx, err := e.direct[node].BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(fmt.Sprintf("UPDATE %s SET c = 'new' WHERE id = 5", table)); err != nil {
		t.Fatal(err)
	}
	st0 := histStats(e)
	histReadAll(t, c, q, "v5", 5, "while the row is locked")
	histReadAll(t, other, q, "v5", 5, "while the row is locked")
	st1 := histStats(e)
	t.Logf("while locked: %s", histDelta(st0, st1))
	if st1.Fills != st0.Fills || st1.Hits != st0.Hits {
		t.Fatalf("a read of a row locked by a change under way was kept: fills %d -> %d, hits %d -> %d", st0.Fills, st1.Fills, st0.Hits, st1.Hits)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	histReadAll(t, c, q, "new", 20, "after COMMIT")
	histReadAll(t, other, q, "new", 20, "after COMMIT")
	histCaughtUp(t, e, committed)
	h0 := histStats(e).Hits
	histReadAll(t, conn(t, e.app), q, "new", 20, "after the cache applied the COMMIT")
	if h := histStats(e).Hits - h0; h == 0 {
		t.Errorf("no hit after the commit was applied: the fill window check proves nothing")
	}
}

// TestCacheFillRacesInvalidation: 12 sessions read one row through the
// proxy by four cacheable statements (four answers of one key) while 4
// sessions update it directly on its node, so fills race invalidations;
// once the writers stop and the cache has applied the node's position,
// every answer equals the row (in histRounds rounds).
func TestCacheFillRacesInvalidation(t *testing.T) {
	e := newHistoryEnv(t, "rc_race", 8)
	const k = 3
	node, table := histLocate(t, e, k)
	probes := []histProbe{
		{"SELECT c FROM t WHERE id = 3", k}, {"SELECT c FROM t WHERE id IN (3)", k},
		{"SELECT c FROM t WHERE id = 3 LIMIT 1", k}, {"SELECT c FROM t WHERE id = 3 AND u = 103", k},
	}
	for round := range histRounds {
		st0 := histStats(e)
		n := histHammer(t, histRound, histGroup{db: e.direct[node], n: 4, step: func(c *sql.Conn, s, i int, _ *rand.Rand) error {
			return histExec(c, fmt.Sprintf("UPDATE %s SET c = 's%d-%d' WHERE id = %d", table, s, round*1_000_000+i+1, k))
		}}, histGroup{db: e.app, n: 12, step: func(c *sql.Conn, s, i int, r *rand.Rand) error {
			p := probes[r.IntN(len(probes))]
			v, err := histRead(c, p.q)
			if err == nil && histValue(v, k, -1) < 0 {
				err = fmt.Errorf("%s: %q, a value no writer wrote", p.q, v)
			}
			return err
		}})
		t.Logf("round %d: %d steps in %v; %s", round, n, histRound, histDelta(st0, histStats(e)))
		histConverged(t, e, probes)
	}
}
