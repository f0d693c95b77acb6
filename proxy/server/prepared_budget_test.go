package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// preparedCount is the sum of Prepared_stmt_count over the servers.
func preparedCount(t *testing.T) int {
	t.Helper()
	n := 0
	for _, s := range backends(t)[:2] {
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

// budgetProxy is txnProxy with pools of 64 connections per node.
func budgetProxy(t *testing.T, edit func(*config.Config)) *proxy {
	t.Helper()
	srvs := backends(t)
	cfg := newConfig(t, srvs[0], srvs[1])
	cfg.TransactionMode = config.TransactionMulti
	for i := range cfg.Nodes {
		cfg.Nodes[i].MaxConnsLimit = 64
	}
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "txn_t", Table: "acct", Key: "id", Type: "hash",
		Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}}}
	if edit != nil {
		edit(cfg)
	}
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("", ""))
	mustExec(t, db, "DROP DATABASE IF EXISTS txn_t", "CREATE DATABASE txn_t")
	c := conn(t, db)
	mustExec(t, c, "USE txn_t",
		"CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"CREATE TABLE plain (id INT PRIMARY KEY, note VARCHAR(20))",
		"INSERT INTO acct (id, balance) VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100)",
		"INSERT INTO plain VALUES (1, 'a'), (2, 'b')")
	c.Close()
	t.Cleanup(func() { db.Exec("DROP DATABASE IF EXISTS txn_t") })
	return p
}

// TestPreparedFloodMeasure reproduces issue 32's figures: 64 clients that
// prepare, execute and close 400 distinct statements each inside
// transactions, then what the backends still hold after they left.
func TestPreparedFloodMeasure(t *testing.T) {
	p := budgetProxy(t, nil)
	p.waitPoolIdle(t, 5*time.Second)
	before := preparedCount(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for k := range 64 {
		wg.Go(func() {
			db, err := sql.Open("mysql", p.dsn("txn_t", ""))
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			ctx := context.Background()
			c, err := db.Conn(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
				errs <- err
				return
			}
			for i := range 400 {
				st, err := c.PrepareContext(ctx, fmt.Sprintf("SELECT balance + %d FROM acct WHERE id = ?", k*1000+i))
				if err != nil {
					errs <- err
					return
				}
				var v int
				if err := st.QueryRowContext(ctx, 1+i%8).Scan(&v); err != nil {
					errs <- err
					return
				}
				st.Close()
			}
			if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p.waitPoolIdle(t, 10*time.Second)
	after := preparedCount(t)
	t.Logf("prepared statements on the backends: %d before, %d after 64 clients left", before, after)
}

// TestPreparedHoardMeasure: 7 sessions prepare distinct statements without
// closing them until the proxy refuses (or n each); the proxy's heap and
// the backends' statements while they are open.
func TestPreparedHoardMeasure(t *testing.T) {
	p := budgetProxy(t, nil)
	before := heapInUse()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	codes := map[string]int{}
	var conns []*sql.Conn
	for k := range 7 {
		db := openDB(t, p.dsn("txn_t", ""))
		c := conn(t, db)
		conns = append(conns, c)
		wg.Go(func() {
			for i := range 17000 {
				_, err := c.PrepareContext(context.Background(), fmt.Sprintf("SELECT balance + %d FROM acct WHERE id = ?", k*100000+i))
				if err != nil {
					mu.Lock()
					codes[errCode(err)]++
					mu.Unlock()
					return
				}
				mu.Lock()
				total++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	grew := int64(heapInUse()) - int64(before)
	t.Logf("7 sessions hold %d statements (refusals %v); proxy heap grew %d MiB; backends hold %d", total, codes, grew>>20, preparedCount(t))
	for _, c := range conns {
		c.Close()
	}
}
