package main_test

// Fleet process tests (issue 35): three proxy binaries in fleet mode
// (-etcd, -cluster) against a real etcd (internal/etcdtest) and real
// MariaDB servers, measured from outside as an operator would: their
// /metrics, etcd's keys, and the rows on the servers.

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardgate/shardgate/internal/etcdtest"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/topo"
)

// leaseTTL is the proxies' membership lease (topo's default; cmd/proxy
// has no flag for it): how long a killed leader stays leader.
const leaseTTL = 5 * time.Second

// fleetEnv is one fleet: its etcd, its prefix, and the test's own client.
type fleetEnv struct {
	etcd   *etcdtest.Server
	prefix string
	store  *topo.Store
}

func newFleetEnv(t *testing.T) *fleetEnv {
	t.Helper()
	servers(t) // skips under -short, where there is no proxy binary
	e := etcdtest.Start(t)
	f := &fleetEnv{etcd: e, prefix: "/shardgate/" + strings.ToLower(t.Name())}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := topo.Open(ctx, topo.Options{Endpoints: e.Endpoints(), Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.store = st
	return f
}

// put stores a topology version unconditionally and returns it.
func (f *fleetEnv) put(t *testing.T, yaml string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rev, err := f.store.Put(ctx, []byte(yaml), -1)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// launch starts the proxy binary as one proxy of the fleet, without
// waiting for it to serve. It is killed when the test ends.
func (f *fleetEnv) launch(t *testing.T) *proc {
	t.Helper()
	dir := t.TempDir()
	p := &proc{addr: freeAddr(t), metrics: freeAddr(t), done: make(chan struct{}), shutdownTimeout: 3 * time.Second}
	p.spawn(t, dir, []string{proxyBin, "-etcd", f.etcd.ClientURL, "-cluster", f.prefix, "-addr", p.addr, "-metrics-addr", p.metrics}, nil)
	return p
}

// start launches a proxy and waits until it greets clients.
func (f *fleetEnv) start(t *testing.T) *proc {
	t.Helper()
	p := f.launch(t)
	waitServing(t, p, 20*time.Second)
	return p
}

// waitServing waits until p sends a greeting.
func waitServing(t *testing.T, p *proc, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !p.greets() {
		if p.exited() {
			t.Fatalf("the proxy exited: %v\n%s", p.waitErr, tail(p.logPath, 3000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy does not answer on %s after %v\n%s", p.addr, timeout, tail(p.logPath, 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fleetMetrics scrapes the proxy's unlabelled shardgate_fleet_* series.
func fleetMetrics(p *proc) (map[string]float64, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "shardgate_fleet_") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

// applied is the topology version p serves, -1 if it does not say.
func applied(p *proc) int64 {
	m, err := fleetMetrics(p)
	if err != nil {
		return -1
	}
	v, ok := m["shardgate_fleet_applied_version"]
	if !ok {
		return -1
	}
	return int64(v)
}

// waitApplied waits until every proxy serves version rev and returns how
// long each took.
func waitApplied(t *testing.T, ps []*proc, rev int64, timeout time.Duration) []time.Duration {
	t.Helper()
	start := time.Now()
	took := make([]time.Duration, len(ps))
	waitUntil(t, timeout, fmt.Sprintf("every proxy to serve topology version %d", rev), func() bool {
		all := true
		for i, p := range ps {
			if took[i] == 0 && applied(p) == rev {
				took[i] = time.Since(start)
			}
			all = all && took[i] != 0
		}
		return all
	})
	return took
}

// fleetNode is a node of a test topology.
type fleetNode struct {
	name   string
	master *mariadbtest.Server
	slaves []*mariadbtest.Server
}

// fleetSchema is a user and its schema: the nodes it uses (the first is
// the default) and its shard list as YAML at the schema's indentation.
type fleetSchema struct {
	user  string
	nodes []string
	shard string
}

// topoYAML is a topology for the fleet: every user has appPassword, every
// node down_after_noalive 1 and health checks every 100 ms, so that a
// killed master is seen at once.
func topoYAML(nodes []fleetNode, schemas []fleetSchema) string {
	var b strings.Builder
	b.WriteString("log_level: info\nshutdown_timeout: 3s\nbackend:\n  health_interval: 100ms\nuser_list:\n")
	for _, s := range schemas {
		fmt.Fprintf(&b, "  - user: %s\n    password: %q\n", s.user, appPassword)
	}
	b.WriteString("nodes:\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "  - name: %s\n    master: %s\n    user: %q\n    password: %q\n    down_after_noalive: 1\n",
			n.name, n.master.Addr, n.master.User, n.master.Password)
		if len(n.slaves) > 0 {
			var sl []string
			for _, s := range n.slaves {
				sl = append(sl, s.Addr+"@1")
			}
			fmt.Fprintf(&b, "    slave: %s\n", strings.Join(sl, ","))
		}
	}
	b.WriteString("schema_list:\n")
	for _, s := range schemas {
		fmt.Fprintf(&b, "  - user: %s\n    nodes: [%s]\n    default: %s\n%s", s.user, strings.Join(s.nodes, ", "), s.nodes[0], s.shard)
	}
	return b.String()
}

// userDSN is a DSN through p for user (password appPassword).
func userDSN(p *proc, user, db string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=5s&readTimeout=10s&writeTimeout=10s", user, appPassword, p.addr, db)
}

// direct opens a handle on a server, closed when the test ends.
func direct(t *testing.T, s *mariadbtest.Server, db string) *sql.DB {
	t.Helper()
	h, err := sql.Open("mysql", s.DSN(db)+"&timeout=5s&readTimeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func execAll(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// ids reads the id column of table through db, sorted.
func ids(t *testing.T, db *sql.DB, table string) []int {
	t.Helper()
	rows, err := db.Query("SELECT id FROM " + table + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sqlCode(err error) uint16 {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// TestProcessFleetPropagation: one topology version adds a node, a user
// whose schema uses it and a hash rule on an empty table. All three
// proxies apply it; none serves any version but the old and the new one
// (their applied version is sampled every few ms throughout), none serves
// half of it (a login of the new user is tried through each proxy all the
// while; once one succeeds, its insert must route by the new rule to the
// new node); and through each proxy the new user's rows land on the
// subtables the rule names, read directly on the servers.
func TestProcessFleetPropagation(t *testing.T) {
	srv := servers(t)
	s1, s2 := srv[0], srv[1]
	f := newFleetEnv(t)
	const db = "fleetprop"
	d1, d2 := direct(t, s1, ""), direct(t, s2, "")
	for _, d := range []*sql.DB{d1, d2} {
		execAll(t, d, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db)
	}
	execAll(t, d1, "CREATE TABLE fleetprop.t_0000 (id INT PRIMARY KEY)", "CREATE TABLE fleetprop.t_0001 (id INT PRIMARY KEY)")
	execAll(t, d2, "CREATE TABLE fleetprop.t_0002 (id INT PRIMARY KEY)", "CREATE TABLE fleetprop.t_0003 (id INT PRIMARY KEY)")

	node1 := fleetNode{name: "node1", master: s1}
	node2 := fleetNode{name: "node2", master: s2}
	old := topoYAML([]fleetNode{node1}, []fleetSchema{{user: appUser, nodes: []string{"node1"}}})
	rev1 := f.put(t, old)
	var ps []*proc
	for range 3 {
		ps = append(ps, f.start(t))
	}
	waitApplied(t, ps, rev1, 10*time.Second)

	// Sample each proxy's applied version and try the new user, until
	// every proxy has the new version and the new user's insert worked.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := make([]map[int64]int, len(ps))
	var half []string
	firstLogin := make([]time.Duration, len(ps))
	var putAt time.Time
	for i, p := range ps {
		seen[i] = map[int64]int{}
		wg.Go(func() {
			for ctx.Err() == nil {
				v := applied(p)
				mu.Lock()
				seen[i][v]++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
		wg.Go(func() {
			h, err := sql.Open("mysql", userDSN(p, "newuser", db))
			if err != nil {
				t.Error(err)
				return
			}
			defer h.Close()
			h.SetMaxIdleConns(0) // every try is a new login
			for n := 0; ctx.Err() == nil; n++ {
				id := 1_000_000*(i+1) + 4*n + 2 // t_0002: node2
				_, err := h.ExecContext(ctx, fmt.Sprintf("INSERT INTO t VALUES (%d)", id))
				mu.Lock()
				switch {
				case err == nil:
					if firstLogin[i] == 0 && !putAt.IsZero() {
						firstLogin[i] = time.Since(putAt)
					}
				case sqlCode(err) == 1045: // the new user is not there yet
					if firstLogin[i] != 0 {
						half = append(half, fmt.Sprintf("proxy %d: the new user was refused after it had logged in: %v", i, err))
					}
				case ctx.Err() == nil:
					half = append(half, fmt.Sprintf("proxy %d: %v", i, err))
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // samples of the old version

	rule := "    shard:\n      - db: fleetprop\n        table: t\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [2, 2]\n"
	next := topoYAML([]fleetNode{node1, node2}, []fleetSchema{
		{user: appUser, nodes: []string{"node1"}},
		{user: "newuser", nodes: []string{"node1", "node2"}, shard: rule},
	})
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	mu.Lock()
	putAt = time.Now()
	mu.Unlock()
	rev2, err := f.store.Put(pctx, []byte(next), rev1)
	pcancel()
	if err != nil {
		t.Fatal(err)
	}
	took := waitApplied(t, ps, rev2, 15*time.Second)
	waitUntil(t, 10*time.Second, "the new user's first insert through every proxy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !slices.Contains(firstLogin, 0)
	})
	time.Sleep(200 * time.Millisecond) // samples of the new version
	cancel()
	wg.Wait()
	t.Logf("topology version %d -> %d: applied by the three proxies %v after the Put (as their /metrics show it); the new user's first insert went through %v after it",
		rev1, rev2, roundAll(took), roundAll(firstLogin))
	for _, h := range half {
		t.Errorf("half a version served: %s", h)
	}
	for i := range ps {
		var vs []string
		for v, n := range seen[i] {
			vs = append(vs, fmt.Sprintf("%d (%d samples)", v, n))
			if v != rev1 && v != rev2 && v != -1 { // -1: /metrics did not answer in time
				t.Errorf("proxy %d served topology version %d, neither %d nor %d", i, v, rev1, rev2)
			}
		}
		sort.Strings(vs)
		t.Logf("proxy %d served versions %s", i, strings.Join(vs, ", "))
	}

	// Through each proxy, the new user's rows go where the rule says.
	want := map[int][]int{}
	for i, p := range ps {
		h, err := sql.Open("mysql", userDSN(p, "newuser", db))
		if err != nil {
			t.Fatal(err)
		}
		for k := range 8 {
			id := 100*(i+1) + k
			if _, err := h.Exec("INSERT INTO t VALUES (?)", id); err != nil {
				t.Errorf("proxy %d: INSERT %d: %v", i, id, err)
			}
			want[id%4] = append(want[id%4], id)
		}
		h.Close()
	}
	for k, d := range []*sql.DB{d1, d1, d2, d2} {
		var got []int
		for _, id := range ids(t, d, fmt.Sprintf("fleetprop.t_%04d", k)) {
			if id%4 != k {
				t.Errorf("row %d is in t_%04d, want t_%04d", id, k, id%4)
			}
			if id < 1_000_000 {
				got = append(got, id)
			}
		}
		slices.Sort(want[k])
		if !slices.Equal(got, want[k]) {
			t.Errorf("t_%04d holds %v of the rows inserted through the proxies, want %v", k, got, want[k])
		}
	}
	if t.Failed() {
		return
	}
	ms, err := f.store.Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Applied != rev2 {
			t.Errorf("member %s publishes version %d, want %d", m.ID, m.Applied, rev2)
		}
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// replicatedFleet starts two MariaDB servers of its own (the master is
// killed), a replica of the first on the second, a fleet whose node1 is
// that pair, and three proxies; a table fleet.t exists.
func replicatedFleet(t *testing.T) (f *fleetEnv, master, replica *mariadbtest.Server, ps []*proc) {
	t.Helper()
	servers(t)
	c, err := mariadbtest.Start("", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	master, replica = c.Servers[0], c.Servers[1]
	if err := mariadbtest.Replicate(master, replica); err != nil {
		t.Fatal(err)
	}
	execAll(t, direct(t, master, ""), "CREATE DATABASE fleet", "CREATE TABLE fleet.t (id INT PRIMARY KEY, via INT)")
	f = newFleetEnv(t)
	rev := f.put(t, topoYAML([]fleetNode{{name: "node1", master: master, slaves: []*mariadbtest.Server{replica}}},
		[]fleetSchema{{user: appUser, nodes: []string{"node1"}}}))
	for range 3 {
		ps = append(ps, f.start(t))
	}
	waitApplied(t, ps, rev, 10*time.Second)
	waitUntil(t, 15*time.Second, "three members and a leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, err := f.store.Members(ctx)
		l, lerr := f.store.Leader(ctx)
		return err == nil && lerr == nil && len(ms) == 3 && l != ""
	})
	return f, master, replica, ps
}

// promote makes replica a master: the operator's failover after the
// master died.
func promote(t *testing.T, replica *mariadbtest.Server) {
	t.Helper()
	execAll(t, direct(t, replica, ""), "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only=0")
}

// masterRecord reads P/masters/<node>: its value and how many times it was
// written (etcd's per-key Version; 0 when absent).
func (f *fleetEnv) masterRecord(t *testing.T, node string) (addr string, writes int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := f.store.Client().Get(ctx, f.prefix+"/masters/"+node)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].Version
}

// watchMaster records every write to P/masters/<node> from now on, from
// etcd's revision history (a watch from the current revision); the
// returned function stops it and lists them.
func (f *fleetEnv) watchMaster(t *testing.T, node string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	probe, err := f.store.Client().Get(ctx, f.prefix+"/masters/"+node)
	if err != nil {
		t.Fatal(err)
	}
	wch := f.store.Client().Watch(ctx, f.prefix+"/masters/"+node, clientv3.WithRev(probe.Header.Revision+1))
	var mu sync.Mutex
	var out []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wr := range wch {
			mu.Lock()
			for _, ev := range wr.Events {
				out = append(out, fmt.Sprintf("%s %s at revision %d", ev.Type, ev.Kv.Value, ev.Kv.ModRevision))
			}
			mu.Unlock()
		}
	}()
	stop := func() []string {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
	t.Cleanup(func() { stop() })
	return stop
}

// memberProc returns the proxy that registered as member id.
func (f *fleetEnv) memberProc(t *testing.T, ps []*proc, id string) *proc {
	t.Helper()
	ms, err := f.store.Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == id {
			for _, p := range ps {
				if p.addr == m.Addr {
					return p
				}
			}
		}
	}
	t.Fatalf("no proxy is member %s (%+v)", id, ms)
	return nil
}

// writeThrough inserts row id through p, retrying for up to timeout while
// the proxy has not yet moved to the new master; it returns how long
// that took.
func writeThrough(t *testing.T, p *proc, id, via int, timeout time.Duration) time.Duration {
	t.Helper()
	h, err := sql.Open("mysql", userDSN(p, appUser, "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	start := time.Now()
	for {
		_, err := h.Exec("INSERT INTO t VALUES (?, ?)", id, via)
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("INSERT through proxy %s: %v %v after the start", p.addr, err, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProcessFleetLeaderKilled: the leader proxy is killed with kill -9;
// while no proxy leads (its lease still runs), node1's master is killed
// and its replica promoted. Meanwhile no survivor switches by itself
// (its writes fail). Another proxy leads within the lease TTL plus a
// margin, it records the switch exactly once (etcd's history of
// P/masters/node1 has one write), and both survivors write to the new
// master.
func TestProcessFleetLeaderKilled(t *testing.T) {
	f, master, replica, ps := replicatedFleet(t)
	ctx := context.Background()
	oldLeader, err := f.store.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lp := f.memberProc(t, ps, oldLeader)
	if addr, n := f.masterRecord(t, "node1"); n != 0 {
		t.Fatalf("masters/node1 is %s (written %d times) before any switch", addr, n)
	}
	history := f.watchMaster(t, "node1")

	killedAt := time.Now()
	if err := lp.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-lp.done
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	promote(t, replica)
	promotedAt := time.Since(killedAt)
	var survivors []*proc
	for _, p := range ps {
		if p != lp {
			survivors = append(survivors, p)
		}
	}

	// While no proxy leads, none moves node1 by itself: their health
	// checks have seen the master down and the replica promoted (after
	// down_after_noalive, 1 s), yet writes fail until the switch is
	// recorded.
	time.Sleep(1500 * time.Millisecond)
	var aloneErrs []string
	for i, p := range survivors {
		h, err := sql.Open("mysql", userDSN(p, appUser, "fleet"))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = h.ExecContext(wctx, "INSERT INTO t VALUES (?, ?)", 90+i, i)
		cancel()
		h.Close()
		if err != nil {
			aloneErrs = append(aloneErrs, err.Error())
			continue
		}
		if l, lerr := f.store.Leader(ctx); lerr == nil && l == oldLeader {
			t.Errorf("proxy %s wrote to node1 while no proxy led: it switched by itself", p.addr)
		}
	}
	leaderless := time.Since(killedAt)

	var newLeader string
	waitUntil(t, leaseTTL+10*time.Second, "another leader", func() bool {
		l, err := f.store.Leader(ctx)
		newLeader = l
		return err == nil && l != "" && l != oldLeader
	})
	takeover := time.Since(killedAt)
	recorded, writes, addr, hist := f.awaitSwitch(t, replica, survivors, 10, killedAt, 3*time.Second, history)
	t.Logf("%v after the kill, still leaderless, writes through the survivors: %q", leaderless.Round(time.Millisecond), aloneErrs)
	t.Logf("leader %s killed; master killed and replica promoted %v later; %s leads %v after the kill (lease TTL %v); switch to %s recorded %v after the kill; survivors' first writes took %v more; history of masters/node1: %v",
		oldLeader, promotedAt.Round(time.Millisecond), newLeader, takeover.Round(time.Millisecond), leaseTTL,
		addr, recorded.Round(time.Millisecond), roundAll(writes), hist)
	if takeover > leaseTTL+2*time.Second {
		t.Errorf("another proxy led %v after the leader was killed, want within the lease TTL %v plus 2 s", takeover.Round(time.Millisecond), leaseTTL)
	}
	got := slices.DeleteFunc(ids(t, direct(t, replica, ""), "fleet.t"), func(id int) bool { return id >= 90 })
	if !slices.Equal(got, []int{10, 11}) {
		t.Errorf("the promoted server holds rows %v, want [10 11]", got)
	}
}

// awaitSwitch waits until the leader recorded replica as node1's master,
// writes one row through each proxy (ids from base), and after settle (more
// decision rounds) fails unless masters/node1 was written exactly once. It
// returns the time from since to the record, each proxy's first write, the
// record and its history.
func (f *fleetEnv) awaitSwitch(t *testing.T, replica *mariadbtest.Server, ps []*proc, base int, since time.Time, settle time.Duration, history func() []string) (time.Duration, []time.Duration, string, []string) {
	t.Helper()
	waitUntil(t, 15*time.Second, "the switch of node1 recorded", func() bool {
		addr, _ := f.masterRecord(t, "node1")
		return addr == replica.Addr
	})
	recorded := time.Since(since)
	var writes []time.Duration
	for i, p := range ps {
		writes = append(writes, writeThrough(t, p, base+i, i, 10*time.Second))
	}
	time.Sleep(settle)
	addr, n := f.masterRecord(t, "node1")
	hist := history()
	if n != 1 || len(hist) != 1 {
		t.Errorf("masters/node1 was written %d times (history %v), want once", n, hist)
	}
	return recorded, writes, addr, hist
}

// TestProcessFleetMasterKilled: with all three proxies alive, node1's
// master is killed and its replica promoted; the leader records the
// switch once and all three proxies write to the promoted server.
func TestProcessFleetMasterKilled(t *testing.T) {
	f, master, replica, ps := replicatedFleet(t)
	history := f.watchMaster(t, "node1")
	killedAt := time.Now()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	promote(t, replica)
	recorded, writes, addr, hist := f.awaitSwitch(t, replica, ps, 20, killedAt, 2*time.Second, history)
	t.Logf("master killed and replica promoted; switch to %s recorded %v after the kill; the proxies' first writes took %v more; history of masters/node1: %v",
		addr, recorded.Round(time.Millisecond), roundAll(writes), hist)
	if got := ids(t, direct(t, replica, ""), "fleet.t"); !slices.Equal(got, []int{20, 21, 22}) {
		t.Errorf("the promoted server holds rows %v, want [20 21 22] (one through each proxy)", got)
	}
}

// buildShardgate builds the shardgate command into dir.
func buildShardgate(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "shardgate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/shardgate/shardgate/cmd/shardgate").CombinedOutput()
	if err != nil {
		t.Fatalf("building shardgate: %v\n%s", err, out)
	}
	return bin
}

// sysbenchRun is sysbench oltp_read_write through one proxy, on its own
// database (one thread: no deadlocks among clients).
type sysbenchRun struct {
	cmd   *exec.Cmd
	out   strings.Builder
	start time.Time
}

var sbReport = regexp.MustCompile(`\[ (\d+)s \] thds: \d+ tps: [\d.]+ qps: ([\d.]+) .* err/s: ([\d.]+) reconn/s: ([\d.]+)`)

// TestProcessFleetEtcdDown: sysbench runs through the three proxies for
// 40 s; etcd is stopped for 30 s of it. No client statement fails;
// shardgate topo load is refused meanwhile with an error that says why,
// and accepted (and applied by every proxy) once etcd is back; a proxy
// started while etcd is down does not listen, and serves once it is back.
func TestProcessFleetEtcdDown(t *testing.T) {
	s1 := servers(t)[0]
	sbBin, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatal("sysbench is not installed: scripts/deps.sh sysbench (or apt-get install -y sysbench)")
	}
	f := newFleetEnv(t)
	tool := buildShardgate(t, t.TempDir())
	node1 := fleetNode{name: "node1", master: s1}
	rev1 := f.put(t, topoYAML([]fleetNode{node1}, []fleetSchema{{user: appUser, nodes: []string{"node1"}}}))
	var ps []*proc
	for range 3 {
		ps = append(ps, f.start(t))
	}
	waitApplied(t, ps, rev1, 10*time.Second)
	d1 := direct(t, s1, "")

	const runFor, downFor = 40 * time.Second, 30 * time.Second
	var runs []*sysbenchRun
	for i, p := range ps {
		db := fmt.Sprintf("fleetsb%d", i)
		execAll(t, d1, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db)
		host, port, _ := strings.Cut(p.addr, ":")
		args := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
			"--mysql-user=" + appUser, "--mysql-password=" + appPassword, "--mysql-db=" + db,
			"--tables=1", "--table-size=1000"}
		if out, err := exec.Command(sbBin, append(slices.Clone(args), "prepare")...).CombinedOutput(); err != nil {
			t.Fatalf("sysbench prepare through proxy %d: %v\n%s", i, err, out)
		}
		r := &sysbenchRun{}
		r.cmd = exec.Command(sbBin, append(args, "--threads=1", fmt.Sprintf("--time=%d", int(runFor.Seconds())),
			"--report-interval=1", "run")...)
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
		runs = append(runs, r)
	}
	for _, r := range runs {
		r.start = time.Now()
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range runs {
			if r.cmd.ProcessState == nil {
				r.cmd.Process.Kill()
				r.cmd.Wait()
			}
		}
	})

	time.Sleep(5 * time.Second)
	downAt := time.Now()
	if err := f.etcd.Stop(); err != nil {
		t.Fatal(err)
	}
	stoppedIn := time.Since(downAt)
	waitUntil(t, 15*time.Second, "every proxy to report etcd unreachable", func() bool {
		for _, p := range ps {
			m, err := fleetMetrics(p)
			if err != nil || m["shardgate_fleet_etcd_up"] != 0 {
				return false
			}
		}
		return true
	})
	seenDown := time.Since(downAt)

	// A topology change is refused, and says why.
	users2 := []fleetSchema{{user: appUser, nodes: []string{"node1"}}, {user: "app2", nodes: []string{"node1"}}}
	file := filepath.Join(t.TempDir(), "ks.yaml")
	if err := os.WriteFile(file, []byte(topoYAML([]fleetNode{node1}, users2)), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func() (string, time.Duration, error) {
		start := time.Now()
		out, err := exec.Command(tool, "-etcd", f.etcd.ClientURL, "-cluster", f.prefix, "topo", "load", file).CombinedOutput()
		return strings.TrimSpace(string(out)), time.Since(start), err
	}
	out, took, err := load()
	t.Logf("shardgate topo load with etcd down (%v): %v: %s", took.Round(time.Millisecond), err, out)
	if err == nil || !strings.Contains(out, "unreachable") || !strings.Contains(out, "topology change") {
		t.Errorf("shardgate topo load with etcd down: %v, %q; want a refusal saying etcd is unreachable and topology changes need it", err, out)
	}

	// A proxy started now does not listen.
	late := f.launch(t)
	refusedUntil := time.Now().Add(5 * time.Second)
	for time.Now().Before(refusedUntil) {
		if late.greets() {
			t.Fatalf("a proxy started while etcd is down serves clients")
		}
		if late.exited() {
			t.Fatalf("a proxy started while etcd is down exited: %v\n%s", late.waitErr, tail(late.logPath, 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}

	time.Sleep(time.Until(downAt.Add(downFor)))
	if err := f.etcd.Restart(); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	t.Logf("etcd stopped for %v (SIGTERM took %v; the proxies all showed it %v after)", upAt.Sub(downAt).Round(time.Millisecond),
		stoppedIn.Round(time.Millisecond), seenDown.Round(time.Millisecond))
	waitServing(t, late, 10*time.Second)
	lateServes := time.Since(upAt)

	out, took, err = load()
	if err != nil {
		t.Fatalf("shardgate topo load after etcd came back: %v: %s", err, out)
	}
	t.Logf("shardgate topo load after etcd came back (%v): %s", took.Round(time.Millisecond), out)
	v, err := f.store.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(ps), late)
	// Within seconds: gRPC's own reconnect backoff once kept proxies
	// blind to etcd for 11-17 s after this outage (topo.Open caps it).
	applyTook := waitApplied(t, all, v.Rev, 5*time.Second)
	for i, p := range all {
		h, err := sql.Open("mysql", userDSN(p, "app2", ""))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Ping(); err != nil {
			t.Errorf("proxy %d: app2, added after etcd came back, cannot log in: %v", i, err)
		}
		h.Close()
	}
	t.Logf("the late proxy served %v after etcd came back; version %d applied by the four proxies %v after the load returned",
		lateServes.Round(time.Millisecond), v.Rev, roundAll(applyTook))
	// The fleet is whole again: four members, and one of them leads, as
	// each proxy's /metrics says too.
	var leader string
	waitUntil(t, 5*time.Second, "four members, one leader, seen by every proxy", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ms, err := f.store.Members(ctx)
		if err != nil || len(ms) != 4 {
			return false
		}
		if leader, err = f.store.Leader(ctx); err != nil || !slices.ContainsFunc(ms, func(m topo.Member) bool { return m.ID == leader }) {
			return false
		}
		leaders := 0
		for _, p := range all {
			m, err := fleetMetrics(p)
			if err != nil || m["shardgate_fleet_members"] != 4 || m["shardgate_fleet_etcd_up"] != 1 {
				return false
			}
			leaders += int(m["shardgate_fleet_leader"])
		}
		return leaders == 1
	})
	t.Logf("%v after etcd came back: four members, %s leads", time.Since(upAt).Round(time.Millisecond), leader)

	// sysbench: no failed statement, no reconnect, through the outage.
	for i, r := range runs {
		err := r.cmd.Wait()
		text := r.out.String()
		if err != nil {
			t.Errorf("sysbench through proxy %d: %v\n%s", i, err, text)
			continue
		}
		if !strings.Contains(text, "ignored errors:                      0") || !strings.Contains(text, "reconnects:                          0") {
			t.Errorf("sysbench through proxy %d had errors or reconnects:\n%s", i, text)
		}
		var during, outside []float64
		for _, m := range sbReport.FindAllStringSubmatch(text, -1) {
			sec, _ := strconv.Atoi(m[1])
			qps, _ := strconv.ParseFloat(m[2], 64)
			if errs, _ := strconv.ParseFloat(m[3], 64); errs != 0 {
				t.Errorf("sysbench through proxy %d: %s err/s at %ds", i, m[3], sec)
			}
			at := r.start.Add(time.Duration(sec) * time.Second)
			if at.After(downAt.Add(time.Second)) && at.Before(upAt) {
				during = append(during, qps)
			} else {
				outside = append(outside, qps)
			}
		}
		total := regexp.MustCompile(`queries:\s+(\d+)\s+\(([\d.]+) per sec`).FindStringSubmatch(text)
		if total == nil {
			t.Errorf("sysbench through proxy %d: no totals\n%s", i, text)
			continue
		}
		t.Logf("sysbench through proxy %d: %s queries (%s/s), 0 errors; qps %.0f (median) while etcd was down, %.0f otherwise",
			i, total[1], total[2], median(during), median(outside))
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestProcessFleetShutdownWithoutEtcd: SIGTERM ends a proxy of a fleet
// within shutdown_timeout and its margin, with status 0, also when etcd
// is gone (leaving the fleet is bounded: the lease then ends by itself).
func TestProcessFleetShutdownWithoutEtcd(t *testing.T) {
	srv := servers(t)
	f := newFleetEnv(t)
	rev := f.put(t, topoYAML([]fleetNode{{name: "node1", master: srv[0]}}, []fleetSchema{{user: appUser, nodes: []string{"node1"}}}))
	ps := []*proc{f.start(t), f.start(t)}
	waitApplied(t, ps, rev, 10*time.Second)
	ps[0].terminate(t, "etcd answering", time.Now())
	if err := f.etcd.Kill(); err != nil {
		t.Fatal(err)
	}
	ps[1].terminate(t, "etcd killed", time.Now())
}
