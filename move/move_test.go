package move_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
)

var cluster *mariadbtest.Cluster

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
		cluster = c
		return m.Run()
	})
}

// env places every node on server 1; nothing is ever paused (imports).
type env struct{ s *mariadbtest.Server }

func (e env) Endpoint(string) (move.Endpoint, error) {
	return move.Endpoint{Addr: e.s.Addr, User: e.s.User, Password: e.s.Password}, nil
}
func (env) Lag(string) time.Duration { return 0 }
func (env) Pause(context.Context, string, string) (func(*config.ShardRule) (time.Duration, error), error) {
	return nil, fmt.Errorf("no pause in this test")
}

func open(t testing.TB, s *mariadbtest.Server, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func exec(t testing.TB, d *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// typed is a table with a column of every kind of value, and rows that
// stress them: NULLs, bytes no character set holds (0x00, quotes,
// backslashes), decimals past float precision, the extremes of integer
// types, fractional seconds, JSON, ENUM, SET, BIT.
const typed = `CREATE TABLE t (
	id BIGINT NOT NULL PRIMARY KEY,
	i8 TINYINT, u64 BIGINT UNSIGNED, dec1 DECIMAL(30,10), f FLOAT, d DOUBLE,
	s VARCHAR(64) CHARACTER SET utf8mb4, l1 VARCHAR(64) CHARACTER SET latin1, b VARBINARY(64), bl BLOB, tx TEXT,
	dt DATETIME(6), ts TIMESTAMP(3) NULL, dd DATE, tm TIME(2), y YEAR,
	j JSON, e ENUM('a','b','c'), st SET('x','y','z'), bt BIT(12),
	g INT AS (i8 * 2) VIRTUAL
)`

func row(id int) string {
	return fmt.Sprintf(`(%d, %d, %d, '%d.0123456789', 1.5, %d.25e10, 'héllo ✓ %d', 'café %d', X'00275C0A%02X', X'FF00FE', 'a\'b\\c', '2024-02-29 23:59:59.%06d', '2038-01-19 03:14:07.123', '1000-01-01', '-838:59:59.99', 2155, '{"k": [1, "two", null]}', 'b', 'x,z', b'101010101010')`,
		id, id%128-64, uint64(18446744073709551615)-uint64(id), 99999999999999999+id, id, id, id, id%256, id%1000000)
}

func insert(t testing.TB, d *sql.DB, ids ...int) {
	t.Helper()
	var rows []string
	for _, id := range ids {
		rows = append(rows, row(id))
	}
	exec(t, d, "INSERT INTO t (id, i8, u64, dec1, f, d, s, l1, b, bl, tx, dt, ts, dd, tm, y, j, e, st, bt) VALUES "+strings.Join(rows, ","))
}

// dump is every stored column of every row of the tables, as hex.
func dump(t testing.TB, d *sql.DB, tables ...string) map[string]string {
	t.Helper()
	cols := "id, HEX(i8), HEX(u64), dec1, HEX(f), HEX(d), HEX(s), HEX(l1), HEX(b), HEX(bl), HEX(tx), dt, UNIX_TIMESTAMP(ts), dd, tm, y, HEX(j), e, st, HEX(bt), ISNULL(ts), g"
	out := map[string]string{}
	for _, tb := range tables {
		rows, err := d.Query("SELECT " + cols + " FROM " + tb)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]sql.NullString, 22)
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, v := range vals[1:] {
				fmt.Fprintf(&b, "%v|", v)
			}
			out[vals[0].String] = b.String()
		}
		rows.Close()
	}
	return out
}

