package server_test

import (
	"database/sql"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestPreparedNoLeak: thousands of prepare/execute/close cycles on sharded
// and unsharded tables, over connections that come and go, leave the
// backends' prepared statement count bounded by the per-connection cache
// and the proxy's goroutines at their baseline.
func TestPreparedNoLeak(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	srvs := backends(t)
	stmtCount := func() int {
		n := 0
		for _, s := range srvs[:2] {
			d, err := sql.Open("mysql", directDSN(s, "", ""))
			if err != nil {
				t.Fatal(err)
			}
			v := queryStrings(t, d, "SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
			d.Close()
			c, _ := strconv.Atoi(v[0][1])
			n += c
		}
		return n
	}
	before := stmtCount()
	goroutines := runtime.NumGoroutine()
	for round := range 20 {
		db := openDB(t, p.dsn("txn_t", ""))
		db.SetMaxIdleConns(4)
		for i := range 100 {
			// Distinct texts, so the backend caches must evict.
			q := fmt.Sprintf("SELECT balance + %d FROM acct WHERE id = ?", round*100+i)
			st, err := db.Prepare(q)
			if err != nil {
				t.Fatal(err)
			}
			var v int
			if err := st.QueryRow(1 + i%8).Scan(&v); err != nil || v != 100+round*100+i {
				t.Fatalf("%s: %d, %v", q, v, err)
			}
			st.Close()
			if _, err := db.Exec("SELECT COUNT(*) FROM plain WHERE id > ?", i); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	// Each pooled connection (4 per node) keeps at most 256 statements.
	if after := stmtCount(); after-before > 2*4*256 {
		t.Errorf("backend prepared statements grew from %d to %d", before, after)
	}
	eventually(t, 5*time.Second, "goroutines back to the baseline", func() bool {
		return runtime.NumGoroutine() <= goroutines+2
	})
}
