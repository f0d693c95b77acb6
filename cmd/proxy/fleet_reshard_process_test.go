package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// TestProcessFleetReshardPublished: a reshard run by one proxy of a fleet
// of two (2 to 4 subtables over 2 nodes) writes the rule it cut over to
// into the topology in etcd; both proxies apply that version (the other
// one puts the rule in force from it, not from the fence: it counts no
// fence retry), and a third proxy started afterwards routes by the new
// rule from its start, with no fence retry either. Every row is found in
// the new subtables. A rollback then writes the old rule back, and all
// three proxies (the third started with the new rule in force) apply it.
func TestProcessFleetReshardPublished(t *testing.T) {
	srv := servers(t)
	f := newFleetEnv(t)
	const db = "fleetresh"
	d1, d2 := direct(t, srv[0], ""), direct(t, srv[1], "")
	for _, d := range []*sql.DB{d1, d2} {
		execAll(t, d, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db)
	}
	nodes := []fleetNode{{name: "node1", master: srv[0]}, {name: "node2", master: srv[1]}}
	shard := "    shard:\n      - db: fleetresh\n        table: t\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [1, 1]\n"
	rev0 := f.put(t, topoYAML(nodes, []fleetSchema{{user: appUser, nodes: []string{"node1", "node2"}, shard: shard}}))
	start := func() (*proc, string) {
		// f.start with an admin listener.
		web := freeAddr(t)
		p := &proc{addr: freeAddr(t), metrics: freeAddr(t), done: make(chan struct{}), shutdownTimeout: 3 * time.Second}
		p.spawn(t, t.TempDir(), []string{proxyBin, "-etcd", f.etcd.ClientURL, "-cluster", f.prefix, "-addr", p.addr,
			"-metrics-addr", p.metrics, "-web-addr", web}, nil)
		waitServing(t, p, 20*time.Second)
		return p, web
	}
	p1, web1 := start()
	p2, _ := start()
	waitApplied(t, []*proc{p1, p2}, rev0, 10*time.Second)

	h1 := p1.openDB(t, db)
	execAll(t, h1, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(32) NOT NULL)")
	insert := func(h *sql.DB, from, to int) {
		t.Helper()
		for i := from; i < to; i += 100 {
			q := "INSERT INTO t VALUES "
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
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://"+web1+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		var s move.Status
		json.Unmarshal(out, &s)
		return s
	}
	t0 := time.Now()
	name := fmt.Sprintf("fleetresh_%d", t0.UnixNano()) // the sidecar outlives a test run
	call("POST", "/admin/workflows", map[string]any{"table": db + ".t", "name": name, "nodes": []string{"node1", "node2"}, "locations": []int{2, 2}})
	deadline := time.Now().Add(40 * time.Second)
	for s := call("GET", "/admin/workflows/"+name, nil); s.State.Phase != move.PhaseReady; s = call("GET", "/admin/workflows/"+name, nil) {
		if time.Now().After(deadline) {
			t.Fatalf("phase %s after 40 s (%s)", s.State.Phase, s.State.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s := call("POST", "/admin/workflows/"+name+"/cutover", nil)
	if s.State.Phase != move.PhaseSwitched {
		t.Fatalf("after cutover: %s (%s)", s.State.Phase, s.State.Error)
	}
	cut := time.Now()

	// The topology in etcd carries the rule cut over to.
	var rev int64
	waitUntil(t, 10*time.Second, "the cut-over rule in etcd's topology", func() bool {
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
			if r.Table == "t" && r.Generation == s.Spec.To.Generation && slices.Equal(r.Locations, []int{2, 2}) {
				rev = v.Rev
				return true
			}
		}
		return false
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
	var rev2 int64
	waitUntil(t, 10*time.Second, "the rolled-back rule in etcd's topology", func() bool {
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
		r := cfg.Schemas[0].Shard[0]
		rev2 = v.Rev
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
