package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// TestProcessFleetCutoverFrozenProxy (issue 36): three proxy processes on
// a real etcd, three MariaDB nodes, and a counter workload through all
// three proxies while table t goes from 2 subtables (one on node1, one on
// node2) to 8 over the three nodes. One proxy that does not lead is
// frozen (SIGSTOP) just before the cutover and let go (SIGCONT) once the
// workflow is switched: it cannot acknowledge, so the cutover waits
// cutover_ack_wait for it and fences the old subtables; the statements
// its clients sent meanwhile meet the fence after the thaw and run again
// on the new subtables (or, inside a transaction, get 1213 and the
// client runs the transaction again).
//
// The workload: every worker inserts rows of its own (c = 1) and adds 1
// to counters (its own rows, and preloaded rows every worker shares), in
// autocommitted statements and in short transactions (an insert, two
// increments on the same subtable under both rules), and tallies what was
// acknowledged. An outcome the client cannot know (the connection broke
// before the answer) is resolved afterwards where it can be (the row the
// operation inserted is there or not) and otherwise allowed for as a
// range. At the end every row's counter must equal the tally exactly: no
// increment lost, none applied twice.
//
// A transaction open on an old subtable holds the fence's RENAME TABLE
// (it waits for the metadata lock, bounded by cutover_timeout, then the
// cutover is postponed and tried again a second later): a proxy frozen
// with one open delays the cutover until it is thawed. The freeze is
// therefore taken between the frozen proxy's transactions (its clients'
// transactions hold a read lock the freezer takes exclusively), so that
// the cutover happens while it is frozen; the statements its clients
// send after that moment, transactions included, wait for it.
//
// sysbench oltp_read_write runs through all three proxies beside it, on
// a table of its own that does not move (one thread per proxy, the
// frozen one's included): a sysbench transaction open through the frozen
// proxy on the moving table would hold the fence (the cutover would wait
// for the thaw, see above), and sysbench's counts cannot say whether a
// row was lost; the counter workload's can. sysbench must run to the end
// of the test without a fatal error.
func TestProcessFleetCutoverFrozenProxy(t *testing.T) {
	nodeSrv := threeServers(t)
	f := newFleetEnv(t)
	const db, preload = "fleetcut", 20000
	ds := freshDatabase(t, db, nodeSrv...)
	shard := "    shard:\n" + hashRule(db, "t")
	// cutover_timeout 2s: with a member frozen, the 500 ms ack wait takes
	// half the default 1 s, and on a loaded machine (load average 25 on 2
	// cores) the rest of the pause outlasted the other half in all 10
	// tries once in 12 runs.
	rev0 := f.put(t, topoYAML(fleetNodes(nodeSrv...), []fleetSchema{{user: appUser, nodes: []string{"node1", "node2", "node3"}, shard: shard}})+"move:\n  cutover_timeout: 2s\n")

	var ms []fleetMember
	relays := map[*proc]*tcpRelay{}
	for range 3 {
		r := newTCPRelay(t, strings.TrimPrefix(f.etcd.ClientURL, "http://"))
		m := f.launchAdmin(t, "http://"+r.addr())
		relays[m.p] = r
		ms = append(ms, m)
	}
	procs := procsOf(ms)
	for _, p := range procs {
		waitServing(t, p, 20*time.Second)
	}
	waitApplied(t, procs, rev0, 10*time.Second)
	lp := f.memberProc(t, procs, f.waitLeader(t, 20*time.Second, ""))
	var leader, frozen *fleetMember
	for i := range ms {
		if ms[i].p == lp {
			leader = &ms[i]
		} else if frozen == nil {
			frozen = &ms[i]
		}
	}

	execAll(t, ms[0].p.openDB(t, db), "CREATE TABLE t (id BIGINT PRIMARY KEY, c BIGINT NOT NULL)")
	// Preloaded rows (c = 0) straight into the subtables (hash: id mod 2).
	preloadRows(t, ds[0], ds[1], db, "t", "0", preload)

	// sysbench through every proxy, on its own table.
	sbBin, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatal("sysbench is not installed: scripts/deps.sh sysbench (or apt-get install -y sysbench)")
	}
	var sbRuns []*sysbenchRun
	for i, m := range ms {
		host, port, _ := strings.Cut(m.p.addr, ":")
		args := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
			"--mysql-user=" + appUser, "--mysql-password=" + appPassword, "--mysql-db=" + db, "--tables=1", "--table-size=2000"}
		if i == 0 {
			if out, err := exec.Command(sbBin, append(slices.Clone(args), "prepare")...).CombinedOutput(); err != nil {
				t.Fatalf("sysbench prepare: %v\n%s", err, out)
			}
		}
		r := &sysbenchRun{}
		r.cmd = exec.Command(sbBin, append(args, "--threads=1", "--time=600", "--report-interval=1", "run")...)
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.start = time.Now()
		sbRuns = append(sbRuns, r)
	}
	t.Cleanup(func() {
		for _, r := range sbRuns {
			if r.cmd.ProcessState == nil {
				r.cmd.Process.Kill()
				r.cmd.Wait()
			}
		}
	})

	// The workload.
	w := newCounterLoad(preload)
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const perProxy = 4
	for i := range ms {
		var gate *sync.RWMutex
		if &ms[i] == frozen {
			gate = &w.freeze
		}
		for k := range perProxy {
			wk := w.worker(i*perProxy+k, gate)
			wg.Add(1)
			go func() {
				defer wg.Done()
				wk.run(ctx, t, ms[i].p.dsn(db))
			}()
		}
	}
	t.Cleanup(func() { stopLoad(); wg.Wait() })

	t0 := time.Now()
	name := fmt.Sprintf("fleetcut_%d", t0.UnixNano())
	adminOK(t, leader.web, "POST", "/admin/workflows", map[string]any{"table": db + ".t", "name": name, "nodes": []string{"node1", "node2", "node3"},
		"locations": []int{3, 3, 2}})
	s := waitPhase(t, leader.web, name, move.PhaseReady, 40*time.Second)
	ready := time.Since(t0)
	time.Sleep(300 * time.Millisecond) // load on the ready workflow (its apply)

	// Where the old subtables' binary logs are before the cutover.
	marks := make([]binlogMark, 2)
	for i := range marks {
		marks[i] = masterStatus(t, ds[i])
	}
	before := w.acked.Load()

	// Freeze a proxy that does not lead, between its transactions.
	w.freeze.Lock()
	if err := frozen.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		w.freeze.Unlock()
		t.Fatal(err)
	}
	frozeAt := time.Now()
	w.freeze.Unlock()
	// Cut off from etcd as well, so that it learns of the cutover from
	// the fence only: what etcd would send it meanwhile (the
	// announcement, its end, the new topology) would otherwise wait in its
	// socket and race its clients' statements after the thaw.
	relays[frozen.p].cut(true)
	t.Cleanup(func() { // on a failure before the thaw
		frozen.p.cmd.Process.Signal(syscall.SIGCONT)
		relays[frozen.p].cut(false)
	})
	cutStart := time.Now()
	s = adminOK(t, leader.web, "POST", "/admin/workflows/"+name+"/cutover", nil)
	cutTook := time.Since(cutStart)
	if s.State.Phase != move.PhaseSwitched {
		t.Fatalf("after cutover: %s (%s)", s.State.Phase, s.State.Error)
	}
	time.Sleep(300 * time.Millisecond) // the others write on the new subtables
	if err := frozen.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	frozeFor := time.Since(frozeAt)
	thawed := time.Now()
	// Its clients' statements sent during the freeze meet the fence; then
	// etcd is back for it.
	waitUntil(t, 10*time.Second, "the frozen proxy to meet the fence", func() bool {
		m, err := http.Get("http://" + frozen.p.metrics + "/metrics")
		if err != nil {
			return false
		}
		defer m.Body.Close()
		b, _ := io.ReadAll(m.Body)
		return bytes.Contains(b, []byte("\nshardgate_fence_retries_total ")) && !bytes.Contains(b, []byte("\nshardgate_fence_retries_total 0\n")) || w.stale.Load() > 0
	})
	met := time.Since(thawed)
	time.Sleep(500 * time.Millisecond)
	relays[frozen.p].cut(false)

	// Every proxy on the new rule: the topology version carrying it.
	rev := waitTopologyRule(t, f, 10*time.Second, "the cut-over rule in etcd's topology", func(r config.ShardRule) bool {
		return r.Generation == s.Spec.To.Generation && slices.Equal(r.Locations, []int{3, 3, 2})
	})
	took := waitApplied(t, procs, rev, 15*time.Second)
	time.Sleep(1500 * time.Millisecond) // the load goes on after the thaw
	stopLoad()
	wg.Wait()
	ran := time.Since(t0)
	after := w.acked.Load()
	// sysbench ran through it all: still running, no fatal error.
	var sbQueries, sbErrs float64
	for i, r := range sbRuns {
		if r.cmd.ProcessState != nil {
			t.Errorf("sysbench through proxy %d ended early: %s", i+1, r.out.String())
			continue
		}
		r.cmd.Process.Signal(syscall.SIGTERM)
		r.cmd.Wait()
		out := r.out.String()
		if strings.Contains(out, "FATAL") {
			t.Errorf("sysbench through proxy %d failed:\n%s", i+1, out)
		}
		for _, m := range sbReport.FindAllStringSubmatch(out, -1) {
			q, _ := strconv.ParseFloat(m[2], 64)
			e, _ := strconv.ParseFloat(m[3], 64)
			sbQueries, sbErrs = sbQueries+q, sbErrs+e
		}
	}
	t.Logf("sysbench oltp_read_write through the 3 proxies (1 thread each) across the cutover and the freeze: about %.0f queries, %.0f ignored errors (lock waits and deadlocks sysbench retries), no fatal error", sbQueries, sbErrs)

	// Through each proxy, a new row lands in the new subtable hash(id)
	// mod 8 names.
	for i, m := range ms {
		id := int64(900_000_000 + i)
		execAll(t, m.p.openDB(t, db), fmt.Sprintf("INSERT INTO t (id, c) VALUES (%d, 0)", id))
		idx := int(id % 8)
		node := ds[nodeOf(s.Spec.To, idx)]
		var n int
		if err := node.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.%s WHERE id = %d", db, s.Spec.To.Subtable(idx), id)).Scan(&n); err != nil || n != 1 {
			t.Errorf("the row written through proxy %d is not in %s (%d, %v)", i+1, s.Spec.To.Subtable(idx), n, err)
		}
	}

	// The totals: every row's counter against the tally.
	h := ms[0].p.openDB(t, db)
	got := map[int64]int64{}
	rows, err := h.Query("SELECT id, c FROM t WHERE id < 900000000")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, c int64
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		got[id] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	want, maybe, resolved := w.expected(got)
	var lost, dup, missing, extra int64
	for id, c := range want {
		g, ok := got[id]
		switch {
		case !ok && c > 0:
			missing++
		case g < c:
			lost += c - g
		case g > c+maybe[id]:
			dup += g - c - maybe[id]
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			extra++
		}
	}
	if lost != 0 || dup != 0 || missing != 0 || extra != 0 {
		t.Errorf("counters: %d increments lost, %d applied twice, %d acknowledged rows missing, %d rows nobody inserted", lost, dup, missing, extra)
	}
	var total int64
	for _, c := range got {
		total += c
	}

	// Nothing written to the old subtables after the fence: in each old
	// node's binary log since the mark, no row event on t_000i after the
	// RENAME TABLE that fenced it (rows events name their table in a
	// Table_map event); the fenced name is written by the reverse stream
	// only, which keeps it the old rule's mirror of the new subtables.
	for i := range marks {
		sub := s.Spec.From.Subtable(i)
		b := scanBinlog(t, ds[i], marks[i], db, sub)
		if !b.fenced {
			t.Errorf("no RENAME TABLE of %s in node%d's binary log after the cutover began", sub, i+1)
		}
		if b.oldAfter != 0 {
			t.Errorf("%d row events on %s.%s after its fence", b.oldAfter, db, sub)
		}
		if b.oldBefore == 0 {
			t.Errorf("no row event on %s.%s between the mark and the fence: the check sees nothing", db, sub)
		}
		t.Logf("node%d: %d row events on %s before the fence, 0 after; %d on %s (reverse stream)", i+1, b.oldBefore, sub, b.fencedAfter, move.FencedName(sub))
		waitUntil(t, 15*time.Second, "the fenced subtable to mirror the new ones", func() bool {
			var n1, s1, n2, s2 int64
			if err := ds[i].QueryRow(fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(c), 0) FROM %s.%s", db, move.FencedName(sub))).Scan(&n1, &s1); err != nil {
				t.Fatal(err)
			}
			if err := h.QueryRow(fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(c), 0) FROM t WHERE id %% 2 = %d", i)).Scan(&n2, &s2); err != nil {
				t.Fatal(err)
			}
			return n1 == n2 && s1 == s2
		})
	}

	// The frozen proxy met the fence and ran its statements again.
	retries := frozen.p.metric(t, "shardgate_fence_retries_total")
	if retries+float64(w.stale.Load()) == 0 {
		t.Errorf("the frozen proxy counts no fence retry and its clients no 1213: it did not meet the fence")
	}
	t.Logf("the frozen proxy, thawed without etcd, met the fence %v after SIGCONT; etcd back for it %v later",
		met.Round(time.Millisecond), (500 * time.Millisecond))
	for _, m := range ms {
		if m.p != frozen.p {
			if v := m.p.metric(t, "shardgate_fence_retries_total"); v != 0 {
				t.Errorf("proxy %s (not frozen) met the fence %v times", m.p.addr, v)
			}
		}
	}
	missingAcks := leader.p.metric(t, "shardgate_cutover_acks_missing_total")
	if missingAcks < 1 {
		t.Errorf("the leader counts %v missing acknowledgements, want the frozen proxy's", missingAcks)
	}
	pause := leader.p.metric(t, "shardgate_buffer_last_pause_seconds")
	t.Logf("%d preloaded rows, 2 -> 8 subtables over 3 nodes, ready after %v; proxy %s frozen %v across the cutover (answered in %v, workflow pause %.1f ms, buffer pause %.1f ms, %v acknowledgement missing); all on version %d after %v",
		preload, ready.Round(time.Millisecond), frozen.p.addr, frozeFor.Round(time.Millisecond), cutTook.Round(time.Millisecond), s.State.PauseMillis, pause*1000, missingAcks, rev, roundAll(took))
	t.Logf("load %v: %d operations acknowledged (%d before the cutover, %d after), %d ended in an error (%d 1213 of a stale transaction, run again; %d 1205), %d outcomes unknown (%d resolved by their row, %d increments allowed for); counters sum %d; 0 lost, 0 duplicated; frozen proxy: %v fence retries (statements run again on the new subtables), thawed %v before the load stopped",
		ran.Round(time.Millisecond), after, before, after-before, w.errs.Load(), w.stale.Load(), w.evicted.Load(), w.unknown.Load(), resolved, sumMap(maybe), total, retries, time.Since(thawed).Round(time.Millisecond))
}

