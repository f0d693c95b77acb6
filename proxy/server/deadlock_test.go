package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
)

// dlStmt is one statement of a deadlock scenario: in the text protocol,
// or, with args, as a binary prepared statement.
type dlStmt struct {
	q    string
	args []any
}

// dlSession is one transaction of a scenario: first takes its locks (on
// one node), second waits for another's (on another node). amount is
// what its updates add to the balances of ids.
type dlSession struct {
	pre           []dlStmt // run before first, on other nodes
	first, second dlStmt
	ids           []int
	amount        int
}

func (s dlStmt) exec(ctx context.Context, c *sql.Conn) error {
	if strings.HasPrefix(s.q, "SELECT") {
		rows, err := c.QueryContext(ctx, s.q, s.args...)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	}
	_, err := c.ExecContext(ctx, s.q, s.args...)
	return err
}

// runDeadlock runs sessions into a cycle (each takes its first locks,
// then each in turn waits, the next starting once the detector has seen
// the previous one wait) and checks that the proxy breaks it within 1 s:
// 1213 with SQLSTATE 40001 to exactly one client, the others commit. It
// returns the victim's index.
func runDeadlock(t *testing.T, p *proxy, db *sql.DB, sessions []dlSession) int {
	t.Helper()
	ctx := t.Context()
	before, _ := p.srv.DeadlockStats()
	conns := make([]*sql.Conn, len(sessions))
	for i, s := range sessions {
		conns[i] = conn(t, db)
		mustExec(t, conns[i], "BEGIN")
		for _, st := range append(s.pre, s.first) {
			if err := st.exec(ctx, conns[i]); err != nil {
				t.Fatalf("session %d: %s: %v", i, st.q, err)
			}
		}
	}
	type result struct {
		err    error
		commit error
		at     time.Time
	}
	results := make(chan result, len(sessions))
	idx := make(chan int, len(sessions))
	var closed time.Time
	for i, s := range sessions {
		waits, _ := p.srv.DeadlockStats()
		if i == len(sessions)-1 {
			closed = time.Now()
		}
		go func() {
			err := s.second.exec(ctx, conns[i])
			r := result{err: err, at: time.Now()}
			if err == nil {
				_, r.commit = conns[i].ExecContext(ctx, "COMMIT")
			}
			idx <- i
			results <- r
		}()
		if i < len(sessions)-1 {
			eventually(t, 10*time.Second, fmt.Sprintf("session %d to wait past the threshold", i), func() bool {
				st, _ := p.srv.DeadlockStats()
				return st.WaitsSeen > waits.WaitsSeen
			})
		}
	}
	victim := -1
	for range sessions {
		var r result
		var i int
		select {
		case i = <-idx:
			r = <-results
		case <-time.After(20 * time.Second):
			t.Fatal("the cycle was not broken within 20 s")
		}
		if r.err != nil {
			me := wantSQLError(t, r.err, 1213, "40001")
			if victim >= 0 {
				t.Errorf("two victims: sessions %d and %d", victim, i)
			}
			victim = i
			if !strings.HasPrefix(me.Message, "Deadlock found when trying to get lock; try restarting transaction (shardgate: across nodes node") {
				t.Errorf("victim's message: %q", me.Message)
			}
			if took := r.at.Sub(closed); took > time.Second {
				t.Errorf("the cycle was broken %v after it formed, want within 1 s", took)
			}
			t.Logf("victim: session %d after %v: %s", i, r.at.Sub(closed).Round(time.Millisecond), me.Message)
			continue
		}
		if r.commit != nil {
			t.Errorf("session %d: COMMIT: %v", i, r.commit)
		}
	}
	if victim < 0 {
		t.Fatal("no victim")
	}
	after, _ := p.srv.DeadlockStats()
	if after.Broken != before.Broken+1 {
		t.Errorf("deadlocks broken went from %d to %d, want one more", before.Broken, after.Broken)
	}
	// The victim's session goes on: its transaction again, alone now.
	s, c := sessions[victim], conns[victim]
	mustExec(t, c, "BEGIN")
	for _, st := range append(s.pre, s.first, s.second) {
		if err := st.exec(ctx, c); err != nil {
			t.Fatalf("victim's next transaction: %s: %v", st.q, err)
		}
	}
	mustExec(t, c, "COMMIT")
	return victim
}

