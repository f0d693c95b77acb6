package session_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
)

// TestReplayFailureKeepsNoConnection: when the session's sticky SETs
// cannot be repeated on a connection to another node (the SET fails
// there), that connection must not serve the session as if they had been:
// the next statement on that node runs where the SET took effect, or is
// refused. Today the connection stays pinned to the session (Release pins
// whatever a sticky session gives it) and the next statement runs on it
// without the SET: here under the default isolation level on n2 while n1
// runs SERIALIZABLE.
func TestReplayFailureKeepsNoConnection(t *testing.T) {
	h := newHarness(t, "")
	h.script([]answer{{node: "n2", prefix: "SET transaction_isolation", reply: fakebackend.Err(mysql.ErLockWaitTimeout, "Lock wait timeout exceeded"), times: 1}})
	h.run([]step{
		on("SET transaction_isolation = 'SERIALIZABLE'", "n1"),
		on("SELECT 1", "n2").fails(mysql.ErLockWaitTimeout),
		on("SELECT 2", "n2"),
	})
	for i, c := range h.fakes["n2"].Conns() {
		log := c.Log()
		at := slices.Index(log, "SELECT 2")
		if at < 0 {
			continue
		}
		sets := 0
		for _, e := range log[:at] {
			if strings.HasPrefix(e, "SET transaction_isolation") {
				sets++
			}
		}
		if i == 0 {
			sets-- // the first one failed
		}
		if sets < 1 {
			t.Errorf("SELECT 2 ran on n2.%d without the session's SET: %q", i+1, log)
		}
	}
}

// TestAutocommitOnLeavesNoOpenTransaction: with autocommit off, a
// transaction reached n1 and n2; SET autocommit = 1 (run on n1, which
// commits there) turns it off for the session, and the client leaves. In
// MariaDB the SET commits the whole transaction. Here n2's part stays
// open: the session still counts n2 in the transaction (HoldsState), but
// ReleaseAll decides whether to reset from the session's flags alone, so
// n2's connection goes back to the pool inside a transaction with the
// client's uncommitted write, and the next client to borrow it works
// inside it (its syncVars' SET autocommit = DEFAULT would commit it; a
// pool that closes it rolls it back).
func TestAutocommitOnLeavesNoOpenTransaction(t *testing.T) {
	h := newHarness(t, "")
	h.script(readAutocommit)
	h.run([]step{
		autocommitOff, on("UPDATE a SET x = 1", "n1"), on("UPDATE b SET x = 1", "n2"),
		autocommitOn, releaseAll(),
	})
	for _, c := range h.conns() {
		if strings.Contains(c, "INSIDE A TRANSACTION") {
			t.Errorf("%s", c)
		}
	}
}

// TestLockTablesCommitsFirst: LOCK TABLES commits the open transaction
// (MariaDB's implicit commit), on every node it reached. The router does
// not mark LOCK TABLES ImplicitCommit, so the session commits nothing: the
// nodes the LOCK reaches commit their part themselves, the others (n3
// here) keep theirs open, and the session still counts the transaction
// open. A ROLLBACK then undoes n3's part while n1's stays committed; in
// transaction_mode xa the LOCK would go into n1's active XA branch, which
// MariaDB refuses.
func TestLockTablesCommitsFirst(t *testing.T) {
	h := newHarness(t, "")
	h.run([]step{
		begin("BEGIN"), on("UPDATE a SET x = 1", "n1"), on("UPDATE c SET x = 1", "n3"),
		on("LOCK TABLES t WRITE", "n1"),
		sessionIs("holds-state locked"),
	})
	want := []string{"n1: COMMIT", "n3: COMMIT"}
	if got := h.ends(); !slices.Equal(got, want) {
		t.Errorf("before LOCK TABLES: %q, want %q", got, want)
	}
}