// nodeOf is the index of the node (in r.Nodes) of subtable i of r.
func nodeOf(r config.ShardRule, i int) int {
	for n, k := range r.Locations {
		if i < k {
			return n
		}
		i -= k
	}
	return -1
}

func sumMap(m map[int64]int64) (s int64) {
	for _, v := range m {
		s += v
	}
	return s
}

// counterLoad is the counter workload's shared state: each worker keeps a
// tally of its own, merged by expected once they stopped.
type counterLoad struct {
	preload int64
	freeze  sync.RWMutex // held for reading around the frozen proxy's transactions
	workers []*counterWorker
	mu      sync.Mutex

	acked, errs, stale, evicted, unknown atomic.Int64
}

func newCounterLoad(preload int64) *counterLoad { return &counterLoad{preload: preload} }

// counterWorker is one client: one connection through one proxy.
type counterWorker struct {
	l    *counterLoad
	id   int64
	next int64
	gate *sync.RWMutex // nil for the proxies that are not frozen
	rnd  *rand.Rand
	// inc is the acknowledged increments per row (an insert counts 1);
	// own is the rows it inserted, acknowledged.
	inc map[int64]int64
	own []int64
	// maybe are operations whose outcome the client could not know:
	// marker is the row the operation inserted (0 for an increment
	// alone), incs what it did if it happened.
	maybe []unknownOp
}

