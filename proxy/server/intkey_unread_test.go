package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// TestUnreadKeyStrings: a string compared with the shard key of a table
// whose definition the proxy has not read (created on the backends behind
// its back) may be an INT key's number ('05', ' 5', '5.0', '5e0', '5abc'
// equal 5; ” and 'abc' equal 0) or a string key's string. SELECT, UPDATE
// and DELETE reach every subtable that could hold such a row, as text, as
// binary executions with a string parameter and as EXECUTE ... USING a
// string variable, and give what one MariaDB holding all the rows gives;
// the catalog stays unread throughout. An INSERT whose key is such a string
// reads the definition first and puts the row where lookups by the
// integer find it; an INSERT into a table no node can describe is refused
// with 1235.
func TestUnreadKeyStrings(t *testing.T) {
	e := newShardEnv(t, "sg_unread",
		config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}},
		config.ShardRule{Table: "gone", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	refDB := "sg_unread_ref"
	dbSetup(t, e.servers[0], refDB)
	t.Cleanup(func() {
		if err := dropDirect(e.servers[0], refDB); err != nil {
			t.Error(err)
		}
	})
	ref := openDB(t, directDSN(e.servers[0], refDB, ""))
	const def = "(id INT NOT NULL PRIMARY KEY, c VARCHAR(50) NOT NULL)"
	ids := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	// unread makes t again a table the proxy has not read: dropped through
	// the proxy (which forgets its definition), then created and filled on
	// the backends directly, each row in its subtable (id mod 4).
	unread := func() uint64 {
		t.Helper()
		mustExec(t, e.app, "DROP TABLE IF EXISTS t")
		mustExec(t, ref, "DROP TABLE IF EXISTS t", "CREATE TABLE t "+def)
		for _, s := range hashSubs("t") {
			mustExec(t, e.direct[s.node], "CREATE TABLE "+s.name+" "+def)
		}
		for _, id := range ids {
			s := hashSubs("t")[id%4]
			q := fmt.Sprintf("INSERT INTO %%s (id, c) VALUES (%d, 'a')", id)
			mustExec(t, e.direct[s.node], fmt.Sprintf(q, s.name))
			mustExec(t, ref, fmt.Sprintf(q, "t"))
		}
		return e.p.srv.Stats().CatalogVersion
	}
	outcome := func(db *sql.DB, update bool, q string, args ...any) string {
		if update {
			r, err := db.Exec(q, args...)
			if err != nil {
				return errCode(err)
			}
			n, _ := r.RowsAffected()
			return fmt.Sprint(n, " affected")
		}
		rows, err := db.Query(q, args...)
		if err != nil {
			return errCode(err)
		}
		out, err := scanStrings(rows)
		if err != nil {
			return errCode(err)
		}
		return joinRows(out)
	}
	// viaVariable runs q (with one ?) as PREPARE ... EXECUTE USING @k with
	// @k the string v (set by a text SET), on one connection of db.
	viaVariable := func(db *sql.DB, update bool, q, v string) string {
		ctx := context.Background()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.ExecContext(ctx, "SET @k = "+sqlQuote(v, "'")); err != nil {
			return errCode(err)
		}
		if _, err := c.ExecContext(ctx, "PREPARE s FROM "+sqlQuote(q, "'")); err != nil {
			return errCode(err)
		}
		defer c.ExecContext(ctx, "DEALLOCATE PREPARE s")
		if update {
			r, err := c.ExecContext(ctx, "EXECUTE s USING @k")
			if err != nil {
				return errCode(err)
			}
			n, _ := r.RowsAffected()
			return fmt.Sprint(n, " affected")
		}
		rows, err := c.QueryContext(ctx, "EXECUTE s USING @k")
		if err != nil {
			return errCode(err)
		}
		out, err := scanStrings(rows)
		if err != nil {
			return errCode(err)
		}
		return joinRows(out)
	}
	compare := func(what string, update bool, q string, v string) {
		t.Helper()
		lit := fmt.Sprintf(q, sqlQuote(v, "'"))
		if got, want := outcome(e.app, update, lit), outcome(ref, update, lit); got != want {
			t.Errorf("%s text %s: proxy %q, MariaDB %q", what, lit, got, want)
		}
		bin := fmt.Sprintf(q, "?")
		if got, want := outcome(e.app, update, bin, v), outcome(ref, update, bin, v); got != want {
			t.Errorf("%s binary %s with %q: proxy %q, MariaDB %q", what, bin, v, got, want)
		}
		if got, want := viaVariable(e.app, update, bin, v), viaVariable(ref, update, bin, v); got != want {
			t.Errorf("%s EXECUTE %s USING @k = %q: proxy %q, MariaDB %q", what, bin, v, got, want)
		}
	}
	all := func(what string) {
		t.Helper()
		q := "SELECT id, c FROM t ORDER BY id"
		if got, want := outcome(e.app, false, q), outcome(ref, false, q); got != want {
			t.Fatalf("%s: proxy %q, MariaDB %q", what, got, want)
		}
	}

	version := unread()
	values := []string{"5", "05", " 5", "5 ", "+5", "5.0", "5.", "5e0", "0.5e1", "5.00000000000000000001", "5abc", "5.5", "", "abc", "0x5", "\t-0"}
	for _, v := range values {
		for _, q := range []string{
			"SELECT id, c FROM t WHERE id = %s",
			"SELECT COUNT(*) FROM t WHERE %s = id",
			"SELECT id FROM t WHERE id IN (%s, 2) ORDER BY id",
			"SELECT id FROM t WHERE id = %s OR id = 7 ORDER BY id",
		} {
			compare("select", false, q, v)
		}
		compare("update", true, "UPDATE t SET c = CONCAT(c, 'x') WHERE id = %s", v)
		compare("update", true, "UPDATE t SET c = CONCAT(c, 'y') WHERE id IN (%s, 8)", v)
		all("after updates with " + fmt.Sprintf("%q", v))
		// Each route of DELETE on its own row 5 (and 0).
		for _, q := range []string{"DELETE FROM t WHERE id = %s", "DELETE FROM t WHERE id IN (%s)"} {
			for route := 0; route < 3; route++ {
				for _, id := range []int{0, 5} {
					s := hashSubs("t")[id%4]
					for _, db := range []*sql.DB{e.direct[s.node], ref} {
						name := s.name
						if db == ref {
							name = "t"
						}
						mustExec(t, db, fmt.Sprintf("INSERT IGNORE INTO %s (id, c) VALUES (%d, 'a')", name, id))
					}
				}
				var got, want string
				switch route {
				case 0:
					lit := fmt.Sprintf(q, sqlQuote(v, "'"))
					got, want = outcome(e.app, true, lit), outcome(ref, true, lit)
				case 1:
					got, want = outcome(e.app, true, fmt.Sprintf(q, "?"), v), outcome(ref, true, fmt.Sprintf(q, "?"), v)
				case 2:
					got, want = viaVariable(e.app, true, fmt.Sprintf(q, "?"), v), viaVariable(ref, true, fmt.Sprintf(q, "?"), v)
				}
				if got != want {
					t.Errorf("delete %s with %q (route %d): proxy %q, MariaDB %q", q, v, route, got, want)
				}
				all(fmt.Sprintf("after %s with %q (route %d)", q, v, route))
			}
		}
	}
	if now := e.p.srv.Stats().CatalogVersion; now != version {
		t.Fatalf("the proxy read t's definition during the test (catalog version %d, then %d): the unread case was not tested", version, now)
	}

	// INSERT of a key that is such a string: the definition is read first,
	// and the row goes to the subtable of the integer stored (9: t_0001).
	inserts := []string{"9", "09", " 9", "9 ", "9.0", "9e0", "+9", "8.5", "8.6", "9.4", " 9.4e0", "9abc"}
	for _, v := range inserts {
		for route := 0; route < 3; route++ {
			unread()
			q := "INSERT INTO t (id, c) VALUES (%s, 'i')"
			var got, want string
			switch route {
			case 0:
				got, want = outcome(e.app, true, fmt.Sprintf(q, sqlQuote(v, "'"))), outcome(ref, true, fmt.Sprintf(q, sqlQuote(v, "'")))
			case 1:
				got, want = outcome(e.app, true, fmt.Sprintf(q, "?"), v), outcome(ref, true, fmt.Sprintf(q, "?"), v)
			case 2:
				got, want = viaVariable(e.app, true, fmt.Sprintf(q, "?"), v), viaVariable(ref, true, fmt.Sprintf(q, "?"), v)
			}
			if got != want {
				t.Errorf("insert %q (route %d): proxy %q, MariaDB %q", v, route, got, want)
			}
			if got, want := outcome(e.app, false, "SELECT id, c FROM t WHERE id = 9"), outcome(ref, false, "SELECT id, c FROM t WHERE id = 9"); got != want {
				t.Errorf("after insert %q (route %d): proxy %q, MariaDB %q", v, route, got, want)
			}
			if want != "1 affected" {
				continue
			}
			if got, want := e.layoutWhere("id", "c = 'i'", hashSubs("t")), "t_0000@node1: t_0001@node1:9 t_0002@node2: t_0003@node2:"; got != want {
				t.Errorf("insert %q (route %d): rows at %s, want %s", v, route, got, want)
			}
		}
	}

	// A table no node has: nothing tells the proxy where '8.6' belongs (9
	// in an INT column, by its CRC-32 in a VARCHAR one). (Prepared, the
	// statement fails at its PREPARE with 1146, as directly.)
	if got := outcome(e.app, true, "INSERT INTO gone (id) VALUES ('8.6')"); got != "error 1235" {
		t.Errorf("INSERT of '8.6' into a table no node has: %s, want error 1235", got)
	}
	if got := outcome(e.app, true, "INSERT INTO gone (id) VALUES ('9')"); got != "error 1146" {
		t.Errorf("INSERT of '9' into a table no node has: %s, want error 1146", got)
	}
}
