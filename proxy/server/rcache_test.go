package server_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// newCacheEnv is a proxy over two nodes with t (id INT PRIMARY KEY, u INT
// UNIQUE, c VARCHAR) hash-sharded on id over 4 subtables and cached, and
// rows 1..n.
func newCacheEnv(t *testing.T, db string, n int, edit func(*config.Cache)) *shardEnv {
	t.Helper()
	e := newShardEnvWith(t, db, func(cfg *config.Config) {
		cfg.Cache = &config.Cache{Tables: []string{db + ".t"}, Memory: 8 << 20, MaxEntry: 64 << 10, MaxStaleness: time.Second, MaxWaiters: 64}
		if edit != nil {
			edit(cfg.Cache)
		}
	}, config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, u INT UNIQUE, c VARCHAR(40) NOT NULL)")
	for i := 1; i <= n; i++ {
		if _, err := e.app.Exec("INSERT INTO t VALUES (?, ?, ?)", i, 100+i, "v"+itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func itoa(i int) string { return fmtInt(int64(i)) }

func fmtInt(v int64) string {
	if v == 0 {
		return "0"
	}
	neg := v < 0
	if neg {
		v = -v
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// TestResultCacheBasics: a point select is served from the cache the
// second time, a write through the proxy is read back by its writer at
// once, a write behind the proxy's back drops the answer within the
// staleness bound, and statements that may not be cached are not.
func TestResultCacheBasics(t *testing.T) {
	e := newCacheEnv(t, "rc_basic", 8, nil)
	stats := func() (hits, fills uint64) {
		st := e.p.srv.Stats().Cache
		return st.Hits, st.Fills
	}
	c := conn(t, e.app)
	const q = "SELECT id, u, c FROM t WHERE id = 3"
	defer func() { t.Logf("cache stats %+v", *e.p.srv.Stats().Cache) }()
	// The session wrote the rows: its reads come from the node until the
	// cache has applied its writes, then from the cache.
	eventually(t, 10*time.Second, "the cache to serve the session", func() bool {
		queryStrings(t, c, q)
		h0, _ := stats()
		if got := joinRows(queryStrings(t, c, q)); got != "3,103,v3" {
			t.Fatalf("cached answer %s", got)
		}
		h1, _ := stats()
		return h1 == h0+1
	})
	// The writer reads its own write, at once.
	mustExec(t, c, "UPDATE t SET c = 'w1' WHERE id = 3")
	if got := joinRows(queryStrings(t, c, q)); got != "3,103,w1" {
		t.Fatalf("after the session's own UPDATE: %s", got)
	}
	// The writer's session still uses the cache (a fill's NOWAIT and the
	// UPDATE after it on the same connection leave it nothing to keep).
	eventually(t, 5*time.Second, "the writer's session to be served again", func() bool {
		h, _ := stats()
		if got := joinRows(queryStrings(t, c, q)); got != "3,103,w1" {
			t.Fatalf("the writer's read: %s", got)
		}
		h2, _ := stats()
		return h2 == h+1
	})
	// Another session's write behind the proxy's back: gone within the bound.
	for _, d := range e.direct {
		if _, err := d.Exec("UPDATE t_0003 SET c = 'd1' WHERE id = 3"); err != nil {
			t.Log(err) // the subtable is on one node only
		}
	}
	other := conn(t, e.app)
	eventually(t, 2*time.Second, "the direct write to be seen", func() bool {
		return joinRows(queryStrings(t, other, q)) == "3,103,d1"
	})
	h2, _ := stats()
	queryStrings(t, other, q)
	queryStrings(t, other, q)
	if h3, _ := stats(); h3 == h2 {
		t.Errorf("after the direct write: hits %d -> %d: the new row was not kept and served", h2, h3)
	}
	// A lookup on a unique key that is not the shard key and a one-value
	// range give MariaDB's answers (the first reads every subtable and is
	// never kept); then what is never cached is not.
	for _, tc := range []struct{ q, want string }{
		{"SELECT id, c FROM t WHERE u = 105", "5,v5"},
		{"SELECT COUNT(*) FROM t WHERE id BETWEEN 2 AND 2", "1"},
	} {
		queryStrings(t, c, tc.q)
		if got := joinRows(queryStrings(t, c, tc.q)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.q, got, tc.want)
		}
	}
	_, f0 := stats()
	for _, q := range []string{"SELECT id, NOW() > 0 FROM t WHERE id = 4", "SELECT id FROM t WHERE id = 4 FOR UPDATE", "SELECT id FROM t WHERE c = 'v4'"} {
		queryStrings(t, c, q)
		queryStrings(t, c, q)
	}
	if _, f1 := stats(); f1 != f0 {
		t.Errorf("fills %d -> %d: a statement that may not be cached was", f0, f1)
	}
	// DDL drops the table's answers.
	queryStrings(t, c, q)
	mustExec(t, e.app, "ALTER TABLE t ADD COLUMN z INT NOT NULL DEFAULT 7")
	eventually(t, 2*time.Second, "the ALTER to drop the answer", func() bool {
		var id, u, z int
		var s string
		err := c.QueryRowContext(t.Context(), "SELECT * FROM t WHERE id = 3").Scan(&id, &u, &s, &z)
		return err == nil && z == 7
	})
	var _ *sql.DB
}

// TestResultCachePrepared: binary executions are kept and served apart
// from text statements, keyed by their values.
func TestResultCachePrepared(t *testing.T) {
	e := newCacheEnv(t, "rc_prep", 8, nil)
	c := conn(t, e.app)
	const q = "SELECT id, u, c FROM t WHERE id = ?"
	eventually(t, 10*time.Second, "a fill", func() bool {
		queryStrings(t, c, q, 5)
		return e.p.srv.Stats().Cache.Fills > 0
	})
	// Each value is its own entry: a read after its fill is a hit (once
	// the reader has applied the rows' inserts, which refuse fills taken
	// before them).
	for i := 1; i <= 8; i++ {
		want := itoa(i) + "," + itoa(100+i) + ",v" + itoa(i)
		eventually(t, 5*time.Second, "a hit of id "+itoa(i), func() bool {
			if got := joinRows(queryStrings(t, c, q, i)); got != want {
				t.Fatalf("id %d: %s, want %s", i, got, want)
			}
			h0 := e.p.srv.Stats().Cache.Hits
			got := joinRows(queryStrings(t, c, q, i))
			if got != want {
				t.Fatalf("id %d, again: %s, want %s", i, got, want)
			}
			return e.p.srv.Stats().Cache.Hits == h0+1
		})
	}
	// The text statement with the same value is its own entry (text rows).
	if got := joinRows(queryStrings(t, c, "SELECT id, u, c FROM t WHERE id = 5")); got != "5,105,v5" {
		t.Errorf("text after binary: %s", got)
	}
	mustExec(t, c, "UPDATE t SET c = 'p5' WHERE id = 5")
	if got := joinRows(queryStrings(t, c, q, 5)); got != "5,105,p5" {
		t.Errorf("after the session's own UPDATE: %s", got)
	}
}

// TestResultCacheStatementFormat: a write another client logs as a
// statement (binlog_format=STATEMENT), whose rows the binary log does not
// list, drops the answers all the same.
func TestResultCacheStatementFormat(t *testing.T) {
	e := newCacheEnv(t, "rc_stmt", 8, nil)
	c := conn(t, e.app)
	const q = "SELECT c FROM t WHERE id = 3"
	eventually(t, 10*time.Second, "a hit", func() bool {
		queryStrings(t, c, q)
		h := e.p.srv.Stats().Cache.Hits
		queryStrings(t, c, q)
		return e.p.srv.Stats().Cache.Hits == h+1
	})
	for _, d := range e.direct {
		dc := conn(t, d)
		mustExec(t, dc, "SET SESSION binlog_format = 'STATEMENT'")
		if _, err := dc.ExecContext(t.Context(), "UPDATE t_0003 SET c = 's1' WHERE id = 3"); err != nil {
			continue // the subtable lives on the other node
		}
	}
	other := conn(t, e.app)
	eventually(t, 2*time.Second, "the statement-logged write to be seen", func() bool {
		return joinRows(queryStrings(t, other, q)) == "s1"
	})
}
