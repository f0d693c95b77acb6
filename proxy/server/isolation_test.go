package server_test

import (
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// stateQuery reads the session state a client may change; it has no user
// variable, so it does not pin a backend connection by itself.
const stateQuery = "SELECT @@sql_mode, @@character_set_client, @@character_set_results, @@collation_connection, @@time_zone, COALESCE(DATABASE(), 'NULL')"

// TestSessionStateIsolation: one client changes its session state; many
// others interleave on a small pool and must see none of it, while the
// first keeps seeing its own.
func TestSessionStateIsolation(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s)) // max_conns_limit 4
	dbSetup(t, s, "iso_a", "iso_b", "iso_c")
	direct := openDB(t, directDSN(s, "", ""))
	def := queryStrings(t, direct, stateQuery)[0][:5]
	want := func(db string) string { return strings.Join(append(def[:5:5], db), ",") }

	// Client A connects to iso_b (so its backend connection is recorded
	// there) and then changes everything.
	adb := openDB(t, p.dsn("iso_b", ""))
	a := conn(t, adb)
	mustExec(t, a, "SET NAMES latin1", "SET sql_mode = 'ANSI_QUOTES'", "SET time_zone = '+05:00'", "SET @v = 42", "USE iso_a")
	const aWant = "ANSI_QUOTES,latin1,latin1,latin1_swedish_ci,+05:00,iso_a"
	checkA := func() error {
		rows, err := a.QueryContext(t.Context(), stateQuery+", @v")
		if err != nil {
			return err
		}
		got, err := scanStrings(rows)
		if err != nil {
			return err
		}
		if g := joinRows(got); g != aWant+",42" {
			return fmt.Errorf("client A sees %s, want %s,42", g, aWant)
		}
		return nil
	}
	if err := checkA(); err != nil {
		t.Fatal(err)
	}

	// Others: handles per database, 10 goroutines of 50 queries each.
	handles := map[string]*sql.DB{"iso_b": openDB(t, p.dsn("iso_b", "")), "iso_c": openDB(t, p.dsn("iso_c", ""))}
	dbs := []string{"iso_b", "iso_c"}
	runOthers := func(t *testing.T, withA bool) {
		var wg sync.WaitGroup
		for g := range 10 {
			db := dbs[g%len(dbs)]
			h := handles[db]
			wg.Go(func() {
				for i := range 50 {
					rows, err := h.QueryContext(t.Context(), stateQuery)
					if err != nil {
						t.Errorf("goroutine %d query %d: %v", g, i, err)
						return
					}
					got, err := scanStrings(rows)
					if err != nil {
						t.Errorf("goroutine %d query %d: %v", g, i, err)
						return
					}
					if g := joinRows(got); g != want(db) {
						t.Errorf("client of %s sees %s, want %s", db, g, want(db))
						return
					}
				}
			})
		}
		wg.Go(func() {
			for range 50 {
				if !withA {
					return
				}
				if err := checkA(); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Wait()
	}
	t.Run("concurrent", func(t *testing.T) { runOthers(t, true) })

	t.Run("user variables", func(t *testing.T) {
		for i := range 6 {
			db := openDB(t, p.dsn(dbs[i%2], ""))
			if got := queryValue(t, db, "SELECT COALESCE(@v, 'NULL')"); got != "NULL" {
				t.Errorf("new client sees @v = %s", got)
			}
			db.Close()
		}
		if err := checkA(); err != nil {
			t.Fatal(err)
		}
	})

	// A leaves. Its backend connection goes back to the pool (most
	// recently returned, so it is the next one handed out) and must carry
	// none of A's state: not the variables, not the database A switched to
	// with a USE statement.
	t.Run("after A leaves", func(t *testing.T) {
		a.Close()
		adb.Close() // closes the client connection
		p.waitPoolIdle(t, 5*time.Second)
		// Clients that were connected all along (their database was
		// selected at login, on other backend connections).
		for _, db := range dbs {
			if got := joinRows(queryStrings(t, handles[db], stateQuery)); got != want(db) {
				t.Errorf("existing client of %s after A left sees %s, want %s", db, got, want(db))
			}
		}
		// New clients.
		for i := range 4 {
			db := dbs[i%2]
			c := openDB(t, p.dsn(db, ""))
			rows, err := c.QueryContext(t.Context(), stateQuery+", COALESCE(@v, 'NULL')")
			if err != nil {
				t.Fatal(err)
			}
			got, err := scanStrings(rows)
			if err != nil {
				t.Fatal(err)
			}
			if g := joinRows(got); g != want(db)+",NULL" {
				t.Errorf("client %d of %s after A left sees %s, want %s,NULL", i, db, g, want(db))
			}
			c.Close()
			p.waitPoolIdle(t, 5*time.Second)
		}
		runOthers(t, false)
	})

	// The same when the USE hides in a multi-statement text, which the
	// proxy forwards without looking inside.
	t.Run("USE in a multi-statement", func(t *testing.T) {
		mdb := openDB(t, p.dsn("iso_b", "multiStatements=true"))
		m := conn(t, mdb)
		mustExec(t, m, "SET @w = 1; USE iso_a")
		if got := queryValue(t, m, "SELECT DATABASE()"); got != "iso_a" {
			t.Fatalf("after USE in a multi-statement: DATABASE() = %s", got)
		}
		m.Close()
		mdb.Close()
		p.waitPoolIdle(t, 5*time.Second)
		for _, db := range dbs {
			if got := joinRows(queryStrings(t, handles[db], stateQuery)); got != want(db) {
				t.Errorf("existing client of %s sees %s, want %s", db, got, want(db))
			}
		}
	})

	// A client without a database must not inherit the database of
	// whoever used the backend connection before.
	t.Run("no database", func(t *testing.T) {
		p.waitPoolIdle(t, 5*time.Second)
		for _, db := range dbs {
			if got := queryValue(t, handles[db], "SELECT DATABASE()"); got != db {
				t.Fatalf("client of %s: DATABASE() = %s", db, got)
			}
			none := openDB(t, p.dsn("", ""))
			if got := queryValue(t, none, "SELECT COALESCE(DATABASE(), 'NULL')"); got != "NULL" {
				t.Errorf("client without a database, after a client of %s: DATABASE() = %s, want NULL", db, got)
			}
			if _, err := none.Exec("CREATE TABLE leak (x INT)"); err == nil {
				t.Errorf("client without a database created table leak in another client's database")
				none.Exec("DROP TABLE leak")
			} else {
				wantSQLError(t, err, mysql.ErNoDB, "3D000")
			}
			none.Close()
		}
	})

	t.Run("temporary table", func(t *testing.T) {
		tc := conn(t, handles["iso_b"])
		mustExec(t, tc, "CREATE TEMPORARY TABLE tmp_only_mine (x INT)", "INSERT INTO tmp_only_mine VALUES (1)")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 10 {
					_, err := handles["iso_b"].Exec("SELECT * FROM tmp_only_mine")
					if err == nil {
						t.Error("another client sees the temporary table")
						return
					}
				}
			})
		}
		wg.Wait()
		if got := queryValue(t, tc, "SELECT COUNT(*) FROM tmp_only_mine"); got != "1" {
			t.Errorf("the temporary table's owner sees %s rows", got)
		}
		_, err := handles["iso_b"].Exec("SELECT * FROM tmp_only_mine")
		wantSQLError(t, err, 1146, "42S02")
	})
}