type unknownOp struct {
	marker int64
	incs   map[int64]int64
}

func (l *counterLoad) worker(n int, gate *sync.RWMutex) *counterWorker {
	w := &counterWorker{l: l, id: int64(n), next: 1_000_000 + int64(n)*1_000_000, gate: gate,
		rnd: rand.New(rand.NewPCG(uint64(n), 36)), inc: map[int64]int64{}}
	l.mu.Lock()
	l.workers = append(l.workers, w)
	l.mu.Unlock()
	return w
}

// run loops over the operations until ctx ends.
func (w *counterWorker) run(ctx context.Context, t *testing.T, dsn string) {
	h, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer h.Close()
	h.SetMaxOpenConns(1)
	for ctx.Err() == nil {
		switch r := w.rnd.IntN(10); {
		case r < 3:
			id := w.newID()
			w.do(h, id, map[int64]int64{id: 1}, fmt.Sprintf("INSERT INTO t (id, c) VALUES (%d, 1)", id))
		case r < 7:
			x := w.target()
			w.do(h, 0, map[int64]int64{x: 1}, fmt.Sprintf("UPDATE t SET c = c + 1 WHERE id = %d", x))
		default:
			// The same subtable under both rules: x = id mod 8.
			id := w.newID()
			x := id % 8
			x += 8 * w.rnd.Int64N(w.l.preload/8)
			incs := map[int64]int64{id: 2, x: 1}
			for try := 0; try < 5; try++ {
				if w.txn(h, id, incs, x) {
					break
				}
			}
		}
	}
}

