package server_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// The attack suite: what a hostile client tries against the clients it
// shares backend connections with. The victim is a client already
// connected (as behind an application's pool); pools of one connection
// per node force reuse.

// onePoolConfig is newConfig with one pooled connection per node, and a
// second user, app2, on the same node (sharing the backend account).
func onePoolConfig(t *testing.T) *config.Config {
	cfg := newConfig(t, backends(t)[0])
	cfg.Nodes[0].MaxConnsLimit = 1
	cfg.Users = append(cfg.Users, config.User{User: "app2", Password: appPassword})
	cfg.Schemas = append(cfg.Schemas, config.Schema{User: "app2", Nodes: []string{"node1"}, Default: "node1"})
	return cfg
}

// stmtPacket builds a COM_STMT_* packet for statement id with body after
// the id.
func stmtPacket(cmd byte, id uint32, body ...byte) []byte {
	p := binary.LittleEndian.AppendUint32([]byte{cmd}, id)
	return append(p, body...)
}

// TestAttackStatementIDs: statement ids are the session's own. Another
// client's statements, prepared by the proxy on the pooled connection the
// attacker now holds (ids 1, 2, ... there), can be neither executed, nor
// fed long data, nor reset, nor closed; nor can a cursor be fetched.
func TestAttackStatementIDs(t *testing.T) {
	p := startProxy(t, onePoolConfig(t))
	victim := conn(t, openDB(t, p.dsn("", "")))
	stmt, err := victim.PrepareContext(t.Context(), "SELECT ? + 1")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	var v int
	if err := stmt.QueryRowContext(t.Context(), 41).Scan(&v); err != nil || v != 42 {
		t.Fatalf("victim: %d, %v", v, err)
	}

	a := dialRaw(t, p.addr)
	a.login(rawCaps)
	// BEGIN and a statement pin the only pooled connection, which holds
	// the victim's statement.
	for _, q := range []string{"BEGIN", "SELECT 1"} {
		if _, e := a.query(q); e != nil {
			t.Fatal(e)
		}
	}
	// One INT parameter, value 1: new-params-bound flag, type LONGLONG.
	execBody := []byte{0, 1, 0, 0, 0, 0, 1, mysql.TypeLongLong, 0, 1, 0, 0, 0, 0, 0, 0, 0}
	for id := uint32(0); id <= 8; id++ {
		a.command(stmtPacket(mysql.ComStmtSendLongData, id, 0, 0, 'x'))
		a.command(stmtPacket(mysql.ComStmtExecute, id, execBody...))
		if e := a.expectErr(mysql.ErUnknownStmtHandler); e.State != "HY000" || e.Message != fmt.Sprintf("Unknown prepared statement handler (%d) given to mysqld_stmt_execute", id) {
			t.Errorf("execute %d: %v (%s)", id, e, e.State)
		}
		a.command(stmtPacket(mysql.ComStmtFetch, id, 1, 0, 0, 0))
		a.expectErr(mysql.ErUnknownStmtHandler)
		a.command(stmtPacket(mysql.ComStmtReset, id))
		a.expectErr(mysql.ErUnknownStmtHandler)
		a.command(stmtPacket(mysql.ComStmtClose, id)) // no reply
	}
	if _, e := a.query("COMMIT"); e != nil {
		t.Fatal(e)
	}
	// The victim's statement is intact on the connection the attacker had.
	if err := stmt.QueryRowContext(t.Context(), 1).Scan(&v); err != nil || v != 2 {
		t.Fatalf("victim after the attack: %d, %v", v, err)
	}

	// A statement the backend keeps (one that leaves state, here CALL)
	// gets an id of the proxy's too, and works through it.
	cfg := onePoolConfig(t)
	cfg.Nodes[0].MaxConnsLimit = 2
	p = startProxy(t, cfg)
	victim = conn(t, openDB(t, p.dsn("", "")))
	mustExec(t, victim, "CREATE DATABASE IF NOT EXISTS attack_t",
		"CREATE OR REPLACE PROCEDURE attack_t.p(x INT) SELECT x * 2 AS y")
	kept, err := victim.PrepareContext(t.Context(), "CALL attack_t.p(?)")
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	if err := kept.QueryRowContext(t.Context(), 21).Scan(&v); err != nil || v != 42 {
		t.Fatalf("CALL through a kept statement: %d, %v", v, err)
	}
	r := dialRaw(t, p.addr)
	r.login(rawCaps)
	r.command(append([]byte{mysql.ComStmtPrepare}, "CALL attack_t.p(?)"...))
	ok := r.read()
	if len(ok) < 12 || ok[0] != mysql.OKHeader {
		t.Fatalf("prepare CALL: %s", describe(ok))
	}
	if id := binary.LittleEndian.Uint32(ok[1:5]); id < 1<<31 {
		t.Errorf("kept statement id %d: a backend's id reached the client", id)
	}
}

