package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/fleet"
	"github.com/shardgate/shardgate/internal/etcdtest"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/proxy/server"
	"github.com/shardgate/shardgate/topo"
)

// fleetProxy is an in-process proxy joined to a fleet in a test etcd.
type fleetProxy struct {
	*proxy
	agent     *fleet.Agent
	endpoints []string // the fleet's etcd
}

// startFleetProxy starts a proxy on cfg and joins it to the fleet in srv
// as id; its agent announces its cutovers (FleetOptions.Cutover) and,
// unless silent, holds the tables other members cut over (a silent member
// is live but never acknowledges: an old or a frozen proxy).
func startFleetProxy(t *testing.T, srv *etcdtest.Server, cfg *config.Config, id string, silent bool) *fleetProxy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := topo.Open(ctx, topo.Options{Endpoints: srv.Endpoints(), Prefix: "/shardgate/cutover-test", DialTimeout: time.Second, LeaseTTL: 2})
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
	ag, err := fleet.Join(ctx, fleet.Options{Store: st, Member: topo.Member{ID: id}, Log: log, Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := startProxyWith(t, cfg, server.Options{Fleet: &server.FleetOptions{Cutover: ag.Cutover}})
	t.Cleanup(ag.Close) // before the server's Shutdown (cleanups run last first)
	if silent {
		ag.Run(struct{ fleet.Proxy }{p.srv})
	} else {
		ag.Run(p.srv)
	}
	return &fleetProxy{proxy: p, agent: ag, endpoints: srv.Endpoints()}
}

// waitLeader waits until fp leads its fleet (the leader runs the
// workflows).
func waitLeader(t *testing.T, fp *fleetProxy) {
	t.Helper()
	eventually(t, 10*time.Second, fp.agent.ID()+" to lead the fleet", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := topo.Open(ctx, topo.Options{Endpoints: fp.endpoints, Prefix: "/shardgate/cutover-test"})
		if err != nil {
			return false
		}
		defer st.Close()
		l, err := st.Leader(ctx)
		return err == nil && l == fp.agent.ID()
	})
}

// load writes and reads sbtest1 through each db, workers per db, until
// stop is closed; it returns the rows inserted and every error.
type load struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	inserted atomic.Int64
	reads    atomic.Int64
	mu       sync.Mutex
	errs     []error
}

func startLoad(dbs []*sql.DB, workers int, firstID int) *load {
	l := &load{stop: make(chan struct{})}
	for i, db := range dbs {
		for w := 0; w < workers; w++ {
			base := firstID + (i*workers+w)*1_000_000
			l.wg.Go(func() {
				for n := 1; ; n++ {
					select {
					case <-l.stop:
						return
					default:
					}
					id := base + n
					_, err := db.Exec(fmt.Sprintf("INSERT INTO sbtest1 VALUES (%d, %d, 'load', 'p')", id, n))
					if err != nil {
						err = fmt.Errorf("INSERT of %d: %w", id, err)
					} else {
						l.inserted.Add(1)
						var c string
						if err = db.QueryRow("SELECT c FROM sbtest1 WHERE id = ?", id).Scan(&c); err != nil {
							err = fmt.Errorf("prepared SELECT of %d: %w", id, err)
						} else {
							l.reads.Add(1)
						}
					}
					if err != nil {
						l.mu.Lock()
						l.errs = append(l.errs, err)
						l.mu.Unlock()
					}
				}
			})
		}
	}
	return l
}

func (l *load) end() []error {
	close(l.stop)
	l.wg.Wait()
	return l.errs
}

// bufferOf is what p's gates held so far.
func bufferOf(p *proxy) metrics.BufferStats { return p.srv.Stats().Buffer }

// swapUnderLoad runs cmd (cutover or rollback) of workflow name through
// web while the load runs through dbs, and returns the workflow's status.
func swapUnderLoad(t *testing.T, web, name, cmd string, dbs []*sql.DB, firstID int) (move.Status, *load) {
	t.Helper()
	l := startLoad(dbs, 4, firstID)
	time.Sleep(300 * time.Millisecond) // the load is under way before the pause
	var st move.Status
	if code, body := admin(t, web, "POST", "/admin/workflows/"+name+"/"+cmd, nil, &st); code != 200 {
		l.end()
		t.Fatalf("%s: %d %s", cmd, code, body)
	}
	time.Sleep(300 * time.Millisecond) // and goes on after it
	for _, err := range l.end() {
		t.Errorf("a client statement failed during the %s: %v", cmd, err)
	}
	return st, l
}

