package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// TestMixedTrackerSetCarriesVars: a SET of a session state tracker
// together with user variables and other session variables (the proxy
// answers the tracker part itself, clientTrackers.set) carries those
// variables exactly as a SET without a tracker does: after it, the
// session reads the new values on every node, in a cross-shard
// statement, in one routed to each node, and without a table; none stays
// stale on the node the SET did not run on. Spellings: the tracker first
// and last, SESSION, LOCAL, @@ and @@SESSION., := and =, a carried
// system variable among them, a string value; text, text prepared
// (PREPARE ... EXECUTE USING, with a parameter) and binary prepared
// (without one: a binary SET of a tracker with parameters runs on the
// backend connection, a gap of its own). Every answer is
// compared with one MariaDB holding all the rows.
func TestMixedTrackerSetCarriesVars(t *testing.T) {
	e := newShardEnv(t, "sg_trkmix",
		config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	refDB := "sg_trkmix_ref"
	dbSetup(t, e.servers[0], refDB)
	t.Cleanup(func() {
		if err := dropDirect(e.servers[0], refDB); err != nil {
			t.Error(err)
		}
	})
	ref := openDB(t, directDSN(e.servers[0], refDB, ""))
	for _, db := range []*sql.DB{e.app, ref} {
		mustExec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)", "INSERT INTO t (id) VALUES (1), (2), (3), (4)")
	}
	ctx := context.Background()
	sessions := []*sql.Conn{conn(t, e.app), conn(t, ref)}
	outcome := func(c *sql.Conn, q string) string {
		rows, err := c.QueryContext(ctx, q)
		if err != nil {
			return errCode(err)
		}
		out, err := scanStrings(rows)
		if err != nil {
			return errCode(err)
		}
		return joinRows(out)
	}
	reads := []string{
		"SELECT id, @x, @x + @y, @@max_sort_length FROM t ORDER BY id", // every node
		"SELECT @x, @y, @@max_sort_length",                             // the default node
	}
	for id := 1; id <= 4; id++ { // each node, routed
		reads = append(reads, fmt.Sprintf("SELECT id, @x, @x + @y, @@max_sort_length FROM t WHERE id = %d", id))
	}
	type step struct {
		name string
		run  func(c *sql.Conn, v int) error
	}
	text := func(format string) step {
		return step{"text " + format, func(c *sql.Conn, v int) error {
			_, err := c.ExecContext(ctx, fmt.Sprintf(format, v))
			return err
		}}
	}
	// Binary: prepared on the server (COM_STMT_PREPARE) and executed.
	binary := func(format string) step {
		return step{"binary " + format, func(c *sql.Conn, v int) error {
			ps, err := c.PrepareContext(ctx, fmt.Sprintf(format, v))
			if err != nil {
				return err
			}
			defer ps.Close()
			_, err = ps.ExecContext(ctx)
			return err
		}}
	}
	textPrepared := func(q string) step {
		return step{"PREPARE " + q, func(c *sql.Conn, v int) error {
			for _, s := range []string{"PREPARE mixed FROM '" + q + "'", fmt.Sprintf("SET @v = %d", v), "EXECUTE mixed USING @v"} {
				if _, err := c.ExecContext(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		}}
	}
	steps := []step{
		text("SET @x = %d, session_track_schema = 1"),
		text("SET session_track_state_change = 1, @x := %d"),
		text("SET SESSION session_track_schema = ON, @x = %d"),
		text("SET @x = %d, @@session.session_track_state_change = 0"),
		text("SET @@session_track_schema = 0, @X = %[1]d, max_sort_length = 1000 + %[1]d"),
		text("SET LOCAL session_track_state_change = ON, @x = CONCAT('', %d), SESSION max_sort_length = DEFAULT"),
		text("SET @x = %d, @@SESSION.session_track_system_variables = 'autocommit', @y = @x * 2"),
		text("SET session_track_system_variables = DEFAULT, @x = %d"),
		binary("SET @x = %d, session_track_schema = 1"),
		binary("SET session_track_state_change = 0, @x := %d, max_sort_length = 2000"),
		binary("SET @@SESSION.session_track_state_change = 1, @x = %d, @y = 3"),
		textPrepared("SET @x = ?, session_track_schema = 0"),
		textPrepared("SET SESSION session_track_state_change = 1, @x = ? + 1, @@max_sort_length = 3000"),
	}
	for i, s := range steps {
		v := 10 * (i + 1)
		for j, c := range sessions {
			// The previous values on every node first, so a stale one shows.
			for _, q := range []string{"SET @x = -1, @y = 5", "SELECT COUNT(*) FROM t WHERE id > @x + @y"} {
				if _, err := c.ExecContext(ctx, q); err != nil {
					t.Fatalf("session %d: %s: %v", j, q, err)
				}
			}
			if err := s.run(c, v); err != nil {
				t.Fatalf("session %d: %s with %d: %v", j, s.name, v, err)
			}
		}
		for k, q := range append(reads, "SET @y = 5", reads[0]) {
			if k == len(reads) {
				for _, c := range sessions {
					mustExec(t, c, q)
				}
				continue
			}
			if got, want := outcome(sessions[0], q), outcome(sessions[1], q); got != want {
				t.Errorf("%s with %d: %s: proxy %q, MariaDB %q", s.name, v, q, got, want)
			}
		}
	}
}
