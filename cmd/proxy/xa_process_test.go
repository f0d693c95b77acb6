package main_test

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
)

// xaSetup empties database xaproc on both servers and returns the
// settings of a proxy in transaction_mode xa over them: xaproc.acct
// hash-sharded on id into 4 subtables (ids with id % 4 in {0, 1} on node1,
// {2, 3} on node2), the sidecar on node1, the instance name fixed (a
// restarted proxy takes over what its predecessor left prepared), and
// recovery every 500 ms.
func xaSetup(t *testing.T, name string) ([]*sql.DB, settings) {
	t.Helper()
	srvs := servers(t)
	var direct []*sql.DB
	for _, s := range srvs {
		d, err := sql.Open("mysql", s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		// Branches an earlier failed run left prepared would hold their
		// locks (and DROP DATABASE would wait for them).
		for _, x := range xaPrepared(t, []*sql.DB{d}) {
			data := x[strings.IndexByte(x, ':')+1:]
			gtrid, bqual, _ := strings.Cut(data, "node")
			t.Logf("rolling back a branch an earlier run left prepared: %s", data)
			d.Exec(fmt.Sprintf("XA ROLLBACK '%s','node%s',%d", gtrid, bqual, 0x5347))
		}
		for _, q := range []string{"DROP DATABASE IF EXISTS xaproc", "CREATE DATABASE xaproc"} {
			if _, err := d.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		direct = append(direct, d)
	}
	st := settings{nodes: srvs,
		schema: "    shard:\n      - db: xaproc\n        table: acct\n        key: id\n        type: hash\n        nodes: [node1, node2]\n        locations: [2, 2]\n",
		extra: "transaction_mode: xa\nsidecar:\n  node: node1\n  db: shardgate_sidecar\nxa:\n  instance: " + name +
			"\n  recovery_interval: 500ms\n  lease: 3s\n"}
	return direct, st
}

// xaPrepared lists the shardgate branches XA RECOVER shows on the servers.
func xaPrepared(t *testing.T, direct []*sql.DB) []string {
	t.Helper()
	var out []string
	for i, d := range direct {
		rows, err := d.Query("XA RECOVER")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var format, gl, bl int
			var data string
			if err := rows.Scan(&format, &gl, &bl, &data); err != nil {
				t.Fatal(err)
			}
			if format == 0x5347 {
				out = append(out, fmt.Sprintf("node%d:%s", i+1, data))
			}
		}
		rows.Close()
	}
	return out
}

// directBalance reads one account's balance from its subtable on node.
func directBalance(t *testing.T, d *sql.DB, id int) int {
	t.Helper()
	var v int
	if err := d.QueryRow(fmt.Sprintf("SELECT balance FROM xaproc.acct_%04d WHERE id = %d", id%4, id)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestProcessXAKilled: the proxy process kills itself with SIGKILL at a
// failpoint of a two-phase commit (1 is on node1, 2 on node2):
//   - after every branch is prepared and before the decision: both
//     branches stay prepared; the next proxy (same instance name) rolls
//     both back at start-up, before it serves anyone;
//   - after the decision, just before XA COMMIT goes to node2 (node1's goes
//     at the same time and may have finished): node2's branch stays
//     prepared; the next proxy commits what is left at start-up.
func TestProcessXAKilled(t *testing.T) {
	for _, tc := range []struct {
		failpoint string
		want      [2]int // balances of 1 and 2 after the restart
	}{
		{"xa-before-decision", [2]int{100, 100}},
		{"xa-before-commit:node2", [2]int{90, 110}},
	} {
		t.Run(tc.failpoint, func(t *testing.T) {
			direct, st := xaSetup(t, "killed")
			st.env = []string{"SHARDGATE_FAILPOINT=" + tc.failpoint}
			p := startProxy(t, st)
			db := p.openDB(t, "xaproc")
			// One row per INSERT: an INSERT across nodes is a two-phase
			// commit too, and would meet the failpoint.
			for _, q := range []string{"CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)",
				"INSERT INTO acct VALUES (1, 100)", "INSERT INTO acct VALUES (2, 100)", "INSERT INTO acct VALUES (3, 100)"} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			c, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"BEGIN", "UPDATE acct SET balance = balance - 10 WHERE id = 1", "UPDATE acct SET balance = balance + 10 WHERE id = 2"} {
				if _, err := c.ExecContext(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.ExecContext(context.Background(), "COMMIT"); err == nil {
				t.Fatal("COMMIT answered: the failpoint did not kill the proxy")
			}
			c.Close()
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Fatal("the proxy still runs after its failpoint")
			}
			left := xaPrepared(t, direct)
			if tc.failpoint == "xa-before-decision" && len(left) != 2 {
				t.Fatalf("prepared branches after the kill: %v, want one per node", left)
			}
			if tc.failpoint != "xa-before-decision" {
				// node1's XA COMMIT runs beside node2's: it may have
				// finished before the kill or not; node2's did not.
				if len(left) == 0 || len(left) > 2 || !strings.HasPrefix(left[len(left)-1], "node2:") {
					t.Fatalf("prepared branches after the kill: %v, want node2's (and maybe node1's)", left)
				}
				if got := directBalance(t, direct[1], 2); got != 100 {
					t.Fatalf("node2 after the kill: %d, want 100 (not committed yet)", got)
				}
			}
			st.env = nil
			p2 := startProxy(t, st)
			if left := xaPrepared(t, direct); len(left) != 0 {
				t.Fatalf("prepared branches once the new proxy serves: %v", left)
			}
			got := [2]int{directBalance(t, direct[0], 1), directBalance(t, direct[1], 2)}
			if got != tc.want {
				t.Fatalf("balances of 1 and 2 after the restart: %v, want %v", got, tc.want)
			}
			var sum int
			if err := p2.openDB(t, "xaproc").QueryRow("SELECT SUM(balance) FROM acct").Scan(&sum); err != nil || sum != 300 {
				t.Fatalf("SUM through the new proxy: %d, %v; want 300", sum, err)
			}
		})
	}
}

// TestProcessXABankTransfers: 8 clients move money between 40 accounts on
// both nodes (every transfer a transaction across nodes, or within one)
// while the proxy process is killed with SIGKILL every 1 to 2.5 s and
// started again. When the run ends and recovery has finished, no branch is
// prepared and the sum of the balances is what it was.
func TestProcessXABankTransfers(t *testing.T) {
	direct, st := xaSetup(t, "bank")
	p := startProxy(t, st)
	const accounts, initial = 40, 1000
	{
		db := p.openDB(t, "xaproc")
		if _, err := db.Exec("CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for i := 1; i <= accounts; i++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", i, initial))
		}
		if _, err := db.Exec("INSERT INTO acct VALUES " + strings.Join(vals, ",")); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	current := p
	addr := func() string { mu.Lock(); defer mu.Unlock(); return current.addr }

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var committed, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				transfer(ctx, addr(), &committed, &failed)
			}
		}()
	}
	kills := 0
	var recovered float64 // branches the restarted proxies finished at start-up
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second + rand.N(1500*time.Millisecond)):
			mu.Lock()
			old := current
			mu.Unlock()
			old.cmd.Process.Kill()
			<-old.done
			kills++
			np := startProxy(t, st)
			recovered += np.metric(t, `shardgate_xa_recovered_branches_total{action="commit"}`) +
				np.metric(t, `shardgate_xa_recovered_branches_total{action="rollback"}`)
			mu.Lock()
			current = np
			mu.Unlock()
		}
	}
	wg.Wait()
	t.Logf("%d transfers committed, %d failed, %d proxy kills, %.0f prepared branches finished by recovery", committed.Load(), failed.Load(), kills, recovered)
	if kills < 5 || committed.Load() < 100 || recovered == 0 {
		t.Fatalf("too little happened: %d kills, %d transfers committed, %.0f branches recovered", kills, committed.Load(), recovered)
	}
	// The proxy that runs now recovered at start-up; a last one makes sure
	// nothing the previous left is pending.
	current.cmd.Process.Kill()
	<-current.done
	p = startProxy(t, st)
	if left := xaPrepared(t, direct); len(left) != 0 {
		t.Fatalf("prepared branches after recovery: %v", left)
	}
	sum := 0
	for i, d := range direct {
		for k := 0; k < 2; k++ {
			var s int
			if err := d.QueryRow(fmt.Sprintf("SELECT COALESCE(SUM(balance), 0) FROM xaproc.acct_%04d", 2*i+k)).Scan(&s); err != nil {
				t.Fatal(err)
			}
			sum += s
		}
	}
	if sum != accounts*initial {
		t.Fatalf("sum of balances on the nodes: %d, want %d", sum, accounts*initial)
	}
	var viaProxy int
	if err := p.openDB(t, "xaproc").QueryRow("SELECT SUM(balance) FROM acct").Scan(&viaProxy); err != nil || viaProxy != accounts*initial {
		t.Fatalf("sum through the proxy: %d, %v", viaProxy, err)
	}
}

// transfer moves a random amount between two random accounts in one
// transaction through the proxy at addr, updating the lower id first (so
// transfers never deadlock each other); errors (the proxy killed under it)
// only count.
func transfer(ctx context.Context, addr string, committed, failed *atomic.Int64) {
	db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/xaproc?timeout=2s&readTimeout=10s&writeTimeout=10s", appUser, appPassword, addr))
	if err != nil {
		failed.Add(1)
		return
	}
	defer db.Close()
	for ctx.Err() == nil {
		a, b := 1+rand.IntN(40), 1+rand.IntN(40)
		if a == b {
			continue
		}
		amount := 1 + rand.IntN(50)
		lo, hi, dlo := a, b, -amount
		if b < a {
			lo, hi, dlo = b, a, amount
		}
		err := func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.Exec("UPDATE acct SET balance = balance + ? WHERE id = ?", dlo, lo); err != nil {
				return err
			}
			if _, err := tx.Exec("UPDATE acct SET balance = balance + ? WHERE id = ?", -dlo, hi); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			failed.Add(1)
			time.Sleep(20 * time.Millisecond)
			return // a new handle: the proxy may have moved
		}
		committed.Add(1)
	}
}