// newID is a row id of this worker's own, never used before.
func (w *counterWorker) newID() int64 { w.next++; return w.next }

// target is a row to increment: a preloaded row or one of its own.
func (w *counterWorker) target() int64 {
	if len(w.own) > 0 && w.rnd.IntN(2) == 0 {
		return w.own[w.rnd.IntN(len(w.own))]
	}
	return w.rnd.Int64N(w.l.preload)
}

// do runs one autocommitted statement and tallies it.
func (w *counterWorker) do(h *sql.DB, marker int64, incs map[int64]int64, q string) {
	res, err := h.Exec(q)
	if err == nil {
		if n, _ := res.RowsAffected(); n != 1 {
			// The row to increment was not found: counted as lost at the end.
			w.l.errs.Add(1)
			return
		}
		w.ack(marker, incs)
		return
	}
	w.failed(err, marker, incs)
}

// txn runs INSERT id; UPDATE id; UPDATE x in one transaction; it reports
// whether the client is done with it (committed, or an outcome it cannot
// know), false when it was rolled back and may run again.
func (w *counterWorker) txn(h *sql.DB, id int64, incs map[int64]int64, x int64) bool {
	if w.gate != nil {
		w.gate.RLock()
		defer w.gate.RUnlock()
	}
	tx, err := h.Begin()
	if err != nil {
		w.failed(err, 0, nil)
		return false
	}
	for _, q := range []string{fmt.Sprintf("INSERT INTO t (id, c) VALUES (%d, 1)", id), fmt.Sprintf("UPDATE t SET c = c + 1 WHERE id = %d", id),
		fmt.Sprintf("UPDATE t SET c = c + 1 WHERE id = %d", x)} {
		if _, err := tx.Exec(q); err != nil {
			tx.Rollback()
			if sqlCode(err) == 0 {
				// The connection broke: the server rolls the transaction back.
				w.l.errs.Add(1)
				return false
			}
			w.failed(err, 0, nil)
			return false
		}
	}
	if err := tx.Commit(); err != nil {
		if sqlCode(err) == 0 {
			w.failed(err, id, incs) // committed or not: its row says
			return true
		}
		w.failed(err, 0, nil)
		return false
	}
	w.ack(id, incs)
	return true
}