// runningThread returns the backend thread id running info (read from a
// direct connection to the server), waiting for it to start.
func runningThread(t *testing.T, direct *sql.DB, info string) int64 {
	t.Helper()
	var id int64
	eventually(t, 5*time.Second, "the victim's statement to run", func() bool {
		return direct.QueryRowContext(t.Context(), "SELECT id FROM information_schema.processlist WHERE info = ?", info).Scan(&id) == nil
	})
	return id
}

// TestAttackKillRoutes: KILL takes the proxy's own connection ids, and
// only their owner may use them, by every route a statement can take:
// text, SQL PREPARE from a literal or a user variable, EXECUTE IMMEDIATE,
// and the binary protocol. None reaches the victim's backend thread.
func TestAttackKillRoutes(t *testing.T) {
	s := backends(t)[0]
	cfg := onePoolConfig(t)
	cfg.Nodes[0].MaxConnsLimit = 4
	p := startProxy(t, cfg)
	direct := openDB(t, directDSN(s, "", ""))
	victim := conn(t, openDB(t, userDSN("app2", appPassword, p.addr, "", "")))
	attacker := conn(t, openDB(t, p.dsn("", "")))

	for _, attack := range []struct {
		name  string
		stmts func(tid int64) []string
		code  uint16 // the error the last statement gets
	}{
		{"PREPARE FROM a literal", func(tid int64) []string {
			return []string{fmt.Sprintf("PREPARE k FROM 'KILL QUERY %d'", tid), "EXECUTE k"}
		}, mysql.ErUnknownThread},
		{"PREPARE FROM a variable", func(tid int64) []string {
			return []string{fmt.Sprintf("SET @k = 'KILL QUERY %d'", tid), "PREPARE k FROM @k", "EXECUTE k"}
		}, mysql.ErUnknownThread},
		{"PREPARE FROM a variable set by SELECT", func(tid int64) []string {
			return []string{fmt.Sprintf("SELECT 'KILL QUERY %d' INTO @k2", tid), "PREPARE k FROM @k2", "EXECUTE k"}
		}, mysql.ErUnknownThread},
		{"EXECUTE IMMEDIATE", func(tid int64) []string {
			return []string{fmt.Sprintf("EXECUTE IMMEDIATE 'KILL QUERY %d'", tid)}
		}, mysql.ErUnknownThread},
		{"EXECUTE IMMEDIATE behind a comment", func(tid int64) []string {
			return []string{fmt.Sprintf("EXECUTE/**/IMMEDIATE CONCAT('KILL QUERY ', %d)", tid)}
		}, mysql.ErUnknownThread},
		{"EXECUTE IMMEDIATE of a variable set by SELECT", func(tid int64) []string {
			return []string{fmt.Sprintf("SELECT 'KILL QUERY %d' INTO @k3", tid), "EXECUTE IMMEDIATE @k3"}
		}, mysql.ErUnknownThread},
		{"EXECUTE IMMEDIATE of a stored procedure's CREATE", func(tid int64) []string {
			return []string{"CREATE DATABASE IF NOT EXISTS kill_t",
				fmt.Sprintf("EXECUTE IMMEDIATE CONCAT('CREATE PROCEDURE kill_t.k2() KILL QUERY ', %d)", tid)}
		}, mysql.ErSpecificAccessDenied},
		{"EXECUTE IMMEDIATE in an executable comment", func(tid int64) []string {
			return []string{fmt.Sprintf("EXECUTE /*!IMMEDIATE*/ 'KILL QUERY %d'", tid)}
		}, mysql.ErNotSupported},
		{"PREPARE FROM an expression", func(tid int64) []string {
			return []string{fmt.Sprintf("PREPARE k FROM CONCAT('KILL QUERY ', %d)", tid), "EXECUTE k"}
		}, mysql.ErUnknownThread},
		{"PREPARE FROM an executable comment", func(tid int64) []string {
			return []string{fmt.Sprintf("PREPARE k FROM /*M!CONCAT('KILL QUERY ', %d), */ 'SELECT 1'", tid)}
		}, mysql.ErNotSupported},
		{"EXECUTE IMMEDIATE in a MariaDB comment", func(tid int64) []string {
			return []string{fmt.Sprintf("/*M!EXECUTE IMMEDIATE 'KILL QUERY %d' */", tid)}
		}, mysql.ErUnknownThread}, // the whole text is the comment: the proxy reads what is inside
		{"EXECUTE IMMEDIATE in a versioned comment", func(tid int64) []string {
			return []string{fmt.Sprintf("/*!40101 EXECUTE IMMEDIATE CONCAT('KILL QUERY ', %d) */", tid)}
		}, mysql.ErUnknownThread},

		// Stored programs run with the rights of the backend account,
		// which may kill its own threads: they are not created.
		{"a stored procedure", func(tid int64) []string {
			return []string{"CREATE DATABASE IF NOT EXISTS kill_t", "DROP PROCEDURE IF EXISTS kill_t.k",
				fmt.Sprintf("CREATE PROCEDURE kill_t.k() KILL QUERY %d", tid)}
		}, mysql.ErSpecificAccessDenied},
		{"a stored procedure with dynamic SQL", func(tid int64) []string {
			return []string{"CREATE DATABASE IF NOT EXISTS kill_t",
				fmt.Sprintf("CREATE PROCEDURE kill_t.k() BEGIN SET @q = CONCAT('KI', 'LL QUERY ', %d); PREPARE s FROM @q; EXECUTE s; END", tid)}
		}, mysql.ErSpecificAccessDenied},
		{"a stored function in an executable comment", func(tid int64) []string {
			return []string{"CREATE DATABASE IF NOT EXISTS kill_t",
				fmt.Sprintf("CREATE FUNCTION kill_t.f() RETURNS INT BEGIN /*!KILL QUERY %d; */ RETURN 1; END", tid)}
		}, mysql.ErSpecificAccessDenied},
		{"an event", func(tid int64) []string {
			return []string{"CREATE DATABASE IF NOT EXISTS kill_t",
				fmt.Sprintf("CREATE EVENT kill_t.e ON SCHEDULE AT CURRENT_TIMESTAMP DO KILL QUERY %d", tid)}
		}, mysql.ErSpecificAccessDenied},
	} {
		t.Run(attack.name, func(t *testing.T) {
			info := "SELECT SLEEP(2) /* " + attack.name + " */"
			done := make(chan int, 1)
			go func() {
				var v int
				if err := victim.QueryRowContext(context.Background(), info).Scan(&v); err != nil {
					v = -1
				}
				done <- v
			}()
			tid := runningThread(t, direct, info)
			stmts := attack.stmts(tid)
			for i, q := range stmts {
				_, err := attacker.ExecContext(t.Context(), q)
				if i < len(stmts)-1 {
					if err != nil {
						t.Fatalf("%s: %v", q, err)
					}
					continue
				}
				// The id is read as one of the proxy's connection ids: none,
				// or (by chance) one the attacker does not own.
				if attack.code == mysql.ErUnknownThread && isSQLError(err, mysql.ErKillDenied) {
					continue
				}
				state := "HY000"
				if attack.code == mysql.ErNotSupported || attack.code == mysql.ErSpecificAccessDenied {
					state = "42000"
				}
				wantSQLError(t, err, attack.code, state)
			}
			// SLEEP returns 0 when it runs to its end, 1 when killed.
			if v := <-done; v != 0 {
				t.Errorf("the victim's statement was interrupted (%d)", v)
			}
		})
	}

	direct.Exec("DROP DATABASE IF EXISTS kill_t")

	t.Run("binary protocol", func(t *testing.T) {
		info := "SELECT SLEEP(2) /* binary */"
		done := make(chan int, 1)
		go func() {
			var v int
			if err := victim.QueryRowContext(context.Background(), info).Scan(&v); err != nil {
				v = -1
			}
			done <- v
		}()
		tid := runningThread(t, direct, info)
		r := dialRaw(t, p.addr)
		r.login(rawCaps)
		r.command(append([]byte{mysql.ComStmtPrepare}, "KILL QUERY "+strconv.FormatInt(tid, 10)...))
		ok := r.read()
		if len(ok) < 5 || ok[0] != mysql.OKHeader {
			t.Fatalf("prepare: %s", describe(ok))
		}
		id := binary.LittleEndian.Uint32(ok[1:5])
		r.command(stmtPacket(mysql.ComStmtExecute, id, 0, 1, 0, 0, 0))
		if p := r.read(); len(p) == 0 || p[0] != mysql.ErrHeader || (mysql.ParseErr(p).Code != mysql.ErUnknownThread && mysql.ParseErr(p).Code != mysql.ErKillDenied) {
			t.Errorf("execute KILL: %s, want ERR 1094 or 1095", describe(p))
		}
		if v := <-done; v != 0 {
			t.Errorf("the victim's statement was interrupted (%d)", v)
		}
	})
}

