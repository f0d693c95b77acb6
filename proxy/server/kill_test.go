package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/mysql"
)

// TestKillForms: KILL of an expression and KILL QUERY ID answer as
// MariaDB does, by every route a KILL can come (a query, EXECUTE
// IMMEDIATE, PREPARE and EXECUTE, a binary prepared statement): the id
// is evaluated as the server evaluates it (val_int; tables and stored
// functions refused with 1970, a subquery without tables taken), and
// names a proxy session, or for QUERY ID the session running that query.
func TestKillForms(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	direct := conn(t, openDB(t, directDSN(s, "", "")))
	db := openDB(t, p.dsn("", ""))
	c := conn(t, db)
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS kill_forms",
		"CREATE SEQUENCE IF NOT EXISTS kill_forms.s",
		"CREATE OR REPLACE FUNCTION kill_forms.f() RETURNS INT DETERMINISTIC RETURN 7",
	} {
		mustExec(t, direct, q)
	}
	t.Cleanup(func() { direct.ExecContext(context.Background(), "DROP DATABASE kill_forms") })
	mustExec(t, c, "USE kill_forms")
	mustExec(t, direct, "USE kill_forms")
	// Errors that do not depend on the ids in use: the same code and
	// message directly and through the proxy.
	for _, q := range []string{
		"KILL 4000000000+1", "KILL (SELECT 4000000001)", "KILL (('x' IN ( SELECT 1)) MOD 44)",
		"KILL -1", "KILL NULL", "KILL 'abc'", "KILL @no_such_var", "KILL 1.5e30", "kill connection 4e9",
		"KILL ( SELECT 1 ) + LASTVAL(s)", "KILL LASTVAL(s)", "KILL f()", "KILL (SELECT COUNT(*) FROM mysql.user)",
		"KILL nosuch", "KILL QUERY ID nosuch", "kill query id user 'foo'", "KILL HARD QUERY ID 0",
		"KILL SOFT QUERY ID 999999999 + 1", "KILL QUERY ID (SELECT 999999999)",
		"EXECUTE IMMEDIATE 'KILL 4000000000 + 2'", "EXECUTE IMMEDIATE CONCAT('KILL QUERY ID ', 999999999)",
		"KILL CONNECTION ID 5", "KILL 1 'foo'",
	} {
		t.Run(q, func(t *testing.T) {
			_, want := direct.ExecContext(t.Context(), q)
			_, got := c.ExecContext(t.Context(), q)
			if msg(want) != msg(got) {
				t.Errorf("%s: proxy %s, direct %s", q, msg(got), msg(want))
			}
		})
	}
	for _, q := range []string{"KILL 4000000000 + 3", "KILL QUERY ID 999999999 * 2"} {
		mustExec(t, c, "PREPARE k FROM '"+q+"'")
		_, err := c.ExecContext(t.Context(), "EXECUTE k")
		_, want := direct.ExecContext(t.Context(), q)
		if msg(err) != msg(want) {
			t.Errorf("PREPARE ... FROM '%s': %s, want %s", q, msg(err), msg(want))
		}
		ps, err := c.PrepareContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = ps.Exec(); msg(err) != msg(want) {
			t.Errorf("COM_STMT_EXECUTE of %s: %s, want %s", q, msg(err), msg(want))
		}
		ps.Close()
	}

	// The forms that stop a session's statement, or the session.
	kill := func(name, sleep string, stmts func(id int64) []string, query bool) {
		t.Run(name, func(t *testing.T) {
			victim := conn(t, db)
			id, _ := strconv.ParseInt(queryValue(t, victim, "SELECT CONNECTION_ID()"), 10, 64)
			done := make(chan error, 1)
			go func() {
				_, err := victim.ExecContext(context.Background(), sleep)
				done <- err
			}()
			waitBackendQuery(t, openDB(t, directDSN(s, "", "")), sleep)
			killer := conn(t, db)
			mustExec(t, killer, stmts(id)...)
			select {
			case err := <-done:
				if query {
					wantSQLError(t, err, mysql.ErQueryInterrupted, "70100")
				} else if err == nil {
					t.Fatal("the killed connection's statement succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the statement did not end")
			}
			_, err := victim.ExecContext(t.Context(), "SELECT 1")
			if query != (err == nil) {
				t.Errorf("the victim after the KILL: %v", err)
			}
		})
	}
	byQueryID := func(sleep string) string {
		return "SELECT QUERY_ID INTO @q FROM information_schema.PROCESSLIST WHERE INFO = '" + sleep + "'"
	}
	kill("KILL QUERY @v", "SELECT SLEEP(30) /* k1 */", func(id int64) []string {
		return []string{fmt.Sprintf("SET @v = %d", id), "KILL QUERY @v"}
	}, true)
	kill("KILL HARD QUERY (SELECT id)", "SELECT SLEEP(30) /* k2 */", func(id int64) []string {
		return []string{fmt.Sprintf("KILL HARD QUERY (SELECT %d)", id)}
	}, true)
	kill("KILL QUERY ID @q", "SELECT SLEEP(30) /* k3 */", func(int64) []string {
		return []string{byQueryID("SELECT SLEEP(30) /* k3 */"), "KILL QUERY ID @q"}
	}, true)
	kill("EXECUTE IMMEDIATE KILL SOFT QUERY ID", "SELECT SLEEP(30) /* k4 */", func(int64) []string {
		return []string{byQueryID("SELECT SLEEP(30) /* k4 */"), "EXECUTE IMMEDIATE CONCAT('KILL SOFT QUERY ID ', @q)"}
	}, true)
	kill("KILL id+0", "SELECT SLEEP(30) /* k5 */", func(id int64) []string {
		return []string{fmt.Sprintf("KILL %d + 0", id)}
	}, false)
}