// TestFleetCutover: a fleet in a real etcd. With one proxy the cutover and
// the rollback pause its own sessions only. With three, the leader A cuts
// sbtest1 over while B and C (which run no workflow) carry the load: each
// holds its statements on the table (buffered, then drained), none meets
// the fence (no fence retry), no client statement fails, and every row
// written is read back through A. The rollback takes the same path.
func TestFleetCutover(t *testing.T) {
	c, cfg := moveCluster(t)
	etcd := etcdtest.Start(t)
	a := startFleetProxy(t, etcd, cfg, "a", false)
	waitLeader(t, a)
	dbA := openDB(t, a.dsn("sbtest", ""))
	mustExec(t, dbA, "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(120) NOT NULL, pad VARCHAR(60) NOT NULL)")
	var vals []string
	for j := 1; j <= 1000; j++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'c%d', 'p')", j, j, j))
	}
	mustExec(t, dbA, "INSERT INTO sbtest1 VALUES "+strings.Join(vals, ","))
	web := httptest.NewServer(a.srv.AdminHandler())
	defer web.Close()
	rows := 1000
	grow := func(name string) {
		t.Helper()
		req := map[string]any{"table": "sbtest.sbtest1", "name": name, "nodes": []string{"node1", "node2", "node3"}, "locations": []int{3, 3, 2}}
		if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
			t.Fatalf("start: %d %s", code, body)
		}
		waitPhase(t, web.URL, name, move.PhaseReady, 2*time.Minute)
	}
	count := func(when string) {
		t.Helper()
		if got := queryValue(t, dbA, "SELECT COUNT(*) FROM sbtest1"); got != fmt.Sprint(rows) {
			t.Fatalf("%s: A counts %s rows, want %d", when, got, rows)
		}
	}

	// One proxy.
	grow("one")
	st, l := swapUnderLoad(t, web.URL, "one", "cutover", []*sql.DB{dbA}, 10_000_000)
	rows += int(l.inserted.Load())
	t.Logf("1 proxy: cutover pause %.1f ms; %d rows written, %d read meanwhile; A's buffer %+v", st.State.PauseMillis, l.inserted.Load(), l.reads.Load(), bufferOf(a.proxy))
	count("after the cutover with one proxy")
	st, l = swapUnderLoad(t, web.URL, "one", "rollback", []*sql.DB{dbA}, 20_000_000)
	rows += int(l.inserted.Load())
	t.Logf("1 proxy: rollback pause %.1f ms; %d rows written meanwhile", st.State.PauseMillis, l.inserted.Load())
	count("after the rollback with one proxy")

	// Three proxies: B and C carry the load.
	cfgB, cfgC := *cfg, *cfg
	b := startFleetProxy(t, etcd, &cfgB, "b", false)
	cp := startFleetProxy(t, etcd, &cfgC, "c", false)
	dbs := []*sql.DB{openDB(t, b.dsn("sbtest", "")), openDB(t, cp.dsn("sbtest", ""))}
	grow("three")
	st, l = swapUnderLoad(t, web.URL, "three", "cutover", dbs, 30_000_000)
	rows += int(l.inserted.Load())
	bb, bc := bufferOf(b.proxy), bufferOf(cp.proxy)
	t.Logf("3 proxies: cutover pause %.1f ms; %d rows written, %d read through B and C meanwhile; B's buffer %+v; C's buffer %+v; A's %+v",
		st.State.PauseMillis, l.inserted.Load(), l.reads.Load(), bb, bc, bufferOf(a.proxy))
	for _, x := range []struct {
		name string
		p    *proxy
		b    metrics.BufferStats
	}{{"B", b.proxy, bb}, {"C", cp.proxy, bc}} {
		if x.b.Buffered == 0 || x.b.Drained != x.b.Buffered || x.b.Pauses == 0 {
			t.Errorf("%s's buffer after the cutover: %+v, want statements buffered and all drained", x.name, x.b)
		}
		if r := x.p.srv.Stats().FenceRetries; r != 0 {
			t.Errorf("%s ran %d statements again after the fence: it was not held", x.name, r)
		}
	}
	if m := bufferOf(a.proxy).AcksMissing; m != 0 {
		t.Errorf("%d acknowledgements missing at A", m)
	}
	count("after the cutover with three proxies")
	for _, p := range []*proxy{b.proxy, cp.proxy} {
		if r := p.srv.Stats().FenceRetries; r != 0 {
			t.Errorf("a proxy ran %d statements again after the fence", r)
		}
	}

	st, l = swapUnderLoad(t, web.URL, "three", "rollback", dbs, 40_000_000)
	rows += int(l.inserted.Load())
	t.Logf("3 proxies: rollback pause %.1f ms; %d rows written through B and C meanwhile; B's buffer %+v; C's buffer %+v",
		st.State.PauseMillis, l.inserted.Load(), bufferOf(b.proxy), bufferOf(cp.proxy))
	for _, p := range []*proxy{b.proxy, cp.proxy} {
		if r := p.srv.Stats().FenceRetries; r != 0 {
			t.Errorf("a proxy ran %d statements again after the rollback's fence", r)
		}
	}
	count("after the rollback with three proxies")
	_ = c
}