func (w *counterWorker) ack(marker int64, incs map[int64]int64) {
	for id, n := range incs {
		w.inc[id] += n
	}
	if marker != 0 {
		w.own = append(w.own, marker)
	}
	w.l.acked.Add(1)
}

// failed counts an error. An error the server sent means the statement
// (or the transaction) did not happen; any other may hide either outcome.
func (w *counterWorker) failed(err error, marker int64, incs map[int64]int64) {
	w.l.errs.Add(1)
	switch sqlCode(err) {
	case 1213:
		w.l.stale.Add(1)
	case 1205:
		w.l.evicted.Add(1)
	case 0:
		if incs != nil {
			w.l.unknown.Add(1)
			w.maybe = append(w.maybe, unknownOp{marker, incs})
		}
	}
}

// expected merges the workers' tallies, given the rows read back (got):
// an unknown operation that inserted a row happened if its row is there;
// one that did not may have happened, and is returned in maybe.
func (l *counterLoad) expected(got map[int64]int64) (want, maybe map[int64]int64, resolved int) {
	want, maybe = map[int64]int64{}, map[int64]int64{}
	for id := range l.preload {
		want[id] = 0
	}
	for _, w := range l.workers {
		for id, n := range w.inc {
			want[id] += n
		}
		for _, op := range w.maybe {
			if op.marker != 0 {
				resolved++
				if _, ok := got[op.marker]; !ok {
					continue
				}
				for id, n := range op.incs {
					want[id] += n
				}
				continue
			}
			for id, n := range op.incs {
				maybe[id] += n
			}
		}
	}
	return want, maybe, resolved
}

