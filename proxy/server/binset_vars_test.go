package server_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// TestBinarySetVarReadEverywhere: a user variable assigned by a binary
// prepared SET @k = ? (go-sql-driver's server-side prepare on one client
// connection) holds the value just bound, and no earlier one, wherever the
// session reads it next: on the node that ran the SET, in a cross-shard
// statement that needs it on every node, and through EXECUTE ... USING @k
// of a statement routed by it. Values are strings that are numbers and
// strings that are not, the empty string, NULL, binary bytes, integers,
// each also twice in a row; each SET follows, in turn, a statement that
// left warnings (a SET uses no table, so its response carries them, and
// the proxy must not clear them to read the variable back) and one that
// did not. Every answer is compared with one MariaDB holding all the rows.
func TestBinarySetVarReadEverywhere(t *testing.T) {
	e := newShardEnv(t, "sg_binset",
		config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	refDB := "sg_binset_ref"
	dbSetup(t, e.servers[0], refDB)
	t.Cleanup(func() {
		if err := dropDirect(e.servers[0], refDB); err != nil {
			t.Error(err)
		}
	})
	ref := openDB(t, directDSN(e.servers[0], refDB, ""))
	for _, db := range []*sql.DB{e.app, ref} {
		mustExec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c VARCHAR(20) NOT NULL)",
			"INSERT INTO t (id, c) VALUES (0, 'a'), (1, 'b'), (2, 'c'), (3, 'd'), (5, 'e'), (6, 'f'), (7, 'g')")
	}
	ctx := context.Background()
	// One session each, kept across every value: what a SET leaves must
	// reach the statements after it in the same session.
	sessions := []*sql.Conn{conn(t, e.app), conn(t, ref)}
	for _, c := range sessions {
		mustExec(t, c, "PREPARE s FROM 'SELECT id, c FROM t WHERE id = ? ORDER BY id'",
			"PREPARE h FROM 'SELECT HEX(?), ? IS NULL'")
	}
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
		// The node the SET ran on (the default node).
		"SELECT HEX(@k), @k IS NULL, CHARSET(@k)",
		// Every node: the variable carried to the other one.
		"SELECT id, HEX(@k) FROM t ORDER BY id",
		"SELECT COUNT(*) FROM t WHERE c <> @k OR @k IS NULL",
		// Routed by the variable's value.
		"SELECT id, c FROM t WHERE id = @k ORDER BY id",
		"EXECUTE s USING @k",
		"EXECUTE h USING @k, @k",
	}
	// Bytes that are not valid UTF-8 are left out: the server takes them
	// into a utf8mb4 variable unchecked from a binary parameter, and no
	// literal sets such a value on another connection (1300 there; issue
	// 32 lists the binary parameter that is not valid UTF-8).
	values := []any{"5", "5.00000000000000000001", "5abc", "5abc", "", "", nil, nil, "abc", "05", []byte{0xc3, 0xa9, 0x00, 0x35},
		[]byte{0xc3, 0xa9, 0x00, 0x35}, 7, 7, "7", int64(-1), 2.5, "6", nil, "5"}
	for i, v := range values {
		for _, before := range []struct {
			q    string
			args []any
		}{
			{"SELECT CAST('5abc' AS SIGNED)", nil},                 // a truncation warning on the SET's node
			{"SELECT COUNT(*) FROM t WHERE id = '5abc'", nil},      // on one node or every node
			{"SELECT COUNT(*) FROM t WHERE id = ?", []any{"5abc"}}, // the same, binary
			{"SELECT id FROM t WHERE id = ?", []any{"6abc"}},
			{"SELECT COUNT(*) FROM t WHERE id = 1", nil}, // none
		} {
			for j, c := range sessions {
				queryStrings(t, c, before.q, before.args...)
				if _, err := c.ExecContext(ctx, "SET @k = ?", v); err != nil {
					t.Fatalf("session %d: binary SET @k = %#v: %v", j, v, err)
				}
			}
			for _, q := range reads {
				if got, want := outcome(sessions[0], q), outcome(sessions[1], q); got != want {
					t.Errorf("value %d (%#v, after %s): %s: proxy %q, MariaDB %q", i, v, before.q, q, got, want)
				}
			}
		}
	}
}