// checkBalances checks that every id's balance is 100 plus the amounts
// of the sessions (all but skip; -1: all) that updated it, then resets
// them to 100.
func checkBalances(t *testing.T, db *sql.DB, sessions []dlSession, skip int) {
	t.Helper()
	want := map[int]int{}
	for i, s := range sessions {
		for _, id := range s.ids {
			want[id] += 0
			if i != skip {
				want[id] += s.amount
			}
		}
	}
	for id, add := range want {
		if got := queryValue(t, db, "SELECT balance FROM acct WHERE id = ?", id); got != fmt.Sprint(100+add) {
			t.Errorf("id %d: balance %s, want %d", id, got, 100+add)
		}
		mustExec(t, db, fmt.Sprintf("UPDATE acct SET balance = 100 WHERE id = %d", id))
	}
}

// upd is a point update adding amount to id's balance; binary makes it a
// prepared statement.
func upd(id, amount int, binary bool) dlStmt {
	if binary {
		return dlStmt{"UPDATE acct SET balance = balance + ? WHERE id = ?", []any{amount, id}}
	}
	return dlStmt{fmt.Sprintf("UPDATE acct SET balance = balance + %d WHERE id = %d", amount, id), nil}
}

// pair is two sessions updating a and b in opposite orders.
func pair(a, b int, binary bool) []dlSession {
	return []dlSession{
		{first: upd(a, 1, binary), second: upd(b, 1, binary), ids: []int{a, b}, amount: 1},
		{first: upd(b, 10, binary), second: upd(a, 10, binary), ids: []int{a, b}, amount: 10},
	}
}