// binlogMark is a position in a server's binary log.
type binlogMark struct {
	file string
	pos  int64
}

func masterStatus(t *testing.T, d *sql.DB) binlogMark {
	t.Helper()
	rows, err := d.Query("SHOW MASTER STATUS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if !rows.Next() {
		t.Fatal("SHOW MASTER STATUS: no binary log")
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	var m binlogMark
	m.file = string(vals[0])
	fmt.Sscan(string(vals[1]), &m.pos)
	return m
}

// binlogScan is what scanBinlog found after a mark.
type binlogScan struct {
	fenced                           bool // the RENAME TABLE of the subtable to its fenced name
	oldBefore, oldAfter, fencedAfter int  // Table_map events of the plain name before and after it, of the fenced name after it
}

// scanBinlog reads d's binary log from m on (every file from m's).
func scanBinlog(t *testing.T, d *sql.DB, m binlogMark, db, sub string) binlogScan {
	t.Helper()
	var files []string
	rows, err := d.Query("SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		if f := string(vals[0]); f >= m.file {
			files = append(files, f)
		}
	}
	rows.Close()
	var b binlogScan
	plain, fencedName := fmt.Sprintf("(%s.%s)", db, sub), fmt.Sprintf("(%s.%s)", db, move.FencedName(sub))
	for i, f := range files {
		q := fmt.Sprintf("SHOW BINLOG EVENTS IN '%s'", f)
		if i == 0 {
			q += fmt.Sprintf(" FROM %d", m.pos)
		}
		rows, err := d.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			// Log_name, Pos, Event_type, Server_id, End_log_pos, Info
			var logName, typ, info string
			var pos, sid, end int64
			if err := rows.Scan(&logName, &pos, &typ, &sid, &end, &info); err != nil {
				t.Fatal(err)
			}
			switch {
			case typ == "Query" && strings.Contains(info, "RENAME TABLE") && strings.Contains(info, "`"+sub+"` TO"):
				b.fenced = true
			case typ == "Table_map" && strings.HasSuffix(info, plain):
				if b.fenced {
					b.oldAfter++
				} else {
					b.oldBefore++
				}
			case typ == "Table_map" && strings.HasSuffix(info, fencedName) && b.fenced:
				b.fencedAfter++
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return b
}

// tcpRelay forwards connections to target until cut: then it closes those
// it has and every new one at once (a network partition, as a client
// sees it), until cut(false).
type tcpRelay struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	off    bool
	conns  []net.Conn
}

func newTCPRelay(t *testing.T, target string) *tcpRelay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{l: l, target: target}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		r.cut(true)
	})
	return r
}

func (r *tcpRelay) addr() string { return r.l.Addr().String() }

func (r *tcpRelay) serve(c net.Conn) {
	r.mu.Lock()
	if r.off {
		r.mu.Unlock()
		c.Close()
		return
	}
	r.mu.Unlock()
	d, err := net.Dial("tcp", r.target)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	if r.off {
		r.mu.Unlock()
		c.Close()
		d.Close()
		return
	}
	r.conns = append(r.conns, c, d)
	r.mu.Unlock()
	go func() { io.Copy(d, c); d.Close(); c.Close() }()
	io.Copy(c, d)
	c.Close()
	d.Close()
}

// cut closes the relayed connections and refuses new ones (off), or lets
// them through again.
func (r *tcpRelay) cut(off bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.off = off
	if off {
		for _, c := range r.conns {
			c.Close()
		}
		r.conns = nil
	}
}
