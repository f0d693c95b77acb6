package main_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/move"
)

// TestProcessReshardKilled: a reshard of a table of 60 000 rows from 2 to
// 4 subtables is copying when the proxy process is killed with SIGKILL; a
// new process on the same configuration resumes the workflow from its last
// checkpoint (at most one chunk per source is copied again), applies the
// writes made meanwhile, verifies with no difference and cuts over; the
// proxy then answers with exactly the rows written.
func TestProcessReshardKilled(t *testing.T) {
	srvs := servers(t)
	for _, s := range srvs {
		db, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("DROP DATABASE IF EXISTS moveproc"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE DATABASE moveproc"); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	st := settings{nodes: srvs, schema: "    shard:\n      - db: moveproc\n        table: t\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [1, 1]\n"}
	web := freeAddr(t)
	st.extra = "web_addr: " + web + "\n"
	p := startProxy(t, st)
	db := p.openDB(t, "moveproc")
	if _, err := db.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	const rows = 60000
	for i := 0; i < rows; i += 500 {
		var b strings.Builder
		b.WriteString("INSERT INTO t VALUES ")
		for j := i; j < i+500; j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(%d, 'row %d')", j, j)
		}
		if _, err := db.Exec(b.String()); err != nil {
			t.Fatal(err)
		}
	}
	post := func(base, path string, body any) move.Status {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post("http://"+base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
		}
		var s move.Status
		json.Unmarshal(out, &s)
		return s
	}
	get := func(base string) move.Status {
		t.Helper()
		resp, err := http.Get("http://" + base + "/admin/workflows/killed")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s move.Status
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	post(web, "/admin/workflows", map[string]any{"table": "moveproc.t", "name": "killed", "nodes": []string{"node1", "node2"}, "locations": []int{2, 2},
		"options": map[string]any{"CopyWorkers": 1, "BatchRows": 100}})
	side, err := sql.Open("mysql", srvs[0].DSN("shardgate_sidecar"))
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	saved := func() move.State {
		var state string
		if err := side.QueryRow("SELECT state FROM move_workflows WHERE name = 'killed'").Scan(&state); err != nil {
			t.Fatal(err)
		}
		var s move.State
		json.Unmarshal([]byte(state), &s)
		return s
	}
	deadline := time.Now().Add(time.Minute)
	for saved().RowsCopied < 2000 {
		if time.Now().After(deadline) {
			t.Fatal("the copy checkpointed nothing in a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.cmd.Process.Kill()
	<-p.done
	before := saved()
	if before.Phase != move.PhaseCopying {
		t.Fatalf("killed in phase %s, want copying", before.Phase)
	}
	t.Logf("killed with %d of %d rows checkpointed", before.RowsCopied, rows)

	// Writes through a new process; the workflow resumes in it.
	web2 := freeAddr(t)
	st.extra = "web_addr: " + web2 + "\n"
	p2 := startProxy(t, st)
	db2 := p2.openDB(t, "moveproc")
	if _, err := db2.Exec("UPDATE t SET v = 'updated' WHERE id < 1000"); err != nil {
		t.Fatal(err)
	}
	if _, err := db2.Exec("DELETE FROM t WHERE id >= 59000"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(3 * time.Minute)
	var s move.Status
	for s = get(web2); s.State.Phase != move.PhaseReady; s = get(web2) {
		if time.Now().After(deadline) {
			t.Fatalf("phase %s after 3 minutes (%s)", s.State.Phase, s.State.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(s.State.Diffs) > 0 {
		t.Fatalf("verify: %+v", s.State.Diffs)
	}
	if s.State.RowsCopied > rows+2*400 {
		t.Fatalf("%d rows copied for %d: the resumed copy started over", s.State.RowsCopied, rows)
	}
	s = post(web2, "/admin/workflows/killed/cutover", nil)
	if s.State.Phase != move.PhaseSwitched {
		t.Fatalf("after cutover: %s", s.State.Phase)
	}
	var n, updated int
	if err := db2.QueryRow("SELECT COUNT(*), SUM(v = 'updated') FROM t").Scan(&n, &updated); err != nil {
		t.Fatal(err)
	}
	if n != rows-1000 || updated != 1000 {
		t.Fatalf("after the cutover the proxy counts %d rows, %d updated; want %d and 1000", n, updated, rows-1000)
	}
	// The rows are in the new subtables (id mod 4), not only in the old.
	d1, _ := sql.Open("mysql", srvs[0].DSN("moveproc"))
	defer d1.Close()
	var inNew int
	if err := d1.QueryRow("SELECT COUNT(*) FROM t_g1_0000").Scan(&inNew); err != nil {
		t.Fatal(err)
	}
	if inNew != (rows-1000)/4 {
		t.Fatalf("t_g1_0000 on node1 holds %d rows, want %d", inNew, (rows-1000)/4)
	}
	t.Logf("resumed after SIGKILL: %d rows copied in all, cutover pause %.1f ms, %d rows served", s.State.RowsCopied, s.State.PauseMillis, n)
}
