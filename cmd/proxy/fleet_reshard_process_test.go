package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// reshardFleet is a fleet of two proxies (p1 with an admin listener) over
// two nodes and a table t of 2000 rows in 2 subtables, with a reshard to 4
// started through p1 and ready to cut over.
type reshardFleet struct {
	f      *fleetEnv
	d1, d2 *sql.DB
	p1, p2 *proc
	start  func() (*proc, string)
	insert func(h *sql.DB, from, to int)
	call   func(method, path string, body any) move.Status
	name   string
	t0     time.Time
}

func newReshardFleet(t *testing.T) *reshardFleet {
	srv := servers(t)
	f := newFleetEnv(t)
	const db = "fleetresh"
	ds := freshDatabase(t, db, srv[0], srv[1])
	d1, d2 := ds[0], ds[1]
	rev0 := f.put(t, topoYAML(fleetNodes(srv[0], srv[1]), []fleetSchema{{user: appUser, nodes: []string{"node1", "node2"}, shard: "    shard:\n" + hashRule(db, "t")}}))
	start := func() (*proc, string) {
		m := f.startAdmin(t)
		return m.p, m.web
	}
	p1, web1 := start()
	p2, _ := start()
	waitApplied(t, []*proc{p1, p2}, rev0, 10*time.Second)

	h1 := p1.openDB(t, db)
	execAll(t, h1, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(32) NOT NULL)")
	insert := func(h *sql.DB, from, to int) {
		t.Helper()
		for i := from; i < to; i += 100 {
			q := "INSERT INTO t (id, v) VALUES "
			for j := i; j < min(i+100, to); j++ {
				if j > i {
					q += ","
				}
				q += fmt.Sprintf("(%d, 'row %d')", j, j)
			}
			execAll(t, h, q)
		}
	}
	insert(h1, 0, 2000)

	call := func(method, path string, body any) move.Status {
		t.Helper()
		return adminOK(t, web1, method, path, body)
	}
	t0 := time.Now()
	name := fmt.Sprintf("fleetresh_%d", t0.UnixNano()) // the sidecar outlives a test run
	call("POST", "/admin/workflows", map[string]any{"table": db + ".t", "name": name, "nodes": []string{"node1", "node2"}, "locations": []int{2, 2}})
	waitPhase(t, web1, name, move.PhaseReady, 40*time.Second)
	return &reshardFleet{f: f, d1: d1, d2: d2, p1: p1, p2: p2, start: start, insert: insert, call: call, name: name, t0: t0}
}

// TestProcessFleetReshardPublished: a reshard run by one proxy of a fleet
// of two (2 to 4 subtables over 2 nodes) writes the rule it cut over to
// into the topology in etcd; both proxies apply that version (the other
// one puts the rule in force from it, not from the fence: it counts no
// fence retry), and a third proxy started afterwards routes by the new
// rule from its start, with no fence retry either. Every row is found in
// the new subtables. A rollback then writes the old rule back, and all
// three proxies (the third started with the new rule in force) apply it.
func TestProcessFleetReshardPublished(t *testing.T) {
	r := newReshardFleet(t)
	f, d1, d2, p1, p2, start, insert, call, name, t0 := r.f, r.d1, r.d2, r.p1, r.p2, r.start, r.insert, r.call, r.name, r.t0
	const db = "fleetresh"
	s := call("POST", "/admin/workflows/"+name+"/cutover", nil)
	if s.State.Phase != move.PhaseSwitched {
		t.Fatalf("after cutover: %s (%s)", s.State.Phase, s.State.Error)
	}
	cut := time.Now()

	// The topology in etcd carries the rule cut over to.
	rev := waitTopologyRule(t, f, 10*time.Second, "the cut-over rule in etcd's topology", func(r config.ShardRule) bool {
		return r.Generation == s.Spec.To.Generation && slices.Equal(r.Locations, []int{2, 2})
	})
	stored := time.Since(cut)
	took := waitApplied(t, []*proc{p1, p2}, rev, 10*time.Second)

	// The other proxy routes by the new rule without meeting the fence.
	h2 := p2.openDB(t, db)
	insert(h2, 2000, 2400)
	if n := p2.metric(t, "shardgate_fence_retries_total"); n != 0 {
		t.Errorf("the second proxy met the fence %v times after applying version %d", n, rev)
	}
	// A proxy started now serves the new rule from the topology.
	p3, _ := start()
	waitApplied(t, []*proc{p3}, rev, 5*time.Second)
	h3 := p3.openDB(t, db)
	insert(h3, 2400, 2800)
	var n int
	if err := h3.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2800 {
		t.Errorf("the third proxy counts %d rows, want 2800", n)
	}
	for i, p := range []*proc{p1, p2, p3} {
		if v := p.metric(t, "shardgate_fence_retries_total"); v != 0 {
			t.Errorf("proxy %d: %v fence retries, want 0", i+1, v)
		}
		if v := p.metric(t, "shardgate_fleet_topology_publish_failures_total"); v != 0 {
			t.Errorf("proxy %d: %v publish failures, want 0", i+1, v)
		}
	}
	// Every row is in the new subtables: t_g<gen>_0000..0001 on node1,
	// 0002..0003 on node2 (hash: id mod 4).
	for i, d := range []*sql.DB{d1, d1, d2, d2} {
		var c int
		sub := s.Spec.To.Subtable(i)
		if err := d.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.%s", db, sub)).Scan(&c); err != nil {
			t.Fatal(err)
		}
		if c != 700 {
			t.Errorf("%s holds %d rows, want 700", sub, c)
		}
	}
	t.Logf("reshard to %d subtables in %v; the rule stored in etcd %v after the cutover (version %d), applied by the two proxies after %v; 0 fence retries",
		4, cut.Sub(t0).Round(time.Millisecond), stored.Round(time.Millisecond), rev, roundAll(took))

	// A rollback writes the rule it swapped back to, and every proxy
	// applies it (the ones that put the new rule in force included).
	s = call("POST", "/admin/workflows/"+name+"/rollback", nil)
	if s.State.Phase != move.PhaseRolledBack {
		t.Fatalf("after rollback: %s (%s)", s.State.Phase, s.State.Error)
	}
	back := time.Now()
	rev2 := waitTopologyRule(t, f, 10*time.Second, "the rolled-back rule in etcd's topology", func(r config.ShardRule) bool {
		return r.Generation == s.Spec.From.Generation && slices.Equal(r.Locations, []int{1, 1})
	})
	stored = time.Since(back)
	took = waitApplied(t, []*proc{p1, p2, p3}, rev2, 10*time.Second)
	insert(h2, 2800, 2900)
	if err := h3.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2900 {
		t.Errorf("after the rollback the third proxy counts %d rows, want 2900", n)
	}
	for i, d := range []*sql.DB{d1, d2} {
		var c int
		sub := s.Spec.From.Subtable(i)
		if err := d.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.%s", db, sub)).Scan(&c); err != nil {
			t.Fatal(err)
		}
		if c != 1450 {
			t.Errorf("after the rollback %s holds %d rows, want 1450", sub, c)
		}
	}
	t.Logf("rollback: the rule stored in etcd %v after it (version %d), applied by the three proxies after %v",
		stored.Round(time.Millisecond), rev2, roundAll(took))
}

