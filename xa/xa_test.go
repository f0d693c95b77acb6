package xa_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/xa"
)

var cluster *mariadbtest.Cluster

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
		cluster = c
		return m.Run()
	})
}

const sidecarDB = "xa_t_sidecar"

// env is two backend nodes, direct handles to their servers, and a table
// xa_t.t on each.
type env struct {
	nodes  []*backend.Node
	direct []*sql.DB
}

func setup(t *testing.T) *env {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	e := &env{}
	for i, s := range cluster.Servers {
		n := backend.NewNode(config.Node{Name: fmt.Sprintf("node%d", i+1), Master: s.Addr, User: s.User, Password: s.Password,
			MaxConnsLimit: 4, DownAfterNoalive: 1}, config.Default().Backend, nil)
		n.Start()
		t.Cleanup(n.Close)
		e.nodes = append(e.nodes, n)
		d, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		e.direct = append(e.direct, d)
		for _, q := range []string{"DROP DATABASE IF EXISTS xa_t", "DROP DATABASE IF EXISTS " + sidecarDB,
			"CREATE DATABASE xa_t", "CREATE TABLE xa_t.t (id INT PRIMARY KEY)"} {
			if _, err := d.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e
}

// coordinator starts a coordinator named name with the given lease; its
// own recovery loop runs only once an hour (the test calls Recover).
func (e *env) coordinator(t *testing.T, name string, lease time.Duration) *xa.Coordinator {
	t.Helper()
	c := xa.New(xa.Options{Sidecar: e.nodes[0], DB: sidecarDB, Nodes: func() []*backend.Node { return e.nodes }, Name: name,
		Interval: time.Hour, Lease: lease})
	c.Start(context.Background())
	if c.Instance() == 0 {
		t.Fatal("the coordinator did not register")
	}
	t.Cleanup(c.Close)
	return c
}

// prepare leaves a prepared branch of tx on node i that inserts id, as a
// session that died after XA PREPARE leaves it.
func (e *env) prepare(t *testing.T, i int, tx xa.Txn, id int) {
	t.Helper()
	c, err := e.direct[i].Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer detach(c)
	x := tx.XID(fmt.Sprintf("node%d", i+1))
	for _, q := range []string{"XA START " + x, fmt.Sprintf("INSERT INTO xa_t.t VALUES (%d)", id), "XA END " + x, "XA PREPARE " + x} {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// detach closes c's connection (never back to the pool), so the branch
// it prepared is detached from any session, as after a crash.
func detach(c *sql.Conn) {
	c.Raw(func(any) error { return driver.ErrBadConn })
	c.Close()
}

// rows lists the ids in xa_t.t on node i.
func (e *env) rows(t *testing.T, i int) string {
	t.Helper()
	rs, err := e.direct[i].Query("SELECT id FROM xa_t.t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var ids []string
	for rs.Next() {
		var id string
		rs.Scan(&id)
		ids = append(ids, id)
	}
	return strings.Join(ids, ",")
}

func (e *env) pending(t *testing.T) int {
	t.Helper()
	bs, err := xa.Pending(context.Background(), e.nodes)
	if err != nil {
		t.Fatal(err)
	}
	return len(bs)
}

func (e *env) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := e.direct[0].QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func recoverOnce(t *testing.T, c *xa.Coordinator) xa.Report {
	t.Helper()
	rep, err := c.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestRecoveryOwnership: recovery leaves the prepared branches of another
// live proxy alone and those its own sessions have in flight; it finishes
// its own once they are not in flight (by their decision); it fences a
// proxy whose lease ran out and finishes that one's branches (commit with
// a decision, rollback without), after which the fenced proxy cannot
// write a decision; it cleans the decision log of finished transactions
// and dead proxies; running it again does nothing.
func TestRecoveryOwnership(t *testing.T) {
	e := setup(t)
	a := e.coordinator(t, "a", time.Second)
	b := e.coordinator(t, "b", time.Second)

	ta := a.Begin()
	e.prepare(t, 0, ta, 1)
	e.prepare(t, 1, ta, 1)
	if rep := recoverOnce(t, b); rep.Left != 2 || rep.Committed+rep.RolledBack != 0 {
		t.Fatalf("b's recovery with a alive: %+v, want both branches left to a", rep)
	}
	a.Enter(ta)
	if rep := recoverOnce(t, a); rep.Left != 2 || rep.Committed+rep.RolledBack != 0 {
		t.Fatalf("a's recovery with the transaction in flight: %+v", rep)
	}
	if out, err := a.Decide(context.Background(), ta); out != xa.Commit || err != nil {
		t.Fatalf("Decide: %v, %v", out, err)
	}
	a.Finish(ta, true, false) // its session left both branches to recovery
	if rep := recoverOnce(t, a); rep.Committed != 2 {
		t.Fatalf("a's recovery after the session gave up: %+v, want 2 committed", rep)
	}
	if got := e.rows(t, 0) + "|" + e.rows(t, 1); got != "1|1" {
		t.Fatalf("rows after recovery: %s", got)
	}
	recoverOnce(t, a) // a complete listing without the transaction: its decision goes
	if n := e.count(t, "SELECT COUNT(*) FROM "+sidecarDB+".xa_decisions WHERE gtrid = '"+ta.Gtrid()+"'"); n != 0 {
		t.Fatalf("decision of a finished transaction kept: %d rows", n)
	}

	// c dies (stops renewing) with one decided and one undecided transaction.
	c := e.coordinator(t, "c", time.Second)
	t1, t2 := c.Begin(), c.Begin()
	e.prepare(t, 0, t1, 10)
	e.prepare(t, 1, t1, 10)
	e.prepare(t, 0, t2, 20)
	c.Enter(t1)
	if out, err := c.Decide(context.Background(), t1); out != xa.Commit || err != nil {
		t.Fatalf("Decide: %v, %v", out, err)
	}
	c.Close()
	if rep := recoverOnce(t, b); rep.Left != 3 {
		t.Fatalf("b's recovery within c's lease: %+v, want 3 left", rep)
	}
	time.Sleep(1300 * time.Millisecond)
	if rep := recoverOnce(t, b); rep.Committed != 2 || rep.RolledBack != 1 {
		t.Fatalf("b's recovery after c's lease: %+v, want 2 committed and 1 rolled back", rep)
	}
	if got := e.rows(t, 0) + "|" + e.rows(t, 1); got != "1,10|1,10" {
		t.Fatalf("rows after recovering c: %s", got)
	}
	if out, err := c.Decide(context.Background(), c.Begin()); out != xa.Abort || err == nil {
		t.Fatalf("a fenced instance wrote a decision: %v, %v", out, err)
	}
	recoverOnce(t, b) // c was fenced before this round: its rows go
	if n := e.count(t, fmt.Sprintf("SELECT COUNT(*) FROM %s.xa_decisions WHERE instance = %d", sidecarDB, c.Instance())) +
		e.count(t, fmt.Sprintf("SELECT COUNT(*) FROM %s.xa_instances WHERE id = %d", sidecarDB, c.Instance())); n != 0 {
		t.Fatalf("c's decisions and registration kept: %d rows", n)
	}
	if rep := recoverOnce(t, b); rep.Prepared+rep.Committed+rep.RolledBack+rep.Left+len(rep.Unreachable) != 0 {
		t.Fatalf("recovery with nothing to do: %+v", rep)
	}
	if n := e.pending(t); n != 0 {
		t.Fatalf("%d branches still prepared", n)
	}
}

// TestRestartTakesOver: a proxy that starts under the name of one that
// died rolls back what that one left prepared without a decision, at
// start-up, without waiting for its lease; another transaction manager's
// branches (another format id) are left alone.
func TestRestartTakesOver(t *testing.T) {
	e := setup(t)
	d1 := e.coordinator(t, "d", time.Hour)
	tx := d1.Begin()
	e.prepare(t, 0, tx, 5)
	e.prepare(t, 1, tx, 5)
	d1.Close()
	// Another transaction manager's branch.
	c, err := e.direct[0].Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	foreign := "X'" + hex.EncodeToString([]byte("other")) + "',X'',1"
	for _, q := range []string{"XA START " + foreign, "INSERT INTO xa_t.t VALUES (99)", "XA END " + foreign, "XA PREPARE " + foreign} {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	detach(c)
	t.Cleanup(func() { e.direct[0].Exec("XA ROLLBACK " + foreign) })

	d2 := e.coordinator(t, "d", time.Hour) // Start recovers
	_ = d2
	if n := e.pending(t); n != 0 {
		t.Fatalf("%d shardgate branches prepared after the restart", n)
	}
	if got := e.rows(t, 0) + "|" + e.rows(t, 1); got != "|" {
		t.Fatalf("rows after the restart: %s, want none", got)
	}
	rs, err := e.direct[0].Query("XA RECOVER")
	if err != nil {
		t.Fatal(err)
	}
	foreignLeft := 0
	for rs.Next() {
		var f, gl, bl int
		var data string
		rs.Scan(&f, &gl, &bl, &data)
		if f == 1 && data == "other" {
			foreignLeft++
		}
	}
	rs.Close()
	if foreignLeft != 1 {
		t.Fatalf("the foreign branch was touched (%d left)", foreignLeft)
	}
}

// TestSameInstanceNameYields: a proxy fenced by another live proxy that
// registered under the same xa.instance name does not take the name back
// (each would fence the other in turn, and both would keep failing
// commits): it says so once, cannot decide, and registers again only
// once the other stops renewing.
func TestSameInstanceNameYields(t *testing.T) {
	e := setup(t)
	const lease = 400 * time.Millisecond
	core, logs := observer.New(zap.ErrorLevel)
	a := xa.New(xa.Options{Sidecar: e.nodes[0], DB: sidecarDB, Nodes: func() []*backend.Node { return e.nodes }, Name: "same",
		Interval: time.Hour, Lease: lease, Log: zap.New(core)})
	a.Start(context.Background())
	t.Cleanup(a.Close)
	aID := a.Instance()
	b := e.coordinator(t, "same", lease) // fences a's registration
	bID := b.Instance()
	waitFor(t, "a to see b's registration", func() bool {
		return logs.FilterMessageSnippet("another live proxy registered under this proxy's xa.instance").Len() > 0
	})
	time.Sleep(3 * lease) // a dozen of a's heartbeats: none may take the name back
	if a.Instance() != aID || b.Instance() != bID {
		t.Fatalf("registrations changed hands: a %d -> %d, b %d -> %d", aID, a.Instance(), bID, b.Instance())
	}
	if n := logs.FilterMessageSnippet("another live proxy").Len(); n != 1 {
		t.Errorf("the conflict was logged %d times, want once", n)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM "+sidecarDB+".xa_instances WHERE name = 'same' AND fenced IS NULL"); n != 1 {
		t.Errorf("%d live registrations named 'same', want 1 (b's)", n)
	}
	if out, err := a.Decide(context.Background(), a.Begin()); out != xa.Abort || err == nil {
		t.Errorf("the fenced proxy decided: %v, %v", out, err)
	}
	if out, err := b.Decide(context.Background(), b.Begin()); out != xa.Commit || err != nil {
		t.Errorf("the live proxy could not decide: %v, %v", out, err)
	}
	b.Close() // b stops renewing: after its lease, a registers again
	waitFor(t, "a to register again", func() bool { return a.Instance() != aID })
	if out, err := a.Decide(context.Background(), a.Begin()); out != xa.Commit || err != nil {
		t.Errorf("a could not decide after registering again: %v, %v", out, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestCleanupNeedsEveryNode: a proxy that sees only some of the nodes a
// dead proxy used keeps that one's decisions (it cannot see its branches
// on the others); a proxy that sees them all commits the branch its
// decision says to commit, and only then forgets the decision.
func TestCleanupNeedsEveryNode(t *testing.T) {
	e := setup(t)
	const lease = 100 * time.Millisecond
	start := func(name string, nodes []*backend.Node) *xa.Coordinator {
		c := xa.New(xa.Options{Sidecar: e.nodes[0], DB: sidecarDB, Nodes: func() []*backend.Node { return nodes }, Name: name,
			Interval: time.Hour, Lease: lease})
		c.Start(context.Background())
		t.Cleanup(c.Close)
		return c
	}
	a := start("a", e.nodes)
	tx := a.Begin()
	e.prepare(t, 1, tx, 7) // on node2 only: node1's part committed already
	if out, err := a.Decide(context.Background(), tx); out != xa.Commit || err != nil {
		t.Fatalf("decide: %v, %v", out, err)
	}
	a.Close() // a dies
	time.Sleep(3 * lease)
	b := start("b", e.nodes[:1]) // Start fences a, recovers and cleans
	recoverOnce(t, b)
	decisions := "SELECT COUNT(*) FROM " + sidecarDB + ".xa_decisions WHERE gtrid = '" + tx.Gtrid() + "'"
	if n := e.count(t, decisions); n != 1 {
		t.Fatalf("a proxy without node2 removed the decision of a branch prepared there (%d rows left)", n)
	}
	start("c", e.nodes) // sees node2: commits the branch
	if got := e.rows(t, 1); got != "7" {
		t.Fatalf("node2's rows %q, want 7 (committed by its decision)", got)
	}
	if n := e.pending(t); n != 0 {
		t.Fatalf("%d branches still prepared", n)
	}
}