// TestAttackTransactionText: the text of a transaction statement is never
// replayed on a backend: what reaches a connection is composed by the
// proxy, so a second statement or an executable comment hidden in it
// cannot change the pooled connection the next client gets.
func TestAttackTransactionText(t *testing.T) {
	p := startProxy(t, onePoolConfig(t))
	dbSetup(t, backends(t)[0], "attack_t")
	for _, q := range []string{
		"START TRANSACTION ; SET SESSION sql_select_limit=1",
		"BEGIN;SET SESSION sql_select_limit=1",
		"START TRANSACTION /*M!, SESSION sql_select_limit=1 */",
		"BEGIN /*!, @@SESSION.sql_select_limit=1 */",
	} {
		t.Run(q, func(t *testing.T) {
			// The victim is connected first (as behind an application's
			// pool); the attacker has multi-statements off, as
			// go-sql-driver's default. Then a client with multi-statements
			// on leaves the pooled connection with the option on.
			victimDB := openDB(t, p.dsn("attack_t", ""))
			victim := conn(t, victimDB)
			queryValue(t, victim, "SELECT 1")
			attackerDB := openDB(t, p.dsn("attack_t", ""))
			attacker := conn(t, attackerDB)
			multi := conn(t, openDB(t, p.dsn("attack_t", "multiStatements=true")))
			queryValue(t, multi, "SELECT 1")
			multi.Close()
			attacker.ExecContext(t.Context(), q) // a syntax error or a transaction: either is fine
			attacker.ExecContext(t.Context(), "SAVEPOINT a")
			attacker.ExecContext(t.Context(), "SELECT 1")
			attacker.ExecContext(t.Context(), "ROLLBACK")
			attacker.Close()
			attackerDB.Close()
			if got := queryStrings(t, victim, "SELECT seq FROM attack_t.seq_1_to_10"); len(got) != 10 {
				t.Errorf("the next client sees %d rows of 10", len(got))
			}
		})
	}
}