// TestDeadlockAcrossNodes: cycles of two and three transactions over two
// nodes (transaction_mode multi: ids 1, 4, 5, 8 on node1, 2, 3, 6, 7 on
// node2), of point updates, ranges and inserts into gaps, in both
// protocols, are broken with 1213 to one client within 1 s; the victim's
// writes are gone from every node, the others commit, the victim's next
// transaction works; a long wait that is no deadlock is left alone.
func TestDeadlockAcrossNodes(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("point binary=%v", binary), func(t *testing.T) {
			s := pair(1, 2, binary)
			v := runDeadlock(t, p, db, s)
			checkBalances(t, db, s, -1) // the victim's retry added its amounts
			_ = v
		})
	}
	t.Run("victim left nothing", func(t *testing.T) {
		s := pair(4, 3, false)
		ctx := t.Context()
		// As runDeadlock, but the balances are read before the retry.
		before, _ := p.srv.DeadlockStats()
		a, b := conn(t, db), conn(t, db)
		mustExec(t, a, "BEGIN", s[0].first.q)
		mustExec(t, b, "BEGIN", s[1].first.q)
		errs := make(chan error, 2)
		go func() { errs <- s[0].second.exec(ctx, a) }()
		eventually(t, 10*time.Second, "the first session to wait", func() bool {
			st, _ := p.srv.DeadlockStats()
			return st.WaitsSeen > before.WaitsSeen
		})
		go func() { errs <- s[1].second.exec(ctx, b) }()
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) {
			t.Fatalf("want one error: %v, %v", e1, e2)
		}
		mustExec(t, a, "COMMIT")
		mustExec(t, b, "COMMIT")
		// Who lost: the winner's amount is on both rows, nothing else.
		got := queryValue(t, db, "SELECT balance FROM acct WHERE id = 4")
		if got != "101" && got != "110" {
			t.Fatalf("id 4: %s, want 101 or 110", got)
		}
		if other := queryValue(t, db, "SELECT balance FROM acct WHERE id = 3"); other != got {
			t.Errorf("id 3: %s, id 4: %s: the victim left a write", other, got)
		}
		mustExec(t, db, "UPDATE acct SET balance = 100 WHERE id IN (3, 4)")
	})
	t.Run("ranges", func(t *testing.T) {
		s := []dlSession{
			{first: dlStmt{"UPDATE acct SET balance = balance + 1 WHERE id IN (1, 5)", nil},
				second: dlStmt{"SELECT balance FROM acct WHERE id IN (2, 6) FOR UPDATE", nil}, ids: []int{1, 5}, amount: 1},
			{first: dlStmt{"UPDATE acct SET balance = balance + 10 WHERE id IN (2, 6)", nil},
				second: dlStmt{"SELECT balance FROM acct WHERE id IN (1, 5) FOR UPDATE", nil}, ids: []int{2, 6}, amount: 10},
		}
		runDeadlock(t, p, db, s)
		checkBalances(t, db, s, -1)
	})
	t.Run("inserts into gaps", func(t *testing.T) {
		for _, binary := range []bool{false, true} {
			ins := func(id, v int) dlStmt {
				if binary {
					return dlStmt{"INSERT INTO acct (id, balance) VALUES (?, ?)", []any{id, v}}
				}
				return dlStmt{fmt.Sprintf("INSERT INTO acct (id, balance) VALUES (%d, %d)", id, v), nil}
			}
			// 101 goes to acct_0001 (node1), 102 to acct_0002 (node2):
			// each session's locking read of a missing id locks the gap
			// the other's insert needs.
			s := []dlSession{
				{first: dlStmt{"SELECT id FROM acct WHERE id = 101 FOR UPDATE", nil}, second: ins(102, 1)},
				{first: dlStmt{"SELECT id FROM acct WHERE id = 102 FOR UPDATE", nil}, second: ins(101, 10)},
			}
			v := runDeadlock(t, p, db, s)
			want := "101,10|102,1"
			if got := joinRows(queryStrings(t, db, "SELECT id, balance FROM acct WHERE id > 100 ORDER BY id")); got != want {
				t.Errorf("binary=%v victim %d: rows %s, want %s", binary, v, got, want)
			}
			mustExec(t, db, "DELETE FROM acct WHERE id > 100")
		}
	})
	t.Run("three sessions", func(t *testing.T) {
		// 1 waits for 2 on node2, 2 for 3 on node1, 3 for 1 on node1.
		s := []dlSession{
			{first: upd(1, 1, false), second: upd(2, 1, false), ids: []int{1, 2}, amount: 1},
			{first: upd(2, 10, true), second: upd(5, 10, true), ids: []int{2, 5}, amount: 10},
			{first: upd(5, 100, false), second: upd(1, 100, false), ids: []int{5, 1}, amount: 100},
		}
		runDeadlock(t, p, db, s)
		checkBalances(t, db, s, -1)
	})
	t.Run("a long wait is no deadlock", func(t *testing.T) {
		before, _ := p.srv.DeadlockStats()
		a, b := conn(t, db), conn(t, db)
		mustExec(t, a, "BEGIN", "UPDATE acct SET balance = balance + 1 WHERE id = 1", "UPDATE acct SET balance = balance + 1 WHERE id = 2")
		mustExec(t, b, "BEGIN", "UPDATE acct SET balance = balance + 10 WHERE id = 5")
		done := make(chan error, 1)
		go func() {
			_, err := b.ExecContext(t.Context(), "UPDATE acct SET balance = balance + 10 WHERE id = 2")
			done <- err
		}()
		// The detector looks several times while b waits.
		eventually(t, 20*time.Second, "the detector to look five times", func() bool {
			st, _ := p.srv.DeadlockStats()
			return st.Graphs >= before.Graphs+5
		})
		mustExec(t, a, "COMMIT")
		if err := <-done; err != nil {
			t.Fatalf("the waiting update failed: %v", err)
		}
		mustExec(t, b, "COMMIT")
		after, _ := p.srv.DeadlockStats()
		if after.Broken != before.Broken {
			t.Errorf("a deadlock was broken where there was none")
		}
		checkBalances(t, db, []dlSession{{ids: []int{1, 2}, amount: 1}, {ids: []int{5, 2}, amount: 10}}, -1)
	})
}