// TestImportKeepsEveryValue: an import of a table with every kind of
// column, written to before the copy, during the catch-up (inserts,
// updates that move rows between subtables of the new rule, deletes), is
// verified with no difference and holds the very bytes of the source.
func TestImportKeepsEveryValue(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	src, dst := cluster.Servers[0], cluster.Servers[1]
	exec(t, open(t, src, ""), "DROP DATABASE IF EXISTS vals_src", "CREATE DATABASE vals_src")
	exec(t, open(t, dst, ""), "DROP DATABASE IF EXISTS vals_dst", "DROP DATABASE IF EXISTS vals_sidecar", "CREATE DATABASE vals_dst")
	sdb := open(t, src, "vals_src")
	exec(t, sdb, "SET time_zone = '+00:00'", typed)
	for i := 0; i < 30; i++ {
		insert(t, sdb, i*10, i*10+1, i*10+2)
	}
	exec(t, sdb, "INSERT INTO t (id) VALUES (100000)") // NULLs everywhere

	store := move.NewStore(move.Endpoint{Addr: dst.Addr, User: dst.User, Password: dst.Password}, "vals_sidecar")
	m := move.NewManager(store, env{dst}, zaptest.NewLogger(t), "test")
	defer m.Close()
	rule := config.ShardRule{DB: "vals_dst", Table: "t", Key: "id", Type: "hash", Nodes: []string{"n1"}, Locations: []int{3}}
	_, err := m.Start(move.Spec{Name: "vals", Kind: move.KindImport, DB: "vals_dst", Table: "t", From: rule, To: rule,
		Source: &move.Endpoint{Addr: src.Addr, User: src.User, Password: src.Password}, SourceDB: "vals_src", SourceTable: "t",
		Options: config.MoveOptions{BatchRows: 7, CopyWorkers: 2, ApplyWorkers: 3}})
	if err != nil {
		t.Fatal(err)
	}
	// Writes once the copy is done: the binary log carries them.
	wait(t, m, "vals", move.PhaseReady)
	exec(t, sdb, "SET time_zone = '+05:30'")
	insert(t, sdb, 5000, 5001, 5002)
	exec(t, sdb,
		"UPDATE t SET id = id + 1000000, s = CONCAT(s, ' moved') WHERE id IN (10, 20)", // new key: another subtable
		"UPDATE t SET bl = X'00010203', dec1 = -0.0000000001, j = '[]', bt = b'1' WHERE id = 30",
		"UPDATE t SET ts = '1999-12-31 23:00:00' WHERE id = 31",
		"DELETE FROM t WHERE id IN (40, 41)",
		"UPDATE t SET s = NULL, f = NULL WHERE id = 50")
	if err := m.Command("vals", move.CmdVerify); err != nil {
		t.Fatal(err)
	}
	st := wait(t, m, "vals", move.PhaseReady)
	if len(st.State.Diffs) > 0 || st.State.VerifyRows != 92 {
		t.Fatalf("verify: %d rows, differences %+v", st.State.VerifyRows, st.State.Diffs)
	}
	insert(t, sdb, 7000)
	if err := m.Command("vals", move.CmdComplete); err != nil {
		t.Fatal(err)
	}
	// The changes applied are saved with the state (no longer live).
	done := wait(t, m, "vals", move.PhaseCompleted)
	if done.State.ChangesApplied < 9 {
		t.Errorf("after complete: %d changes applied saved; want the 9 or more written after the copy", done.State.ChangesApplied)
	}
	want := dump(t, sdb, "t")
	got := dump(t, open(t, dst, "vals_dst"), "t_0000", "t_0001", "t_0002")
	if len(got) != len(want) {
		t.Fatalf("%d rows imported, the source has %d", len(got), len(want))
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("row %s:\n got %s\nwant %s", id, got[id], w)
		}
	}
}

func wait(t testing.TB, m *move.Manager, name, phase string) move.Status {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		all, err := m.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if s.Spec.Name == name && s.State.Phase == phase {
				return s
			}
			if s.Spec.Name == name && time.Now().After(deadline) {
				t.Fatalf("%s is %s after 2 minutes, want %s (%s)", name, s.State.Phase, phase, s.State.Error)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
