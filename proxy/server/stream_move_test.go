package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// TestStreamAcrossReshard: a change stream of a table subscribed across
// its resharding (named with changestream.NamesWith, both rules), while
// two writers insert, update and delete rows through the proxy before,
// during and after the cutover, carries exactly the application's writes:
// as many changes as rows the statements changed, none of the copy's, the
// catch-up's or the reverse stream's writes (flagged with
// skip_replication), and replayed on an empty table they give the final
// table; nor any of the workflow's statements (CREATE TABLE of the new
// subtables, the fence's RENAME), though the streams ask for DDL. A
// second stream with KeepFlagged sees the workflow's writes and statements
// too (what the first leaves out). The workflow's own streams still work: the
// new subtables equal the application's table, and the reverse stream
// brings the old ones to the same rows.
func TestStreamAcrossReshard(t *testing.T) {
	servers := backends(t)
	cfg := newConfig(t, servers...)
	for _, s := range servers[:2] {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS mvcs", "CREATE DATABASE mvcs")
	}
	from := config.ShardRule{DB: "mvcs", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}}
	cfg.Schemas[0].Shard = []config.ShardRule{from}
	cfg.Users = append(cfg.Users, config.User{User: "adm", Password: appPassword})
	cfg.Schemas = append(cfg.Schemas, config.Schema{User: "adm", Nodes: []string{"node1"}, Default: "node1"})
	cfg.AdminUser = "adm"
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: "mvcs_sidecar"}
	p := startProxy(t, cfg)
	app := openDB(t, p.dsn("mvcs", ""))
	adm := openDB(t, userDSN("adm", appPassword, p.addr, "", ""))
	mustExec(t, app, "CREATE TABLE t (id INT PRIMARY KEY, v INT, c VARCHAR(40))")
	sources := changestream.Sources(cfg)
	start := map[string]string{}
	for i, s := range servers[:2] {
		start[sources[i].Node] = queryValue(t, openDB(t, directDSN(s, "", "")), "SELECT @@gtid_binlog_pos")
	}
	var written atomic.Int64 // rows the application's statements changed
	for i := 0; i < 1000; i += 100 {
		var vals []string
		for j := i; j < i+100; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'row %d')", j, j, j))
		}
		mustExec(t, app, "INSERT INTO t VALUES "+strings.Join(vals, ","))
		written.Add(100)
	}

	// The streams, live from before the first row: the new rule is the
	// one the workflow makes (its next generation, 2 + 2 subtables).
	to := config.ShardRule{DB: "mvcs", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}, Generation: 1}
	names := changestream.NamesWith(cfg, from, to)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type stream struct {
		mu      sync.Mutex
		changes []changestream.Change
		marks   map[string]string // each node's position read so far
		errc    <-chan error
	}
	subscribe := func(keep bool) *stream {
		changes, errc, err := changestream.Subscribe(ctx, sources, names,
			changestream.Options{Tables: []string{"mvcs.t"}, From: start, Marks: true, KeepFlagged: keep, DDL: true})
		if err != nil {
			t.Fatal(err)
		}
		s := &stream{marks: map[string]string{}, errc: errc}
		go func() {
			for ch := range changes {
				s.mu.Lock()
				if ch.Op == "mark" {
					s.marks[ch.Node] = ch.Pos
				} else {
					s.changes = append(s.changes, ch)
				}
				s.mu.Unlock()
			}
		}()
		return s
	}
	plain, flagged := subscribe(false), subscribe(true)

	// Two writers through the proxy until told to stop.
	var stop atomic.Bool
	var wg sync.WaitGroup
	werr := make(chan error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 38))
			for n := 0; !stop.Load(); n++ {
				id := rng.IntN(1500)
				var res sql.Result
				var err error
				switch rng.IntN(4) {
				case 0:
					res, err = app.Exec("INSERT IGNORE INTO t VALUES (?, ?, ?)", id, n, fmt.Sprintf("writer %d", w))
				case 1:
					res, err = app.Exec("DELETE FROM t WHERE id = ?", id)
				default:
					res, err = app.Exec("UPDATE t SET v = v + 1, c = ? WHERE id = ?", fmt.Sprintf("writer %d step %d", w, n), id)
				}
				if err == nil {
					var k int64
					k, err = res.RowsAffected()
					written.Add(k)
				}
				if err != nil {
					werr <- err
					return
				}
			}
		}()
	}
	stopWriters := func() {
		stop.Store(true)
		wg.Wait()
		select {
		case err := <-werr:
			t.Fatalf("a writer failed: %v", err)
		default:
		}
	}
	defer stopWriters()

	mustExec(t, adm, "admin reshard(opt,table,nodes,locations) values('start','mvcs.t','node1,node2','2,2')")
	var wf string
	eventually(t, time.Minute, "the workflow to be ready", func() bool {
		rows := queryStrings(t, adm, "show workflow status")
		if len(rows) != 1 {
			return false
		}
		wf = rows[0][0]
		return rows[0][3] == move.PhaseReady && rows[0][8] == "0"
	})
	time.Sleep(300 * time.Millisecond) // writes between verify and cutover
	mustExec(t, adm, "admin workflow(opt,name) values('cutover','"+wf+"')")
	time.Sleep(time.Second) // writes under the new rule, which the reverse stream copies back
	stopWriters()

	// The reverse stream brings the old (fenced) subtables to the rows the
	// proxy answers with.
	sum := func(db *sql.DB, tables ...string) string {
		var parts []string
		for _, tb := range tables {
			parts = append(parts, "SELECT id, v, c FROM "+tb)
		}
		return queryValue(t, db, "SELECT CONCAT(COUNT(*), '/', COALESCE(SUM(CRC32(CONCAT_WS('|', id, v, c))), 0)) FROM ("+strings.Join(parts, " UNION ALL ")+") x")
	}
	final := sum(app, "t")
	node1, node2 := openDB(t, directDSN(servers[0], "mvcs", "")), openDB(t, directDSN(servers[1], "mvcs", ""))
	eventually(t, 30*time.Second, "the old subtables to equal the table", func() bool {
		a, b := sum(node1, move.FencedName("t_0000")), sum(node2, move.FencedName("t_0001"))
		var n1, n2 int
		var c1, c2 int64
		fmt.Sscanf(a, "%d/%d", &n1, &c1)
		fmt.Sscanf(b, "%d/%d", &n2, &c2)
		return fmt.Sprintf("%d/%d", n1+n2, c1+c2) == final
	})

	// Every stream has read both nodes' binary logs up to now.
	end := map[string]string{}
	for i, s := range servers[:2] {
		end[sources[i].Node] = queryValue(t, openDB(t, directDSN(s, "", "")), "SELECT @@gtid_binlog_pos")
	}
	for _, s := range []*stream{plain, flagged} {
		eventually(t, 30*time.Second, "the stream to read up to the end", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			for node, p := range end {
				want, _ := gmysql.ParseMariadbGTIDSet(p)
				got, err := gmysql.ParseMariadbGTIDSet(s.marks[node])
				if err != nil || s.marks[node] == "" || !got.Contain(want) {
					return false
				}
			}
			return true
		})
	}
	cancel()
	for _, s := range []*stream{plain, flagged} {
		if err := <-s.errc; err != nil {
			t.Fatal(err)
		}
	}
	plain.mu.Lock()
	changes := plain.changes
	plain.mu.Unlock()
	flagged.mu.Lock()
	all, ddl := 0, 0
	for _, ch := range flagged.changes {
		if ch.Op == "ddl" {
			ddl++
			t.Logf("the workflow's statement (flagged): %s", ch.Query)
		} else {
			all++
		}
	}
	flagged.mu.Unlock()
	if ddl == 0 {
		t.Errorf("with KeepFlagged the stream has none of the workflow's statements (CREATE TABLE of the new subtables, the fence's RENAME)")
	}

	// Exactly the application's writes, on both sides of the cutover.
	bySub := map[string]int{}
	for _, ch := range changes {
		bySub[ch.Subtable]++
		if ch.Op == "ddl" {
			t.Errorf("a statement of the workflow in the stream: %s", ch.Query)
		}
		if ch.Table != "mvcs.t" {
			t.Fatalf("a change of %s (%s)", ch.Table, ch.Subtable)
		}
	}
	t.Logf("writes %d, changes streamed %d by subtable %v; with KeepFlagged %d", written.Load(), len(changes), bySub, all)
	if int64(len(changes)) != written.Load() {
		t.Errorf("the stream has %d changes of the table for %d rows written: the workflow's writes are in it, or writes are missing", len(changes), written.Load())
	}
	if bySub["mvcs.t_0000"]+bySub["mvcs.t_0001"] == 0 || bySub["mvcs.t_g1_0000"]+bySub["mvcs.t_g1_0001"]+bySub["mvcs.t_g1_0002"]+bySub["mvcs.t_g1_0003"] == 0 {
		t.Errorf("want changes from the old and the new subtables: %v", bySub)
	}
	if all <= len(changes)+1000 {
		t.Errorf("with KeepFlagged the stream has %d changes, without %d: the copy's 1000 rows at least are missing from it", all, len(changes))
	}

	// Replayed on an empty table, they give the final table.
	replay := openDB(t, directDSN(servers[0], "", ""))
	mustExec(t, replay, "DROP DATABASE IF EXISTS mvcs_replay", "CREATE DATABASE mvcs_replay", "CREATE TABLE mvcs_replay.t (id INT PRIMARY KEY, v INT, c VARCHAR(40))")
	for _, ch := range changes {
		switch ch.Op {
		case "insert", "update":
			mustExec(t, replay, fmt.Sprintf("REPLACE INTO mvcs_replay.t VALUES (%d, %d, '%s')", ch.After["id"], ch.After["v"], ch.After["c"]))
		case "delete":
			mustExec(t, replay, fmt.Sprintf("DELETE FROM mvcs_replay.t WHERE id = %d", ch.Before["id"]))
		}
	}
	if got := sum(replay, "mvcs_replay.t"); got != final {
		t.Errorf("the stream replayed gives %s (rows/checksum), the table is %s", got, final)
	}
	mustExec(t, adm, "admin workflow(opt,name) values('complete','"+wf+"')")
}
