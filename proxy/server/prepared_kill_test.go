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
		{"sharded point", "UPDATE acct SET balance = balance WHERE id = 2", "SELECT balance FROM acct WHERE id = ? FOR UPDATE", 2},
		{"cross-shard", "UPDATE acct SET balance = balance WHERE id = 2", "SELECT COUNT(*) FROM acct WHERE id > ? FOR UPDATE", 1},
		{"unsharded", "UPDATE plain SET note = note WHERE id = 1", "SELECT note FROM plain WHERE id >= ? FOR UPDATE", 1},
	}
	for _, tc := range cases {
		for _, txn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/txn=%v", tc.name, txn), func(t *testing.T) {
				ctx := context.Background()
				holder := conn(t, db)
				mustExec(t, holder, "BEGIN", tc.lock)
				victim := conn(t, db)
				if txn {
					mustExec(t, victim, "BEGIN")
				}
				st, err := victim.PrepareContext(ctx, tc.q)
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
						if r[7] == tc.q && r[4] != "Sleep" {
							id = r[0]
						}
					}
					return id != "" && lockWaits(t) > 0
				})
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

// lockWaits counts the statements that wait for a row lock on the servers.
func lockWaits(t *testing.T) int {
	t.Helper()
	n := 0
	for _, s := range backends(t)[:2] {
		d := openDB(t, directDSN(s, "", ""))
		v, _ := strconv.Atoi(queryValue(t, d, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"))
		d.Close()
		n += v
	}
	return n
}

// TestPreparedContextCancel: go-sql-driver (1.10) ends a prepared
// statement whose context ends by closing its connection (it sends no
// KILL QUERY). The call returns at once with the context's error, as
// directly; the statement waiting on a backend for a row lock is stopped
// there too (the session ends with its client), so the row lock holder's
// transaction is not kept waiting on a statement nobody reads, the
// backend connection goes back to the pool, and the client's next
// connection works.
func TestPreparedContextCancel(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	for _, txn := range []bool{false, true} {
		t.Run(fmt.Sprintf("txn=%v", txn), func(t *testing.T) {
			holder := conn(t, db)
			mustExec(t, holder, "BEGIN", "UPDATE acct SET balance = balance WHERE id = 2")
			victim := conn(t, db)
			if txn {
				mustExec(t, victim, "BEGIN")
			}
			st, err := victim.PrepareContext(context.Background(), "SELECT balance FROM acct WHERE id = ? FOR UPDATE")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				var v int
				done <- st.QueryRowContext(ctx, 2).Scan(&v)
			}()
			eventually(t, 10*time.Second, "the statement to wait for the lock", func() bool { return lockWaits(t) > 0 })
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
			eventually(t, 10*time.Second, "the backend statement to stop waiting", func() bool { return lockWaits(t) == 0 })
			t.Logf("the backend statement stopped %v after the cancel", time.Since(start).Round(time.Millisecond))
			mustExec(t, holder, "ROLLBACK")
			p.waitPoolIdle(t, 10*time.Second)
			if got := queryValue(t, db, "SELECT balance FROM acct WHERE id = 2"); got != "100" {
				t.Errorf("a new statement: %s", got)
			}
		})
	}
}
