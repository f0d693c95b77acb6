package server_test

import (
	"bufio"
	"context"
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

// readChanges subscribes over HTTP and reads n changes (or fails after
// 20 s).
func readChanges(t *testing.T, base string, from map[string]string, n int) []changestream.Change {
	t.Helper()
	v := url.Values{"table": {"cs.t"}}
	for node, pos := range from {
		v.Add("from", node+"="+pos)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/changes?"+v.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /changes: %s", resp.Status)
	}
	var out []changestream.Change
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for len(out) < n && sc.Scan() {
		var ch changestream.Change
		if err := json.Unmarshal(sc.Bytes(), &ch); err != nil || ch.Node == "" {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, ch)
	}
	if len(out) < n {
		t.Fatalf("%d changes, want %d (%v)", len(out), n, sc.Err())
	}
	return out
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
	cfg := newConfig(t, servers...)
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "cs", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS cs", "CREATE DATABASE cs")
	}
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("cs", ""))
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
	from := map[string]string{}
	for i, s := range servers {
		from[fmt.Sprintf("node%d", i+1)] = queryValue(t, openDB(t, directDSN(s, "", "")), "SELECT @@gtid_binlog_pos")
	}
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