// TestFleetCutoverSilentMember: C is a live member of the fleet that never
// acknowledges (its agent does not hold tables: an older or a frozen
// proxy). A's cutover waits for it no longer than cutover_ack_wait, then
// fences and swaps; C's writes meet the fence and run again on the new
// subtables, with no client error, while B's are held.
func TestFleetCutoverSilentMember(t *testing.T) {
	c, cfg := moveCluster(t)
	cfg.Move.CutoverAckWait = 300 * time.Millisecond
	etcd := etcdtest.Start(t)
	a := startFleetProxy(t, etcd, cfg, "a", false)
	waitLeader(t, a)
	cfgB, cfgC := *cfg, *cfg
	b := startFleetProxy(t, etcd, &cfgB, "b", false)
	cp := startFleetProxy(t, etcd, &cfgC, "c", true)
	dbA := openDB(t, a.dsn("sbtest", ""))
	mustExec(t, dbA, "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(120) NOT NULL, pad VARCHAR(60) NOT NULL)",
		"INSERT INTO sbtest1 VALUES (1, 1, 'a', 'p'), (2, 2, 'b', 'p')")
	web := httptest.NewServer(a.srv.AdminHandler())
	defer web.Close()
	req := map[string]any{"table": "sbtest.sbtest1", "name": "grow", "nodes": []string{"node1", "node2", "node3"}, "locations": []int{3, 3, 2}}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	waitPhase(t, web.URL, "grow", move.PhaseReady, 2*time.Minute)
	// Server-side prepared statements on the silent proxy: a
	// COM_STMT_PREPARE that meets a fenced subtable refreshes the rule and
	// prepares again, as executions and text statements run again.
	dbs := []*sql.DB{openDB(t, b.dsn("sbtest", "interpolateParams=true")), openDB(t, cp.dsn("sbtest", ""))}
	st, l := swapUnderLoad(t, web.URL, "grow", "cutover", dbs, 10_000_000)
	ba := bufferOf(a.proxy)
	t.Logf("3 proxies, C silent: cutover pause %.1f ms (ack wait %v); %d rows written meanwhile; acknowledgements missing %d; B's buffer %+v; C's fence retries %d",
		st.State.PauseMillis, cfg.Move.CutoverAckWait, l.inserted.Load(), ba.AcksMissing, bufferOf(b.proxy), cp.srv.Stats().FenceRetries)
	if st.State.Phase != move.PhaseSwitched {
		t.Fatalf("after the cutover: phase %s (%s)", st.State.Phase, st.State.Error)
	}
	if ba.AcksMissing != 1 {
		t.Errorf("acknowledgements missing at A: %d, want 1 (C)", ba.AcksMissing)
	}
	if limit := cfg.Move.CutoverAckWait + 700*time.Millisecond; time.Duration(st.State.PauseMillis*float64(time.Millisecond)) > limit {
		t.Errorf("the pause %.1f ms exceeds the ack wait by more than 700 ms", st.State.PauseMillis)
	}
	if r := cp.srv.Stats().FenceRetries; r == 0 {
		t.Errorf("C, which did not hold the table, ran no statement again after the fence")
	}
	if bb := bufferOf(b.proxy); bb.Buffered == 0 || bb.Drained != bb.Buffered {
		t.Errorf("B's buffer: %+v", bb)
	}
	if r := b.srv.Stats().FenceRetries; r != 0 {
		t.Errorf("B ran %d statements again after the fence", r)
	}
	// Every row written is in the new subtables, none in the old ones
	// under their names.
	if got, want := queryValue(t, dbA, "SELECT COUNT(*) FROM sbtest1"), fmt.Sprint(2+l.inserted.Load()); got != want {
		t.Fatalf("A counts %s rows, want %s", got, want)
	}
	n1 := openDB(t, directDSN(c.Servers[0], "sbtest", ""))
	if got := queryValue(t, n1, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sbtest' AND TABLE_NAME = 'sbtest1_0000'"); got != "0" {
		t.Fatalf("the old subtable sbtest1_0000 is there under its name after the cutover")
	}
}