// msg is an error as "code message" ("OK" for none), to compare answers.
func msg(err error) string {
	if err == nil {
		return "OK"
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("%d %s", me.Number, me.Message)
	}
	return err.Error()
}

// TestKillIDsApart: the proxy's connection ids (the handshake's, SHOW
// PROCESSLIST's, what a connector's cancel sends) and the backend thread
// ids CONNECTION_ID() returns through the proxy never stand for each
// other. The test arranges what would make them meet: a session holds a
// backend connection whose thread id is the id the proxy gives the next
// client, were the proxy to number its sessions from 1 (it dials the proxy
// until that id is due). Both sessions run a statement; KILL QUERY with
// the victim's handshake id stops the victim's statement and nothing
// else, KILL QUERY with the holder's CONNECTION_ID() stops the holder's,
// SHOW PROCESSLIST lists ids that are no backend thread, and KILL of the
// victim's id ends the victim alone.
func TestKillIDsApart(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	direct := openDB(t, directDSN(s, "", ""))
	holder := dialRaw(t, p.addr)
	holder.login(rawCaps)
	rows, err := holder.query("SELECT CONNECTION_ID()") // the session keeps this connection
	if err != nil {
		t.Fatal(err)
	}
	thread, _ := strconv.ParseUint(rows[0][0], 10, 32)
	killer := dialRaw(t, p.addr)
	killer.login(rawCaps)
	for {
		nc, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		g, err := mysql.NewConn(nc, 0, 0).ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		hs, err := mysql.ParseHandshake(g)
		nc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if uint64(hs.ConnectionID)+1 >= thread {
			break
		}
	}
	victim := dialRaw(t, p.addr)
	victim.login(rawCaps)
	vid := strconv.FormatUint(uint64(victim.hs.ConnectionID), 10)
	t.Logf("victim's connection id %s, holder's backend thread %d", vid, thread)

	const hq, vq = "SELECT SLEEP(10) /* holder */", "SELECT SLEEP(10) /* victim */"
	holder.command(append([]byte{mysql.ComQuery}, hq...))
	victim.command(append([]byte{mysql.ComQuery}, vq...))
	waitBackendQuery(t, direct, hq)
	waitBackendQuery(t, direct, vq)
	// A connector's cancel: KILL QUERY with its handshake's id.
	if _, err := killer.query("KILL QUERY " + vid); err != nil {
		t.Fatalf("KILL QUERY %s: %v", vid, err)
	}
	if resp := victim.response(false); mysql.ParseErr(resp[len(resp)-1]).Code != mysql.ErQueryInterrupted {
		t.Errorf("the victim's statement after KILL QUERY %s: %s, want ERROR 1317", vid, describe(resp[len(resp)-1]))
	}
	if n := queryValue(t, direct, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", hq); n != "1" {
		t.Errorf("KILL QUERY %s (the victim's id) stopped the statement of the session holding thread %d", vid, thread)
	}
	// CONNECTION_ID()'s id names the holder.
	if _, err := killer.query("KILL QUERY " + rows[0][0]); err != nil {
		t.Fatalf("KILL QUERY %d: %v", thread, err)
	}
	if resp := holder.response(false); mysql.ParseErr(resp[len(resp)-1]).Code != mysql.ErQueryInterrupted {
		t.Errorf("the holder's statement after KILL QUERY %d: %s, want ERROR 1317", thread, describe(resp[len(resp)-1]))
	}
	// SHOW PROCESSLIST: the three sessions, by ids no server's thread has.
	list, err := killer.query("SHOW PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r[0])
	}
	want := []string{strconv.FormatUint(uint64(holder.hs.ConnectionID), 10), strconv.FormatUint(uint64(killer.hs.ConnectionID), 10), vid}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("SHOW PROCESSLIST ids %v, want the handshakes' %v", ids, want)
	}
	if n := queryValue(t, direct, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ("+strings.Join(ids, ",")+")"); n != "0" {
		t.Errorf("%s of the ids SHOW PROCESSLIST shows (%v) are backend threads too", n, ids)
	}
	// KILL of the victim's id ends the victim, not the holder.
	if _, err := killer.query("KILL " + vid); err != nil {
		t.Fatalf("KILL %s: %v", vid, err)
	}
	victim.expectClosed()
	if r, err := holder.query("SELECT CONNECTION_ID()"); err != nil || r[0][0] != rows[0][0] {
		t.Errorf("the holder after KILL %s: %v %v, want its connection %d", vid, r, err, thread)
	}
}
