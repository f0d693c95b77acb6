package main_test

// The setup, waits and admin calls that the fleet tests of workflows
// (fleet_lead, fleet_reshard, fleet_cutover_sigstop,
// fleet_cutover_bench) share: proxies of a fleet with an admin listener,
// a database made afresh on every node, a preloaded hash-sharded table,
// the leader, and the workflow endpoints.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
)

// fleetMember is a proxy of a fleet with an admin listener on web.
type fleetMember struct {
	p   *proc
	web string
}

// launchAdmin starts the proxy binary as one proxy of the fleet, with an
// admin listener, without waiting for it to serve. etcd is the endpoint it
// is given: f.etcd.ClientURL, or a relay in front of it. It is killed when
// the test ends.
func (f *fleetEnv) launchAdmin(t *testing.T, etcd string) fleetMember {
	t.Helper()
	web := freeAddr(t)
	p := &proc{addr: freeAddr(t), metrics: freeAddr(t), done: make(chan struct{}), shutdownTimeout: 3 * time.Second}
	p.spawn(t, t.TempDir(), []string{proxyBin, "-etcd", etcd, "-cluster", f.prefix, "-addr", p.addr,
		"-metrics-addr", p.metrics, "-web-addr", web}, nil)
	return fleetMember{p, web}
}

// startAdmin launches a proxy with an admin listener on f's etcd and waits
// until it greets clients.
func (f *fleetEnv) startAdmin(t *testing.T) fleetMember {
	t.Helper()
	m := f.launchAdmin(t, f.etcd.ClientURL)
	waitServing(t, m.p, 20*time.Second)
	return m
}

// procsOf lists the members' processes, in order.
func procsOf(ms []fleetMember) []*proc {
	ps := make([]*proc, len(ms))
	for i, m := range ms {
		ps[i] = m.p
	}
	return ps
}

// memberOf is the index in ms of the member whose process is p, or -1.
func memberOf(ms []fleetMember, p *proc) int {
	for i := range ms {
		if ms[i].p == p {
			return i
		}
	}
	return -1
}

// waitLeader waits until etcd names a leader other than not ("" for
// any), and returns its member id.
func (f *fleetEnv) waitLeader(t *testing.T, timeout time.Duration, not string) string {
	t.Helper()
	what := "a leader"
	if not != "" {
		what = "another leader"
	}
	var id string
	waitUntil(t, timeout, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		id, _ = f.store.Leader(ctx)
		return id != "" && id != not
	})
	return id
}

// threeServers is the package's two MariaDB servers and a third of the
// test's own, stopped when the test ends.
func threeServers(t *testing.T) []*mariadbtest.Server {
	t.Helper()
	srv := servers(t)
	c3, err := mariadbtest.Start(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c3.Stop() })
	return []*mariadbtest.Server{srv[0], srv[1], c3.Servers[0]}
}

// fleetNodes names servers node1, node2, ... in order.
func fleetNodes(srv ...*mariadbtest.Server) []fleetNode {
	nodes := make([]fleetNode, len(srv))
	for i, s := range srv {
		nodes[i] = fleetNode{name: fmt.Sprintf("node%d", i+1), master: s}
	}
	return nodes
}

// hashRule is a shard list entry (at a schema's indentation, under
// "shard:") for db.table hashed on id over node1 and node2, one subtable
// each.
func hashRule(db, table string) string {
	return fmt.Sprintf("      - db: %s\n        table: %s\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [1, 1]\n", db, table)
}

// freshDatabase drops and creates db on every server, through handles
// closed when the test ends, and forgets the workflows named db_* in the
// sidecar (on the first server) now and when the test ends. The sidecar
// outlives a test: an earlier run's workflows of a table would put their
// rule in force at start-up, and a workflow left switched would be resumed
// by the proxies of the tests after it. Registered before any proxy is
// started, the cleanup runs after the proxies are killed.
func freshDatabase(t *testing.T, db string, srv ...*mariadbtest.Server) []*sql.DB {
	t.Helper()
	var ds []*sql.DB
	for _, s := range srv {
		d := direct(t, s, "")
		execAll(t, d, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db)
		ds = append(ds, d)
	}
	forget := func() error {
		_, err := ds[0].Exec("DELETE FROM shardgate_sidecar.move_workflows WHERE name LIKE '" + db + "\\_%'")
		if sqlCode(err) == 1146 { // no sidecar yet
			return nil
		}
		return err
	}
	if err := forget(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forget() })
	return ds
}

// preloadRows puts rows 0 to rows-1 of db.table, hashed on id over two
// subtables (hashRule), straight into those subtables from MariaDB's
// sequence engine: the even ids into table_0000 through d0, the odd ones
// into table_0001 through d1. value is the SQL of the second column.
func preloadRows(t *testing.T, d0, d1 *sql.DB, db, table, value string, rows int) {
	t.Helper()
	execAll(t, d0, fmt.Sprintf("INSERT INTO %s.%s_0000 SELECT seq, %s FROM %s.seq_0_to_%d_step_2", db, table, value, db, rows-1))
	execAll(t, d1, fmt.Sprintf("INSERT INTO %s.%s_0001 SELECT seq, %s FROM %s.seq_1_to_%d_step_2", db, table, value, db, rows-1))
}

// adminCall sends body as JSON to the admin listener web and returns the
// workflow status it answers with, the HTTP status code and the body.
func adminCall(t *testing.T, web, method, path string, body any) (move.Status, int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, "http://"+web+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var s move.Status
	json.Unmarshal(out, &s)
	return s, resp.StatusCode, string(out)
}

// adminOK is adminCall that fails the test unless the answer is 200.
func adminOK(t *testing.T, web, method, path string, body any) move.Status {
	t.Helper()
	s, code, out := adminCall(t, web, method, path, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	return s
}

// waitPhase polls workflow name through the admin listener web until it
// is in phase, and returns its status then; after timeout it fails the
// test with the phase and error it last saw.
func waitPhase(t *testing.T, web, name, phase string, timeout time.Duration) move.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := adminOK(t, web, "GET", "/admin/workflows/"+name, nil)
		if s.State.Phase == phase {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: phase %s after %v, waiting for %s (%s)", name, s.State.Phase, timeout, phase, s.State.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