// TestAbandonedSessionState: a client that leaves a transaction open, a
// lock held or a temporary table behind and disconnects must leave nothing
// for the next borrower of its backend connection. The pool has one
// connection, so the next client surely gets the same one.
func TestAbandonedSessionState(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.Nodes[0].MaxConnsLimit = 1
	p := startProxy(t, cfg)
	dbSetup(t, s, "abandon")
	direct := openDB(t, directDSN(s, "abandon", ""))
	mustExec(t, direct, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0)")

	check := func(t *testing.T) {
		t.Helper()
		next := openDB(t, p.dsn("abandon", ""))
		if got := joinRows(queryStrings(t, next, "SELECT @@in_transaction, (SELECT COUNT(*) FROM t), (SELECT v FROM t WHERE id = 1)")); got != "0,1,0" {
			t.Errorf("next client sees in_transaction, rows, v = %s, want 0,1,0", got)
		}
		_, err := next.Exec("SELECT * FROM tmp_abandoned")
		wantSQLError(t, err, 1146, "42S02")
		if got := queryValue(t, next, "SELECT COALESCE(IS_USED_LOCK('abandoned_lock'), 'free')"); got != "free" {
			t.Errorf("named lock still held by connection %s", got)
		}
		next.Close()
		// Row locks: another connection can update the row at once.
		lc := conn(t, direct)
		mustExec(t, lc, "SET SESSION innodb_lock_wait_timeout = 1", "UPDATE t SET v = 0 WHERE id = 1")
		lc.Close()
	}
	leave := "BEGIN; INSERT INTO t VALUES (2, 0); UPDATE t SET v = 1 WHERE id = 1; CREATE TEMPORARY TABLE tmp_abandoned (x INT); DO GET_LOCK('abandoned_lock', 0)"

	t.Run("COM_QUIT", func(t *testing.T) {
		db := openDB(t, p.dsn("abandon", "multiStatements=true"))
		c := conn(t, db)
		mustExec(t, c, leave)
		if got := queryValue(t, c, "SELECT @@in_transaction"); got != "1" {
			t.Fatalf("in_transaction = %s", got)
		}
		c.Close()
		db.Close() // sends COM_QUIT
		check(t)
	})

	t.Run("dropped TCP connection", func(t *testing.T) {
		r := dialRaw(t, p.addr)
		r.sendHandshakeResponse(appUser, appPassword, "abandon", rawCaps|mysql.ClientMultiStatements)
		r.expectOK()
		for _, q := range strings.Split(leave, "; ") {
			if _, e := r.query(q); e != nil {
				t.Fatalf("%s: %v", q, e)
			}
		}
		r.nc.Close()
		check(t)
	})
}