// TestAttackRaces runs what other sessions read (SHOW PROCESSLIST, KILL)
// while a session changes its user and database, and Shutdown while
// clients connect: the race detector must see nothing.
func TestAttackRaces(t *testing.T) {
	p := startProxy(t, onePoolConfig(t))
	changer := dialRaw(t, p.addr)
	changer.login(rawCaps)
	watcher := conn(t, openDB(t, p.dsn("", "")))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if rows, err := watcher.QueryContext(t.Context(), "SHOW PROCESSLIST"); err == nil {
				rows.Close()
			}
			watcher.ExecContext(t.Context(), "KILL QUERY 999999")
		}
	}()
	for i := range 50 {
		db := "mysql"
		if i%2 == 0 {
			db = "information_schema"
		}
		if _, e := changer.query("USE " + db); e != nil {
			t.Fatal(e)
		}
		resp := mysql.AppendChangeUser(nil, &mysql.ChangeUser{User: appUser, AuthResponse: mysql.ScrambleNative(changer.hs.Salt, appPassword),
			Charset: 45, AuthPlugin: mysql.AuthNativePassword}, changer.caps)
		changer.command(resp)
		changer.expectOK()
	}
	close(stop)
	wg.Wait()

	// Shutdown while clients keep connecting.
	q := startProxy(t, newConfig(t, backends(t)[0]))
	var dialers sync.WaitGroup
	for range 4 {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			for range 200 {
				if c, err := net.Dial("tcp", q.addr); err == nil {
					c.Close()
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	dialers.Wait()
}

// isSQLError reports whether err is a MySQL error with code.
func isSQLError(err error, code uint16) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == code
}

// TestAttackStateLeaks: whatever a client changes in its session, by any
// spelling, the next client on the same pooled connection sees a new
// session. The server's own reports decide (session tracking); what it
// does not report is caught from the text.
func TestAttackStateLeaks(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, onePoolConfig(t))
	dbSetup(t, s, "attack_t")
	direct := openDB(t, directDSN(s, "attack_t", ""))
	mustExec(t, direct, "CREATE TABLE IF NOT EXISTS dirty (id INT PRIMARY KEY) ENGINE=InnoDB", "DELETE FROM dirty")

	// client opens one client session; end closes it (and its proxy
	// session: the pool of database/sql keeps nothing open).
	client := func(t *testing.T) (c *sql.Conn, end func()) {
		t.Helper()
		db := openDB(t, p.dsn("attack_t", ""))
		c = conn(t, db)
		return c, func() { c.Close(); db.Close() }
	}
	// What a session sees. The victim is connected before the attack, as
	// behind an application's pool (a new login with a database would
	// reset the connection it takes).
	observe := func(t *testing.T, victim *sql.Conn) string {
		t.Helper()
		rows := len(queryStrings(t, victim, "SELECT seq FROM seq_1_to_10"))
		return fmt.Sprintf("rows=%d %s lock=%s", rows, joinRows(queryStrings(t, victim,
			"SELECT @@sql_mode, @@sql_select_limit, @@time_zone, @@character_set_client, @@sql_log_bin, "+
				"IFNULL(@x, 'unset'), IFNULL(@y, 'unset'), LAST_INSERT_ID()")),
			queryValue(t, direct, "SELECT IFNULL(IS_USED_LOCK('attack_lock'), 'free')"))
	}
	first, endFirst := client(t)
	baseline := observe(t, first)
	endFirst()
	if !strings.HasPrefix(baseline, "rows=10 ") {
		t.Fatalf("baseline: %s", baseline)
	}
	for _, attack := range [][]string{
		{"SET @x=1 /*M!, SESSION sql_select_limit=1 */"},
		{"SET @x=1 /*!, SESSION sql_select_limit=1 */"},
		{"SET @x=1 /*M!100000 , SESSION sql_mode='NO_BACKSLASH_ESCAPES' */"},
		{"SET @x=1 /*M!, SESSION time_zone='+05:00' */"},
		{"SET @x=1 /*M!, SESSION sql_log_bin=0 */"},
		{"SELECT 1 /*M!, @y:=5 */"},
		{"SELECT 1 INTO @y"},
		{"SELECT 1 INTO/**/@y"},
		{"SELECT 1 INTO /*! @y */"},
		{"SELECT 1 INTO\n\t@y"},
		{"SELECT LAST_INSERT_ID(42)"},
		{"SELECT LAST_INSERT_ID /**/ (42)"},
		{"DO LAST_INSERT_ID(42)"},
		{"SET CHARACTER SET gbk"},
		{"SET character_set_client = sjis"},
		{"DO GET_LOCK('attack_lock', 0)"},
		{"SELECT GET_LOCK('attack_lock', 0)"},
		{"SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"},
		{"SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"},
		{"CREATE TEMPORARY TABLE seq_1_to_10 (seq INT)"},
	} {
		t.Run(attack[0], func(t *testing.T) {
			victim, endVictim := client(t)
			defer endVictim()
			queryValue(t, victim, "SELECT 1")
			attacker, end := client(t)
			for _, q := range attack {
				attacker.ExecContext(t.Context(), q) // refused or not: what matters is the next client
			}
			end()
			// The proxy session ends after the client's socket closes.
			eventually(t, 5*time.Second, "the attacker's session to end", func() bool { return p.srv.Stats().Sessions == 1 })
			if got := observe(t, victim); got != baseline {
				t.Errorf("the next client sees\n %s\nwant\n %s", got, baseline)
			}
		})
	}

	// A transaction with an isolation level (go-sql-driver's BeginTx sends
	// SET TRANSACTION ISOLATION LEVEL, then START TRANSACTION) works, and
	// leaves nothing: another client's plain transaction does not read
	// uncommitted rows.
	t.Run("BeginTx with an isolation level", func(t *testing.T) {
		victim, endVictim := client(t)
		defer endVictim()
		queryValue(t, victim, "SELECT 1")
		attacker, end := client(t)
		tx, err := attacker.BeginTx(t.Context(), &sql.TxOptions{Isolation: sql.LevelReadUncommitted})
		if err != nil {
			t.Fatalf("BeginTx: %v", err)
		}
		if got := queryValue(t, tx, "SELECT COUNT(*) FROM dirty"); got != "0" {
			t.Errorf("count %s", got)
		}
		tx.Rollback()
		// A one-shot isolation level the attacker sets and leaves unused.
		mustExec(t, attacker, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
		end()
		eventually(t, 5*time.Second, "the attacker's session to end", func() bool { return p.srv.Stats().Sessions == 1 })

		writer, err := direct.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Close()
		mustExec(t, writer, "BEGIN", "INSERT INTO dirty VALUES (1)") // uncommitted
		defer writer.ExecContext(context.Background(), "ROLLBACK")
		mustExec(t, victim, "BEGIN")
		if got := queryValue(t, victim, "SELECT COUNT(*) FROM dirty"); got != "0" {
			t.Errorf("the next client's transaction reads %s uncommitted rows", got)
		}
		mustExec(t, victim, "ROLLBACK")
	})
}

// TestAttackPolicy: statements that act on the server every client shares
// through the backend account are refused by every route, with 1227; the
// blacklist refuses by fingerprint; deny_statements: [] lets them through.
func TestAttackPolicy(t *testing.T) {
	s := backends(t)[0]
	cfg := onePoolConfig(t)
	cfg.Nodes[0].MaxConnsLimit = 4
	blacklist := t.TempDir() + "/blacklist.sql"
	if err := os.WriteFile(blacklist, []byte("# no full scans\nSELECT * FROM seq_1_to_1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.BlacklistSQLFile = blacklist
	p := startProxy(t, cfg)
	dbSetup(t, s, "attack_t")
	direct := openDB(t, directDSN(s, "", ""))
	before := queryValue(t, direct, "SELECT @@GLOBAL.max_connections")
	db := openDB(t, p.dsn("attack_t", "multiStatements=true"))
	c := conn(t, db)
	for _, q := range []string{
		"SHUTDOWN",
		"/*!SHUTDOWN*/",
		"SET GLOBAL max_connections = 7",
		"SET @@GLOBAL.max_connections = 7",
		"SET @x = 1 /*M!, GLOBAL max_connections = 7 */",
		"SELECT 1; SET GLOBAL max_connections = 7",
		"SET PASSWORD = PASSWORD('x')",
		"ALTER USER CURRENT_USER() IDENTIFIED BY 'x'",
		"GRANT ALL ON *.* TO 'evil'@'%' IDENTIFIED BY 'x'",
		"FLUSH TABLES WITH READ LOCK",
		"SET sql_log_bin = 0",
		"PREPARE s FROM 'SET GLOBAL max_connections = 7'",
		"SELECT * FROM seq_1_to_1000",
		"select *   from seq_1_to_1000 -- again",
	} {
		_, err := c.ExecContext(t.Context(), q)
		wantSQLError(t, err, mysql.ErSpecificAccessDenied, "42000")
	}
	r := dialRaw(t, p.addr)
	r.login(rawCaps)
	r.command(append([]byte{mysql.ComStmtPrepare}, "SET GLOBAL max_connections = 7"...))
	r.expectErr(mysql.ErSpecificAccessDenied)
	if after := queryValue(t, direct, "SELECT @@GLOBAL.max_connections"); after != before {
		t.Errorf("max_connections changed from %s to %s", before, after)
	}
	if got := queryValue(t, c, "SELECT COUNT(*) FROM seq_1_to_1000"); got != "1000" {
		t.Errorf("a statement outside the blacklist: %s", got)
	}

	// deny_statements: [] lets an operator's tools through.
	cfg2 := onePoolConfig(t)
	cfg2.DenyStatements = nil
	q := startProxy(t, cfg2)
	admin := conn(t, openDB(t, q.dsn("", "")))
	mustExec(t, admin, "SET GLOBAL max_connections = "+before)
}

// TestAttackRewriteModes: under sql_mode NO_BACKSLASH_ESCAPES, ANSI_QUOTES
// or PIPES_AS_CONCAT the server reads text differently than in the
// default mode: DELETE FROM acct WHERE balance='\” OR 1=1 -- ' AND id=5
// deletes nothing on one MariaDB, and must not delete every row of every
// subtable through the proxy (it did when the router parsed with the
// default mode and restored the string with the quote doubled). The
// router parses in the session's mode, as the server reports it, and
// each statement must have the same outcome (rows affected, rows seen,
// rows left) as on one MariaDB holding the same rows, whichever route
// set the mode.
func TestAttackRewriteModes(t *testing.T) {
	_, db := txnProxy(t, config.TransactionMulti)
	srv := backends(t)[0]
	ref := openDB(t, directDSN(srv, "", ""))
	mustExec(t, ref, "DROP DATABASE IF EXISTS mode_ref", "CREATE DATABASE mode_ref")
	t.Cleanup(func() { ref.Exec("DROP DATABASE IF EXISTS mode_ref") })
	ref = openDB(t, directDSN(srv, "mode_ref", ""))
	const (
		create = "CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)"
		load   = "INSERT INTO acct (id, balance) VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100)"
	)
	mustExec(t, ref, create, load)
	reload := func(c execer) {
		t.Helper()
		mustExec(t, c, "DELETE FROM acct WHERE id > 0", load)
	}
	for _, tc := range []struct {
		name, set string
		stmts     []string
		prepared  []string // with the values 1, 6, a\
	}{
		{"NO_BACKSLASH_ESCAPES", "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'", []string{
			`DELETE FROM acct WHERE balance='\'' OR 1=1 -- ' AND id=5`,
			`SELECT COUNT(*) FROM acct WHERE id = 5 OR '\' OR 1=1 -- '`,
			`SELECT COUNT(*) FROM acct WHERE id = 5 OR 'a\' = 'a\'`,
			`UPDATE acct SET balance = LENGTH('\'' OR id > 0 -- ') WHERE id = 6`,
			`SELECT balance FROM acct WHERE id = 6`,
			`DELETE FROM acct WHERE id IN (1, 2) AND 'x\' = 'x\'`,
		}, []string{
			`SELECT COUNT(*) FROM acct WHERE id IN (?, ?) OR 'a\' = ?`,
			`SELECT COUNT(*) FROM acct WHERE id IN (?, ?) AND 'a\'' = ?`,
			`UPDATE acct SET balance = 7 WHERE id IN (?, ?) AND 'a\' = ?`,
		}},
		{"ANSI_QUOTES", "SET sql_mode = 'ANSI_QUOTES'", []string{
			`SELECT COUNT(*) FROM acct WHERE "balance" = "balance"`,
			`SELECT "id" FROM acct WHERE "id" = 3`,
			`DELETE FROM acct WHERE "id" = 5`,
			`SELECT COUNT(*) FROM acct WHERE "id" IN (1, 2, 3)`,
		}, []string{
			`SELECT COUNT(*) FROM acct WHERE "id" IN (?, ?) OR "balance" = ?`,
		}},
		{"ANSI", "SET @@session.sql_mode = 'ANSI'", []string{
			`SELECT COUNT(*) FROM acct WHERE id = 5 || id = 6`,
			`SELECT "id" || 'x' FROM acct WHERE "id" = 7`,
			`DELETE FROM acct WHERE "id" = 5 || 1`,
		}, []string{
			`SELECT COUNT(*) FROM acct WHERE id IN (?, ?) || "balance" = ?`,
		}},
		{"PIPES_AS_CONCAT", "SET SESSION sql_mode = 'PIPES_AS_CONCAT'", []string{
			`SELECT COUNT(*) FROM acct WHERE id = 5 || 0`,
			`DELETE FROM acct WHERE id = 1 || 2`,
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := conn(t, db)
			defer s.Close()
			r := conn(t, ref)
			defer r.Close()
			reload(s)
			reload(r)
			if tc.set != "" {
				mustExec(t, s, tc.set)
				mustExec(t, r, tc.set)
			}
			for _, q := range tc.stmts {
				got, want := outcome(t, s, q), outcome(t, r, q)
				if got != want {
					t.Errorf("%s\n proxy: %s\n  one MariaDB: %s", q, got, want)
				}
			}
			// A cross-shard prepared execution: its text is read in the
			// session's mode, its values inlined as hex.
			for _, q := range tc.prepared {
				got, want := outcome(t, s, q, 1, 6, `a\`), outcome(t, r, q, 1, 6, `a\`)
				if got != want {
					t.Errorf("prepared %s\n proxy: %s\n  one MariaDB: %s", q, got, want)
				}
			}
			mustExec(t, s, "SET SESSION sql_mode = DEFAULT")
			mustExec(t, r, "SET SESSION sql_mode = DEFAULT")
			if got, want := queryValue(t, s, "SELECT COUNT(*) FROM acct"), queryValue(t, r, "SELECT COUNT(*) FROM acct"); got != want {
				t.Errorf("%s rows left, one MariaDB %s", got, want)
			}
		})
	}
	// sql_mode=ORACLE is a grammar the proxy's parser does not read:
	// statements on sharded tables are refused, others run.
	s := conn(t, db)
	defer s.Close()
	mustExec(t, s, "SET sql_mode = ORACLE")
	_, err := s.ExecContext(t.Context(), "DELETE FROM acct WHERE id = 5")
	wantSQLError(t, err, mysql.ErNotSupported, "42000")
	if got := queryValue(t, s, "SELECT 'a' || 'b' FROM dual"); got != "ab" {
		t.Errorf("an unsharded statement under ORACLE: %s", got)
	}
	mustExec(t, s, "SET sql_mode = DEFAULT")
}

// outcome runs q and describes what it did: its rows, or the rows it
// affected, or its error code.
func outcome(t *testing.T, c *sql.Conn, q string, args ...any) string {
	t.Helper()
	if strings.HasPrefix(q, "SELECT") {
		rows, err := c.QueryContext(t.Context(), q, args...)
		if err != nil {
			return errCode(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v sql.NullString
			if err := rows.Scan(&v); err != nil {
				return err.Error()
			}
			out = append(out, v.String)
		}
		return "rows " + strings.Join(out, ",")
	}
	res, err := c.ExecContext(t.Context(), q, args...)
	if err != nil {
		return errCode(err)
	}
	n, _ := res.RowsAffected()
	return fmt.Sprintf("%d affected", n)
}

func errCode(err error) string {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("error %d", me.Number)
	}
	return err.Error()
}

// TestAttackCharsetInlining: values bound to a cross-shard prepared
// execution are inlined as hex literals with the client's character set
// (as the server reports it, whatever route changed it) as introducer. A
// multi-byte character set whose second byte can be a backslash (gbk,
// sjis, big5, cp932) is refused on that path with 1235, and
// 0xE4B8AD5C27 followed by " OR 1=1 -- " deletes nothing; in utf8mb4 the
// same bytes are one value.
func TestAttackCharsetInlining(t *testing.T) {
	p, db := txnProxy(t, config.TransactionMulti)
	for _, cs := range []string{"gbk", "sjis", "big5", "cp932"} {
		t.Run(cs, func(t *testing.T) {
			c := conn(t, db)
			defer c.Close()
			for _, q := range []string{"SET CHARACTER SET " + cs, "SET character_set_client = " + cs} {
				mustExec(t, c, q)
				// ids 1 and 6 are on different subtables: the execution is
				// planned as text with the values inlined.
				// The proxy's parser does not read these character sets'
				// literals: the execution is refused, clearly.
				_, err := c.ExecContext(t.Context(), "DELETE FROM acct WHERE id IN (?, ?) AND balance = ?", 1, 6, "\xE4\xB8\xAD\x5C\x27 OR 1=1 -- ")
				wantSQLError(t, err, mysql.ErNotSupported, "42000")
				if got := queryValue(t, c, "SELECT COUNT(*) FROM acct"); got != "8" {
					t.Errorf("%s: %s rows left of 8", q, got)
				}
			}
		})
	}
	c := conn(t, openDB(t, p.dsn("txn_t", "")))
	res, err := c.ExecContext(t.Context(), "DELETE FROM acct WHERE id IN (?, ?) AND balance = ?", 1, 6, "\xE4\xB8\xAD\x5C\x27 OR 1=1 -- ")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 0 {
		t.Errorf("utf8mb4: %d rows deleted, want 0", n)
	}
}

// TestAttackGlobalLocks: with the policy off (deny_statements: []), a
// client may take locks that block every writer of the server: FLUSH
// TABLES WITH READ LOCK, LOCK TABLES, BACKUP STAGE, FLUSH ... FOR EXPORT.
// They last while its session does, as on one MariaDB, and end with it:
// the next client's INSERT on the pooled connection (or on another) must
// not wait. Before the session state was tracked, FLUSH TABLES WITH READ
// LOCK was taken for DDL, the pooled connection kept the global read
// lock, and the next INSERT was still blocked after 6 s.
func TestAttackGlobalLocks(t *testing.T) {
	s := backends(t)[0]
	cfg := onePoolConfig(t) // one pooled connection: the next client gets the attacker's
	cfg.DenyStatements = nil
	p := startProxy(t, cfg)
	dbSetup(t, s, "attack_t")
	direct := openDB(t, directDSN(s, "attack_t", ""))
	mustExec(t, direct, "CREATE TABLE IF NOT EXISTS locked (id INT PRIMARY KEY AUTO_INCREMENT) ENGINE=InnoDB")
	for _, attack := range [][]string{
		{"FLUSH TABLES WITH READ LOCK"},
		{"FLUSH /*!40101 TABLES */ WITH READ LOCK"},
		{"/* x */ FLUSH TABLES WITH READ LOCK"},
		{"FLUSH TABLES locked WITH READ LOCK"},
		{"FLUSH TABLES locked FOR EXPORT"},
		{"LOCK TABLES locked READ"},
		{"LOCK TABLE locked WRITE"},
		{"BACKUP STAGE START", "BACKUP STAGE BLOCK_COMMIT"},
		{"BACKUP LOCK attack_t.locked"},
		{"SET @x = 1; FLUSH TABLES WITH READ LOCK"},
		{"FLUSH TABLES WITH READ LOCK", "UNLOCK TABLES"},
	} {
		t.Run(strings.Join(attack, "; "), func(t *testing.T) {
			// The same client capabilities: the same pool partition.
			const params = "multiStatements=true"
			victim := conn(t, openDB(t, p.dsn("attack_t", params)))
			defer victim.Close()
			queryValue(t, victim, "SELECT 1")
			adb := openDB(t, p.dsn("attack_t", params))
			attacker := conn(t, adb)
			for _, q := range attack {
				if _, err := attacker.ExecContext(t.Context(), q); err != nil {
					t.Logf("%s: %v", q, err)
				}
			}
			attacker.Close()
			adb.Close()
			eventually(t, 5*time.Second, "the attacker's session to end", func() bool { return p.srv.Stats().Sessions == 1 })
			// The victim first: a new login resets the connection it takes.
			for i := range 2 {
				c := victim
				if i == 1 {
					c = conn(t, openDB(t, p.dsn("attack_t", params)))
				}
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				_, err := c.ExecContext(ctx, "INSERT INTO locked VALUES ()")
				cancel()
				if err != nil {
					t.Fatalf("client %d's INSERT: %v", i+1, err)
				}
				if i == 0 {
					// A client of the server itself, beside the proxy.
					d := conn(t, direct)
					mustExec(t, d, "SET SESSION lock_wait_timeout = 2", "INSERT INTO locked VALUES ()")
					d.Close()
				}
			}
			// No session holds any lock on the table: a write lock is
			// granted at once.
			d := conn(t, direct)
			defer d.Close()
			mustExec(t, d, "SET SESSION lock_wait_timeout = 2", "LOCK TABLES locked WRITE", "UNLOCK TABLES")
		})
	}
}

// TestAttackFailedSetLeavesNothing: a SET whose last assignment fails
// (a read-only variable set to DEFAULT) has made the ones before it on
// MariaDB; the session has them, as directly, and the next client on the
// pool does not (found by TestStateFuzz, seed 1795554497617358688).
func TestAttackFailedSetLeavesNothing(t *testing.T) {
	cfg := onePoolConfig(t)
	cfg.Nodes[0].MaxConnsLimit = 2
	p := startProxy(t, cfg)
	a := conn(t, openDB(t, p.dsn("", "")))
	_, err := a.ExecContext(t.Context(), "SET @leak = 1, sql_mode = 'ANSI_QUOTES', @@SESSION.max_allowed_packet = DEFAULT")
	wantSQLError(t, err, 1621, "HY000")
	if got := queryValue(t, a, "SELECT CONCAT(@leak, ',', @@sql_mode)"); got != "1,ANSI_QUOTES" {
		t.Errorf("the session after its failed SET: %s, want 1,ANSI_QUOTES as directly", got)
	}
	for range 3 {
		b := conn(t, openDB(t, userDSN("app2", appPassword, p.addr, "", "")))
		if got := queryValue(t, b, "SELECT CONCAT(IFNULL(@leak, '-'), ',', @@sql_mode = @@GLOBAL.sql_mode)"); got != "-,1" {
			t.Errorf("another client on the pool sees %s, want -,1", got)
		}
		b.Close()
	}
}
