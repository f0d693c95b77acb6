package server_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

// readChanges reads exactly n changes of cs.t from GET /changes, or fails.
func readChanges(t *testing.T, base string, from map[string]string, n int) []changestream.Change {
	t.Helper()
	out := readChanges2(t, base, "cs.t", from, n)
	if len(out) < n {
		t.Fatalf("%d changes, want %d", len(out), n)
	}
	return out
}

// changeEnv is a proxy with table db.t hash-sharded over both servers in
// four subtables (created through it with the given columns), and each
// node's binary log position before anything was written to the table.
func changeEnv(t *testing.T, name, columns string) (*proxy, *config.Config, *sql.DB, map[string]string) {
	t.Helper()
	servers := backends(t)
	cfg := newConfig(t, servers...)
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: name, Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS "+name, "CREATE DATABASE "+name)
	}
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn(name, ""))
	mustExec(t, db, "CREATE TABLE t ("+columns+")")
	from := map[string]string{}
	for i, s := range servers {
		from[fmt.Sprintf("node%d", i+1)] = queryValue(t, openDB(t, directDSN(s, "", "")), "SELECT @@gtid_binlog_pos")
	}
	return p, cfg, db, from
}

// TestChangeStream: rows written through the proxy to a table sharded over
// two nodes come out of GET /changes as changes of the logical table, with
// their subtables, before and after images in column order, the
// transaction's GTID and each row's place in it, in order per row; a
// subscription resumed from a change's Pos delivers that transaction again
// and everything after it; a node without row metadata is refused with
// the reason.
func TestChangeStream(t *testing.T) {
	servers := backends(t)
	p, _, db, from := changeEnv(t, "cs", "id INT PRIMARY KEY, v INT, s VARCHAR(20)")
	for i := 1; i <= 40; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, %d, 'row %d')", i, i, i))
	}
	for i := 1; i <= 10; i++ {
		mustExec(t, db, fmt.Sprintf("UPDATE t SET v = v + 100 WHERE id = %d", i))
	}
	for i := 1; i <= 5; i++ {
		mustExec(t, db, fmt.Sprintf("DELETE FROM t WHERE id = %d", i))
	}
	c := conn(t, db)
	mustExec(t, c, "BEGIN", "INSERT INTO t VALUES (41, 41, 'in a transaction')", "UPDATE t SET s = 'changed' WHERE id = 41", "COMMIT")

	web := httptest.NewServer(p.srv.AdminHandler())
	defer web.Close()
	const total = 40 + 10 + 5 + 2
	got := readChanges(t, web.URL, from, total)
	ops := map[int][]string{}
	for _, ch := range got {
		if ch.Table != "cs.t" || !strings.HasPrefix(ch.Subtable, "cs.t_000") || ch.GTID == "" {
			t.Fatalf("change %+v", ch)
		}
		img := ch.After
		if ch.Op == "delete" {
			img = ch.Before
		}
		id := int(img["id"].(float64))
		ops[id] = append(ops[id], ch.Op)
		switch {
		case ch.Op == "update" && id <= 10:
			if ch.Before["v"].(float64) != float64(id) || ch.After["v"].(float64) != float64(id+100) {
				t.Errorf("update of %d: %v -> %v", id, ch.Before, ch.After)
			}
		case id == 41 && ch.Op == "update":
			if ch.Seq != 1 || ch.After["s"] != "changed" || ch.Before["s"] != "in a transaction" {
				t.Errorf("second row of the transaction: %+v", ch)
			}
		}
	}
	for id := 1; id <= 41; id++ {
		want := "insert"
		switch {
		case id <= 5:
			want = "insert update delete"
		case id <= 10 || id == 41:
			want = "insert update"
		}
		if g := strings.Join(ops[id], " "); g != want {
			t.Errorf("row %d: %s, want %s", id, g, want)
		}
	}

	// Resume from the 30th change: its transaction comes again, then the
	// rest of that node's changes.
	mid := got[29]
	resume := map[string]string{}
	for node := range from {
		resume[node] = from[node]
	}
	resume[mid.Node] = mid.Pos
	var rest []string
	for _, ch := range got {
		if ch.Node == mid.Node {
			rest = append(rest, ch.GTID+"/"+fmt.Sprint(ch.Seq))
		}
	}
	i := 0
	for rest[i] != mid.GTID+"/0" { // the whole transaction comes again
		i++
	}
	rest = rest[i:]
	want := 0
	for _, ch := range got {
		if ch.Node != mid.Node {
			want++
		}
	}
	again := readChanges(t, web.URL, resume, want+len(rest))
	var gotRest []string
	for _, ch := range again {
		if ch.Node == mid.Node {
			gotRest = append(gotRest, ch.GTID+"/"+fmt.Sprint(ch.Seq))
		}
	}
	if strings.Join(gotRest, " ") != strings.Join(rest, " ") {
		t.Errorf("resumed from %s on %s:\n got %v\nwant %v", mid.Pos, mid.Node, gotRest, rest)
	}

	// A node that does not log column names cannot feed a stream.
	d2 := openDB(t, directDSN(servers[1], "", ""))
	mustExec(t, d2, "SET GLOBAL binlog_row_metadata = 'MINIMAL'")
	defer mustExec(t, d2, "SET GLOBAL binlog_row_metadata = 'FULL'")
	resp, err := http.Get(web.URL + "/changes?table=cs.t")
	if err != nil {
		t.Fatal(err)
	}
	body := new(strings.Builder)
	fmt.Fprint(body, resp.Status)
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(buf[:n]), "binlog_row_metadata is MINIMAL, needs FULL") {
		t.Errorf("a node with binlog_row_metadata=MINIMAL: %s %s", resp.Status, buf[:n])
	}
}

