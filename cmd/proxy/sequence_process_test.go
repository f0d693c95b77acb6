package main_test

// The acceptance test of durable global sequences (commit e86f6eb): two
// proxy processes share one sidecar and fill the ids of one sharded table
// concurrently, one of them is killed with SIGKILL in the middle and
// started again, and afterwards no id is found twice and the ids each
// client got from each proxy process increase in the order it sent them.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/internal/mariadbtest"
)

// The shape of TestProcessSequenceTwoProxiesKill.
const (
	seqDB          = "seqproc"
	seqSidecarDB   = "seqproc_sidecar"
	seqPerProxy    = 100_000 // rows each proxy must end up with
	seqClients     = 4       // client connections per proxy
	seqRowsPerStmt = 100     // rows of one multi-row INSERT
	seqKillAfter   = 50_000  // proxy A's acknowledged rows when it is killed
	seqSubtables   = 4       // items_0000..items_0003, hash on id: id % 4
)

// TestProcessSequenceTwoProxiesKill: proxies A and B run the real binary
// on the same ks.yaml (only their addresses differ), over both nodes, with
// items hash-sharded on id into four subtables and id filled from the
// global sequence in a sidecar database on node1. Each proxy gets four
// client connections sending 100-row INSERTs that leave id out, until the
// table holds 100 000 rows of that proxy. When A has acknowledged 50 000
// rows it is killed with SIGKILL while its clients are mid-statement, and
// started again on the same ks.yaml; once the backends have ended every
// connection of the dead process, A's rows are counted in the subtables
// (a statement cut by the kill may have been applied, in full or in some
// subtables only) and A's clients reconnect and send the rest. B inserts all
// along. Then, reading the subtables directly: 200 000 rows, every row in
// the subtable its id hashes to, no id twice, and within one client of
// one proxy process the ids increase with the client's counter (seq).
func TestProcessSequenceTwoProxiesKill(t *testing.T) {
	srvs := servers(t)
	if len(srvs) < 2 {
		t.Fatalf("the package's cluster has %d servers, want 2", len(srvs))
	}
	nodes := srvs[:2]
	direct := make([]*sql.DB, len(nodes))
	for i, s := range nodes {
		db, err := sql.Open("mysql", s.DSN("")+"&timeout=5s&readTimeout=30s&writeTimeout=30s")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		direct[i] = db
	}
	dropAll := func() {
		for _, db := range direct {
			db.Exec("DROP DATABASE IF EXISTS " + seqDB)
			db.Exec("DROP DATABASE IF EXISTS " + seqSidecarDB)
		}
	}
	dropAll()
	t.Cleanup(dropAll) // registered before the proxies start: runs after they are killed

	// ctx bounds every statement of the test that has no tighter bound.
	// The client goroutines of both proxies are waited for before the test
	// ends, also when it fails early.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	var wgA, wgB sync.WaitGroup
	defer func() {
		cancel()
		wgA.Wait()
		wgB.Wait()
	}()

	s := settings{
		nodes: nodes,
		schema: "    shard:\n      - db: " + seqDB + "\n        table: items\n        key: id\n        type: hash\n" +
			"        nodes: [node1, node2]\n        locations: [2, 2]\n        sequence: id\n",
		extra: "sidecar:\n  node: node1\n  db: " + seqSidecarDB + "\n",
	}
	pa, pb := startProxy(t, s), startProxy(t, s)
	admin := pa.openDB(t, "")
	for _, q := range []string{"CREATE DATABASE " + seqDB,
		"CREATE TABLE " + seqDB + ".items (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, proxy CHAR(1) NOT NULL, " +
			"life TINYINT NOT NULL, client TINYINT NOT NULL, seq INT NOT NULL)"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	newClients := func(p *proc, name string) []*seqClient {
		cs := make([]*seqClient, seqClients)
		for i := range cs {
			db := p.openDB(t, seqDB)
			db.SetMaxOpenConns(1) // one client connection, reopened after it breaks
			cs[i] = &seqClient{proxy: name, n: i, db: db}
		}
		return cs
	}
	clientsA, clientsB := newClients(pa, "A"), newClients(pb, "B")

	// B inserts its 100 000 rows from start to end; its statements must
	// all succeed.
	var quotaB quota
	quotaB.left.Store(seqPerProxy)
	var doneB progress
	start := time.Now()
	for _, c := range clientsB {
		wgB.Go(func() {
			if f := c.run(ctx, 1, &quotaB, &doneB); f != nil {
				t.Errorf("proxy B, client %d: %v", c.n, f)
			}
		})
	}

	// A's first life: until the kill. Every statement failing after the
	// kill began is expected; one failing before is not.
	var quotaA1 quota
	quotaA1.left.Store(seqPerProxy)
	doneA1 := progress{at: seqKillAfter, reached: make(chan struct{})}
	var killing atomic.Bool
	failures := make([]*seqFailure, seqClients)
	for i, c := range clientsA {
		wgA.Go(func() {
			f := c.run(ctx, 1, &quotaA1, &doneA1)
			if f != nil && !killing.Load() {
				t.Errorf("proxy A, client %d, before the kill: %v", c.n, f)
			}
			failures[i] = f
		})
	}
	select {
	case <-doneA1.reached:
	case <-ctx.Done():
		t.Fatalf("proxy A did not reach %d rows: %v (it has %d)", seqKillAfter, ctx.Err(), doneA1.rows.Load())
	}
	// The killed process's connections to the backends, to wait for the
	// backends to end them: their statements in flight finish first.
	conns, err := backendConns(pa.pid(), nodes)
	if err != nil {
		t.Fatal(err)
	}
	killing.Store(true)
	killedAt := time.Since(start)
	ackedBeforeKill, bAtKill := doneA1.rows.Load(), doneB.rows.Load()
	if err := pa.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-pa.done
	killedPID := pa.pid()
	wgA.Wait()
	ackedA1 := doneA1.rows.Load()

	// The backends end the dead process's connections once their
	// statements in flight are done: then A's rows can be counted.
	drainStart := time.Now()
	waitUntil(t, 20*time.Second, "the backends to end the killed proxy's connections", func() bool {
		for i, db := range direct {
			if n, err := openConnsOf(ctx, db, conns[i]); err != nil || n > 0 {
				return false
			}
		}
		return true
	})
	drained := time.Since(drainStart)
	pa2 := restart(t, pa)
	restarted := time.Since(start)
	countA1 := countRows(t, ctx, direct, "proxy = 'A'")

	// What became of the statements the kill cut: rows of the statement
	// found in the subtables (all, some, none).
	var cut []string
	retried := 0
	for i, f := range failures {
		if f == nil {
			continue
		}
		retried++
		n := countRows(t, ctx, direct, fmt.Sprintf("proxy = 'A' AND life = 1 AND client = %d AND seq BETWEEN %d AND %d", i, f.first, f.last))
		cut = append(cut, fmt.Sprintf("client %d: %d of %d rows applied (%v)", i, n, f.last-f.first+1, f.err))
	}

	// A's second life: its clients reconnect to the new process and send
	// what the table still lacks.
	var quotaA2 quota
	quotaA2.left.Store(seqPerProxy - countA1)
	var doneA2 progress
	bAtRestart := doneB.rows.Load()
	for _, c := range clientsA {
		wgA.Go(func() {
			if f := c.run(ctx, 2, &quotaA2, &doneA2); f != nil {
				t.Errorf("proxy A, client %d, after the restart: %v", c.n, f)
			}
		})
	}
	wgA.Wait()
	wgB.Wait()
	if t.Failed() {
		t.FailNow()
	}
	countA := countRows(t, ctx, direct, "proxy = 'A'")
	countB := countRows(t, ctx, direct, "proxy = 'B'")
	inserted := time.Since(start)

	t.Logf("proxy A (pid %d) killed %v after the inserts began, with %d rows acknowledged (%d when the kill was decided), B at %d; "+
		"the backends ended its %d connections %v later; it greeted again %v after the inserts began, B then at %d",
		killedPID, killedAt.Round(time.Millisecond), ackedA1, ackedBeforeKill, bAtKill,
		len(conns[0])+len(conns[1]), drained.Round(time.Millisecond), restarted.Round(time.Millisecond), bAtRestart)
	t.Logf("after the kill the subtables held %d rows of A (%d acknowledged): %d statements failed and were retried on the new process: %s",
		countA1, ackedA1, retried, strings.Join(cut, "; "))
	t.Logf("A's second life inserted %d rows; the table holds %d rows of A and %d of B; all inserted %v after the inserts began",
		doneA2.rows.Load(), countA, countB, inserted.Round(time.Millisecond))
	if countA != seqPerProxy || countB != seqPerProxy {
		t.Errorf("the table holds %d rows of A and %d of B, want %d each", countA, countB, seqPerProxy)
	}

	rows := readSeqRows(t, ctx, direct)
	checkSeqRows(t, rows)

	var nextID int64
	if err := direct[0].QueryRowContext(ctx, "SELECT next_id FROM "+seqSidecarDB+".sequences WHERE name = ?", seqDB+".items").Scan(&nextID); err != nil {
		t.Fatal(err)
	}
	lo, hi := rows[0].id, rows[len(rows)-1].id
	t.Logf("%d rows, ids %d..%d (%d values below the largest never stored: cut statements, rest of the killed process's block); the sidecar's next_id is %d; checked in %v",
		len(rows), lo, hi, hi-lo+1-int64(len(rows)), nextID, (time.Since(start) - inserted).Round(time.Millisecond))
	if nextID <= hi {
		t.Errorf("the sidecar's next_id %d is not past the largest id %d", nextID, hi)
	}
	if pa2.exited() || pb.exited() {
		t.Errorf("a proxy exited: A %v, B %v", pa2.waitErr, pb.waitErr)
	}
}

// seqClient is one client connection of TestProcessSequenceTwoProxiesKill.
// Its rows carry its proxy, the proxy process's life (1 before the kill, 2
// after), its number and seq, which increases with every row it sends. It
// is used by one goroutine at a time.
type seqClient struct {
	proxy string
	n     int
	db    *sql.DB // at most one connection
	seq   int     // the last seq sent
}

// seqFailure is a statement that failed: the seq values of its rows.
type seqFailure struct {
	first, last int
	err         error
}

func (f *seqFailure) Error() string {
	var me *gomysql.MySQLError
	if errors.As(f.err, &me) && me.Number == 1062 { // ER_DUP_ENTRY: ids hash to one subtable, whose primary key is id
		return fmt.Sprintf("INSERT of seq %d..%d: %v: an id was handed out twice", f.first, f.last, f.err)
	}
	return fmt.Sprintf("INSERT of seq %d..%d: %v", f.first, f.last, f.err)
}

// run sends INSERTs of up to seqRowsPerStmt rows, as many as it can take
// from q, until q is empty or a statement fails, which it returns. done
// counts the rows of acknowledged statements.
func (c *seqClient) run(ctx context.Context, life int, q *quota, done *progress) *seqFailure {
	var b strings.Builder
	for {
		n := q.take(seqRowsPerStmt)
		if n == 0 {
			return nil
		}
		first := c.seq + 1
		c.seq += int(n)
		b.Reset()
		b.WriteString("INSERT INTO items (proxy, life, client, seq) VALUES ")
		for s := first; s <= c.seq; s++ {
			if s > first {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "('%s',%d,%d,%d)", c.proxy, life, c.n, s)
		}
		if _, err := c.db.ExecContext(ctx, b.String()); err != nil {
			return &seqFailure{first: first, last: c.seq, err: err}
		}
		done.add(n)
	}
}

// quota is the rows a group of clients still has to send; safe for
// concurrent use.
type quota struct{ left atomic.Int64 }

// take removes up to n rows from q and returns how many; 0 once q is
// empty.
func (q *quota) take(n int64) int64 {
	for {
		l := q.left.Load()
		if l <= 0 {
			return 0
		}
		k := min(n, l)
		if q.left.CompareAndSwap(l, l-k) {
			return k
		}
	}
}

// progress counts acknowledged rows and closes reached when they reach at
// (when at > 0); safe for concurrent use.
type progress struct {
	rows    atomic.Int64
	at      int64
	once    sync.Once
	reached chan struct{}
}

func (p *progress) add(n int64) {
	if p.rows.Add(n) >= p.at && p.at > 0 {
		p.once.Do(func() { close(p.reached) })
	}
}

// restart starts the proxy binary again with the command line of p, which
// has exited (the same ks.yaml, so the same addresses), and returns once
// it greets. Its output goes to p's log file name with ".restart" added.
func restart(t *testing.T, p *proc) *proc {
	t.Helper()
	if !p.exited() {
		t.Fatal("restart: the proxy still runs")
	}
	n := &proc{addr: p.addr, metrics: p.metrics, logPath: p.logPath + ".restart", shutdownTimeout: p.shutdownTimeout, done: make(chan struct{})}
	logf, err := os.Create(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	n.cmd = exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(n.done)
		n.waitErr = n.cmd.Wait()
	}()
	t.Cleanup(func() {
		n.cmd.Process.Kill()
		<-n.done
		if t.Failed() {
			t.Logf("restarted proxy output:\n%s", tail(n.logPath, 4000))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !n.greets() {
		select {
		case <-n.done:
			t.Fatalf("the restarted proxy exited at start: %v\n%s", n.waitErr, tail(n.logPath, 4000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted proxy does not answer on %s after 20 s\n%s", n.addr, tail(n.logPath, 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// backendConns returns, per node, the local ports of process pid's TCP
// connections to that node, read from /proc: the port MariaDB shows in
// PROCESSLIST.HOST for each.
func backendConns(pid int, nodes []*mariadbtest.Server) ([][]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), e.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	tcp, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil, err
	}
	out := make([][]int, len(nodes))
	for _, line := range strings.Split(string(tcp), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		_, lport, _ := strings.Cut(f[1], ":")
		_, rport, _ := strings.Cut(f[2], ":")
		lp, err1 := strconv.ParseInt(lport, 16, 32)
		rp, err2 := strconv.ParseInt(rport, 16, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/%d/net/tcp: %q", pid, line)
		}
		for i, s := range nodes {
			if int(rp) == s.Port {
				out[i] = append(out[i], int(lp))
			}
		}
	}
	if len(out[0]) == 0 {
		return nil, fmt.Errorf("process %d has no connection to node1 (the sidecar's node)", pid)
	}
	return out, nil
}

// openConnsOf counts the connections in db's server's PROCESSLIST whose
// client port is one of ports.
func openConnsOf(ctx context.Context, db *sql.DB, ports []int) (int, error) {
	rows, err := db.QueryContext(ctx, "SELECT HOST FROM information_schema.PROCESSLIST")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var host string
		if err := rows.Scan(&host); err != nil {
			return 0, err
		}
		if _, p, ok := strings.Cut(host, ":"); ok {
			if port, err := strconv.Atoi(p); err == nil && slices.Contains(ports, port) {
				n++
			}
		}
	}
	return n, rows.Err()
}

// seqSubtable names subtable i of items and the index of its node in the
// direct handles: items_0000 and items_0001 on node1, the others on node2.
func seqSubtable(i int) (string, int) {
	return fmt.Sprintf("%s.items_%04d", seqDB, i), i / 2
}

// countRows counts the rows of items matching where in every subtable,
// read directly.
func countRows(t *testing.T, ctx context.Context, direct []*sql.DB, where string) int64 {
	t.Helper()
	var sum int64
	for i := range seqSubtables {
		name, node := seqSubtable(i)
		var n int64
		if err := direct[node].QueryRowContext(ctx, "SELECT COUNT(*) FROM "+name+" WHERE "+where).Scan(&n); err != nil {
			t.Fatalf("counting %s: %v", name, err)
		}
		sum += n
	}
	return sum
}

// seqRow is one row of items and the subtable it was found in.
type seqRow struct {
	id           int64
	proxy        string
	life, client int
	seq          int
	subtable     int
}

// readSeqRows reads every row of items from the subtables directly,
// sorted by id.
func readSeqRows(t *testing.T, ctx context.Context, direct []*sql.DB) []seqRow {
	t.Helper()
	var out []seqRow
	for i := range seqSubtables {
		name, node := seqSubtable(i)
		rows, err := direct[node].QueryContext(ctx, "SELECT id, proxy, life, client, seq FROM "+name)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			r := seqRow{subtable: i}
			if err := rows.Scan(&r.id, &r.proxy, &r.life, &r.client, &r.seq); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	slices.SortFunc(out, func(a, b seqRow) int { return cmp.Compare(a.id, b.id) })
	return out
}

// checkSeqRows checks rows sorted by id: each in the subtable its id
// hashes to, no id twice, and within one client of one proxy process
// (proxy, life, client) ids increasing with seq. It reports at most a few
// examples of each kind of fault.
func checkSeqRows(t *testing.T, rows []seqRow) {
	t.Helper()
	const examples = 5
	misplaced, dups := 0, 0
	for i, r := range rows {
		if r.id <= 0 || int(r.id%seqSubtables) != r.subtable {
			if misplaced++; misplaced <= examples {
				t.Errorf("row %+v is in items_%04d; id %d hashes to items_%04d", r, r.subtable, r.id, r.id%seqSubtables)
			}
		}
		if i > 0 && rows[i-1].id == r.id {
			if dups++; dups <= examples {
				t.Errorf("id %d twice: %+v and %+v", r.id, rows[i-1], r)
			}
		}
	}
	type key struct {
		proxy        string
		life, client int
	}
	groups := map[key][]seqRow{}
	for _, r := range rows {
		k := key{r.proxy, r.life, r.client}
		groups[k] = append(groups[k], r)
	}
	disorder := 0
	var sizes []string
	for k, g := range groups {
		slices.SortFunc(g, func(a, b seqRow) int { return a.seq - b.seq })
		for i := 1; i < len(g); i++ {
			if g[i].seq == g[i-1].seq {
				if dups++; dups <= examples {
					t.Errorf("seq %d of %+v twice: ids %d and %d", g[i].seq, k, g[i-1].id, g[i].id)
				}
			}
			if g[i].id <= g[i-1].id {
				if disorder++; disorder <= examples {
					t.Errorf("proxy %s, life %d, client %d: seq %d got id %d, after seq %d got id %d",
						k.proxy, k.life, k.client, g[i].seq, g[i].id, g[i-1].seq, g[i-1].id)
				}
			}
		}
		sizes = append(sizes, fmt.Sprintf("%s%d/%d:%d", k.proxy, k.life, k.client, len(g)))
	}
	slices.Sort(sizes)
	t.Logf("rows per proxy, life and client: %s", strings.Join(sizes, " "))
	if misplaced+dups+disorder > 0 {
		t.Errorf("%d rows misplaced, %d duplicates, %d ids out of order", misplaced, dups, disorder)
	}
	if len(groups) == 0 {
		t.Error("no rows")
	}
}