// TestProcessFleetReshardEtcdDown: with etcd stopped, a cutover is not
// delayed by the topology it cannot write: it succeeds, the failures are
// counted and the rule is pending; the other proxy meets the fence and
// learns the rule from the sidecar. Once etcd is back the rule is stored
// (retried in the background) and both proxies apply that version.
func TestProcessFleetReshardEtcdDown(t *testing.T) {
	r := newReshardFleet(t)
	const db = "fleetresh"
	if err := r.f.etcd.Stop(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	s := r.call("POST", "/admin/workflows/"+r.name+"/cutover", nil)
	if s.State.Phase != move.PhaseSwitched {
		t.Fatalf("after cutover: %s (%s)", s.State.Phase, s.State.Error)
	}
	cutTook := time.Since(down)
	waitUntil(t, 15*time.Second, "publish failures counted", func() bool {
		m, err := fleetMetrics(r.p1)
		return err == nil && m["shardgate_fleet_topology_publish_failures_total"] > 0 && m["shardgate_fleet_topology_publish_pending"] == 1
	})
	// The other proxy still learns the rule at the fence (a statement on
	// one subtable is run again; one on several gets the error).
	h2 := r.p2.openDB(t, db)
	for i := 2000; i < 2100; i++ {
		execAll(t, h2, fmt.Sprintf("INSERT INTO t (id, v) VALUES (%d, 'row %d')", i, i))
	}
	if n := r.p2.metric(t, "shardgate_fence_retries_total"); n < 1 {
		t.Errorf("the second proxy counts %v fence retries, want at least 1", n)
	}
	failures := r.p1.metric(t, "shardgate_fleet_topology_publish_failures_total")
	if err := r.f.etcd.Restart(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	rev := waitTopologyRule(t, r.f, 30*time.Second, "the cut-over rule in etcd's topology", func(r config.ShardRule) bool {
		return r.Generation == s.Spec.To.Generation
	})
	stored := time.Since(up)
	waitApplied(t, []*proc{r.p1, r.p2}, rev, 15*time.Second)
	if v := r.p1.metric(t, "shardgate_fleet_topology_publish_pending"); v != 0 {
		t.Errorf("%v rules pending after they were stored", v)
	}
	var n int
	if err := h2.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 2100 {
		t.Errorf("the second proxy counts %d rows (%v), want 2100", n, err)
	}
	t.Logf("etcd down: cutover answered in %v, %v failed attempts to store the rule; etcd back: stored %v later (version %d), applied by both",
		cutTook.Round(time.Millisecond), failures, stored.Round(time.Millisecond), rev)
}

// waitTopologyRule waits until the rule of table t in the topology in etcd
// satisfies ok, and returns that topology's version.
func waitTopologyRule(t *testing.T, f *fleetEnv, timeout time.Duration, what string, ok func(config.ShardRule) bool) int64 {
	t.Helper()
	var rev int64
	waitUntil(t, timeout, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		v, err := f.store.Get(ctx)
		if err != nil {
			return false
		}
		cfg, err := config.Parse(v.YAML)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range cfg.Schemas[0].Shard {
			if r.Table == "t" && ok(r) {
				rev = v.Rev
				return true
			}
		}
		return false
	})
	return rev
}
