package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestPreparedKillQuery: a running binary prepared statement cancelled the
// way connectors cancel one (KILL QUERY <its connection id> sent on
// another connection: MariaDB Connector/J's Statement.cancel and query
// timeouts) ends with 1317 (70100) as it does directly, and its
// connection stays usable: the same statement executes again, inside and
// outside a transaction, on a sharded row, across shards and on an
// unsharded table. The statement waits for a row lock another session
// holds, so it is running when the KILL arrives.
func TestPreparedKillQuery(t *testing.T) {
	_, db := txnProxy(t, config.TransactionMulti)
	mustExec(t, db, "INSERT INTO plain (id, note) VALUES (1, 'x')")
	cases := []struct {
		name, lock, q string
		arg           int
	}{
		{"sharded point", "UPDATE acct SET balance = balance WHERE id = 2", "SELECT balance AS %s FROM acct WHERE id = ? FOR UPDATE", 2},
		{"cross-shard", "UPDATE acct SET balance = balance WHERE id = 2", "SELECT COUNT(*) AS %s FROM acct WHERE id > ? FOR UPDATE", 1},
		{"unsharded", "UPDATE plain SET note = note WHERE id = 1", "SELECT note AS %s FROM plain WHERE id >= ? FOR UPDATE", 1},
	}
	for i, tc := range cases {
		for _, txn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/txn=%v", tc.name, txn), func(t *testing.T) {
				ctx := context.Background()
				// A name of this case's own marks its statement on the
				// servers.
				tag := fmt.Sprintf("kq%d_%v", i, txn)
				q := fmt.Sprintf(tc.q, tag)
				holder := conn(t, db)
				mustExec(t, holder, "BEGIN", tc.lock)
				victim := conn(t, db)
				if txn {
					mustExec(t, victim, "BEGIN")
				}
				st, err := victim.PrepareContext(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				done := make(chan error, 1)
				go func() {
					rows, err := st.QueryContext(ctx, tc.arg)
					if err == nil {
						for rows.Next() {
						}
						err = rows.Err()
						rows.Close()
					}
					done <- err
				}()
				killer := conn(t, db)
				var id string
				eventually(t, 10*time.Second, "the statement to wait for the lock", func() bool {
					select {
					case err := <-done:
						t.Fatalf("the statement ended before the KILL: %v", err)
					default:
					}
					// The proxy's SHOW PROCESSLIST names its sessions by
					// the ids KILL takes.
					for _, r := range queryStrings(t, killer, "SHOW FULL PROCESSLIST") {
						if r[7] == q && r[4] != "Sleep" {
							id = r[0]
						}
					}
					return id != "" && backendRuns(t, tag) > 0
				})
				if backendThread(t, id) {
					// KILL takes a backend thread id a session holds
					// (CONNECTION_ID() is the backend's) before the
					// proxy's own ids: this one names both.
					mustExec(t, holder, "ROLLBACK")
					<-done
					t.Skipf("session id %s is also a thread id of the proxy's pooled backend connections: KILL QUERY %s is ambiguous", id, id)
				}
				mustExec(t, killer, "KILL QUERY "+id)
				select {
				case err := <-done:
					wantSQLError(t, err, 1317, "70100")
				case <-time.After(10 * time.Second):
					for _, s := range backends(t)[:2] {
						d := openDB(t, directDSN(s, "", ""))
						t.Log(queryStrings(t, d, "SELECT ID, COMMAND, STATE, INFO FROM information_schema.PROCESSLIST WHERE INFO IS NOT NULL"))
					}
					t.Log(id, queryStrings(t, killer, "SHOW FULL PROCESSLIST"))
					t.Fatal("the statement still runs 10 s after KILL QUERY")
				}
				mustExec(t, holder, "ROLLBACK")
				rows, err := st.QueryContext(ctx, tc.arg)
				if err != nil {
					t.Fatalf("the statement again after KILL QUERY: %v", err)
				}
				rows.Close()
				if got := queryValue(t, victim, "SELECT 7"); got != "7" {
					t.Errorf("the connection after KILL QUERY: %s", got)
				}
				if txn {
					mustExec(t, victim, "ROLLBACK")
				}
			})
		}
	}
}

// backendThread reports whether a server has a thread with id.
func backendThread(t *testing.T, id string) bool {
	t.Helper()
	for _, s := range backends(t)[:2] {
		d := openDB(t, directDSN(s, "", ""))
		v := queryValue(t, d, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = "+id)
		d.Close()
		if v != "0" {
			return true
		}
	}
	return false
}

// backendRuns counts the statements the servers run whose text has tag.
func backendRuns(t *testing.T, tag string) int {
	t.Helper()
	n := 0
	for _, s := range backends(t)[:2] {
		d := openDB(t, directDSN(s, "", ""))
		v, _ := strconv.Atoi(queryValue(t, d, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%"+tag+"%' AND ID <> CONNECTION_ID()"))
		d.Close()
		n += v
	}
	return n
}

// TestPreparedContextCancel: go-sql-driver (1.10) ends a prepared
// statement whose context ends by closing its connection (it sends no
// KILL QUERY). The call returns at once with the context's error, as
// directly; the statement waiting on a backend for a row lock is stopped
// there too (the session ends with its client, about a second later), so
// the row lock holder's transaction is not kept waiting on a statement
// nobody reads, and the client's next connection works.
func TestPreparedContextCancel(t *testing.T) {
	_, db := txnProxy(t, config.TransactionMulti)
	for _, txn := range []bool{false, true} {
		t.Run(fmt.Sprintf("txn=%v", txn), func(t *testing.T) {
			tag := fmt.Sprintf("cc_%v", txn)
			holder := conn(t, db)
			mustExec(t, holder, "BEGIN", "UPDATE acct SET balance = balance WHERE id = 2")
			victim := conn(t, db)
			if txn {
				mustExec(t, victim, "BEGIN")
			}
			st, err := victim.PrepareContext(context.Background(), "SELECT balance AS "+tag+" FROM acct WHERE id = ? FOR UPDATE")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				var v int
				done <- st.QueryRowContext(ctx, 2).Scan(&v)
			}()
			eventually(t, 10*time.Second, "the statement to wait for the lock", func() bool { return backendRuns(t, tag) > 0 })
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("cancelled statement: %v, want context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the cancelled statement has not returned after 5 s")
			}
			eventually(t, 10*time.Second, "the backend statement to stop waiting", func() bool { return backendRuns(t, tag) == 0 })
			t.Logf("the backend statement stopped %v after the cancel", time.Since(start).Round(time.Millisecond))
			mustExec(t, holder, "ROLLBACK")
			if got := queryValue(t, db, "SELECT balance FROM acct WHERE id = 2"); got != "100" {
				t.Errorf("a new statement: %s", got)
			}
		})
	}
}