// TestChangeStreamResume: a consumer reads part of a stream of changes to
// a table sharded over two nodes in four subtables (single-row statements,
// multi-row transactions, and an ADD COLUMN in the middle), disconnects,
// resumes from the positions of the last changes it handled, is cut off
// again by a restart of the proxy, and resumes on the new proxy. After
// dropping the transactions it was given twice (node, GTID, seq), it has
// every change exactly once, in each row's order, and the rows after the
// ADD COLUMN carry the new column.
func TestChangeStreamResume(t *testing.T) {
	p, cfg, db, from := changeEnv(t, "cs2", "id INT PRIMARY KEY, v INT")
	// The writes, and what each row went through.
	want := map[int][]string{}
	total := 0
	exec := func(q string, id int, op string) {
		mustExec(t, db, q)
		want[id] = append(want[id], op)
		total++
	}
	for id := 1; id <= 60; id++ {
		exec(fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", id, id), id, "insert")
	}
	for id := 1; id <= 60; id += 3 {
		exec(fmt.Sprintf("UPDATE t SET v = v * 2 WHERE id = %d", id), id, "update")
	}
	c := conn(t, db)
	for id := 61; id <= 70; id++ { // two rows per transaction, on one node or two
		mustExec(t, c, "BEGIN", fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", id), fmt.Sprintf("DELETE FROM t WHERE id = %d", id-60), "COMMIT")
		want[id] = append(want[id], "insert")
		want[id-60] = append(want[id-60], "delete")
		total += 2
	}
	mustExec(t, db, "ALTER TABLE t ADD COLUMN extra VARCHAR(10) NOT NULL DEFAULT 'x'")
	for id := 71; id <= 90; id++ {
		exec(fmt.Sprintf("INSERT INTO t VALUES (%d, %d, 'new')", id, id), id, "insert")
	}
	for id := 11; id <= 30; id += 2 {
		exec(fmt.Sprintf("UPDATE t SET extra = 'upd' WHERE id = %d", id), id, "update")
	}

	seen := map[string]bool{}
	got := map[int][]string{}
	unique, redelivered := 0, 0
	handle := func(chs []changestream.Change) {
		for _, ch := range chs {
			key := fmt.Sprintf("%s/%s/%d", ch.Node, ch.GTID, ch.Seq)
			if seen[key] {
				redelivered++
				continue // a transaction delivered again after a resume
			}
			seen[key] = true
			unique++
			img := ch.After
			if ch.Op == "delete" {
				img = ch.Before
			}
			id := int(img["id"].(float64))
			got[id] = append(got[id], ch.Op)
			if ch.Op == "insert" && id > 70 && img["extra"] != "new" {
				t.Errorf("insert of %d after ADD COLUMN: %v", id, img)
			}
			from[ch.Node] = ch.Pos // resume here: this transaction again, then the rest
		}
	}
	web := httptest.NewServer(p.srv.AdminHandler())
	handle(readChanges2(t, web.URL, "cs2.t", from, total/3))
	handle(readChanges2(t, web.URL, "cs2.t", from, total/3))
	web.Close()

	// The proxy restarts; the consumer resumes on the new one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	p2 := startProxy(t, cfg)
	web2 := httptest.NewServer(p2.srv.AdminHandler())
	defer web2.Close()
	// Everything left (redelivered transactions included), until the
	// stream is idle for a second.
	handle(readChanges2(t, web2.URL, "cs2.t", from, 2*total))
	t.Logf("%d changes, %d distinct after dedup, %d redelivered", total, unique, redelivered)
	if unique != total {
		t.Errorf("%d distinct changes, want %d", unique, total)
	}
	for id, ops := range want {
		if g, w := strings.Join(got[id], " "), strings.Join(ops, " "); g != w {
			t.Errorf("row %d: %s, want %s", id, g, w)
		}
	}
}

// readChanges2 is readChanges for any table, returning up to n changes
// (fewer when the stream has no more within a second).
func readChanges2(t *testing.T, base, table string, from map[string]string, n int) []changestream.Change {
	t.Helper()
	v := url.Values{"table": {table}}
	for node, pos := range from {
		v.Add("from", node+"="+pos)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/changes?"+v.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	var out []changestream.Change
	for len(out) < n {
		select {
		case l, ok := <-lines:
			if !ok {
				return out
			}
			var ch changestream.Change
			if err := json.Unmarshal(l, &ch); err != nil || ch.Node == "" {
				t.Fatalf("line %q: %v", l, err)
			}
			out = append(out, ch)
		case <-time.After(time.Second):
			return out
		}
	}
	return out
}