// TestDeadlockAcrossNodesXA: the same in transaction_mode xa over three
// nodes (ids 3, 6, 9 on node1; 1, 4, 7 on node2; 2, 5, 8 on node3),
// including a cycle of three transactions over three nodes; the victim's
// XA branches are rolled back (none left prepared).
func TestDeadlockAcrossNodesXA(t *testing.T) {
	_, p, db, direct := xaCluster(t)
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("point binary=%v", binary), func(t *testing.T) {
			s := pair(3, 1, binary)
			runDeadlock(t, p, db, s)
			checkBalances(t, db, s, -1)
		})
	}
	t.Run("three sessions on three nodes", func(t *testing.T) {
		s := []dlSession{
			{first: upd(3, 1, false), second: upd(1, 1, false), ids: []int{3, 1}, amount: 1},
			{first: upd(1, 10, true), second: upd(2, 10, true), ids: []int{1, 2}, amount: 10},
			{first: upd(2, 100, false), second: upd(3, 100, false), ids: []int{2, 3}, amount: 100},
		}
		runDeadlock(t, p, db, s)
		checkBalances(t, db, s, -1)
	})
	if got := prepared(t, direct); got != "" {
		t.Errorf("branches left prepared: %s", got)
	}
}

// TestDeadlockThreeNodesMulti: in transaction_mode multi over three nodes
// of the test's own (dl_t.acct with one subtable per node: ids 3, 6 on
// node1; 1, 4 on node2; 2, 5 on node3), a cycle of three transactions
// over the three nodes, and one of two transactions over two of them
// while a third node holds the rest of their transactions, are broken.
func TestDeadlockThreeNodesMulti(t *testing.T) {
	backends(t) // skips under -short
	c, err := mariadbtest.Start("", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	cfg := newConfig(t, c.Servers...)
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "dl_t", Table: "acct", Key: "id", Type: "hash",
		Nodes: []string{"node1", "node2", "node3"}, Locations: []int{1, 1, 1}}}
	for _, s := range c.Servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "CREATE DATABASE dl_t")
	}
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("dl_t", ""))
	mustExec(t, db, "CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"INSERT INTO acct VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100)")
	t.Run("three sessions on three nodes", func(t *testing.T) {
		s := []dlSession{
			{first: upd(3, 1, false), second: upd(1, 1, false), ids: []int{3, 1}, amount: 1},
			{first: upd(1, 10, true), second: upd(2, 10, true), ids: []int{1, 2}, amount: 10},
			{first: upd(2, 100, false), second: upd(3, 100, false), ids: []int{2, 3}, amount: 100},
		}
		runDeadlock(t, p, db, s)
		checkBalances(t, db, s, -1)
	})
	t.Run("two sessions, a third node held", func(t *testing.T) {
		// The cycle is on node2 and node3; each transaction also holds a
		// row on node1 (6 and 3), which the victim's rollback releases.
		s := []dlSession{
			{pre: []dlStmt{upd(6, 1, false)}, first: upd(1, 1, false), second: upd(2, 1, false), ids: []int{6, 1, 2}, amount: 1},
			{pre: []dlStmt{upd(3, 10, true)}, first: upd(2, 10, true), second: upd(1, 10, true), ids: []int{3, 2, 1}, amount: 10},
		}
		runDeadlock(t, p, db, s)
		checkBalances(t, db, s, -1)
	})
}
