package changestream

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
	_ "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
)

// server is the source of the package's streams; replica is where the
// replay test writes what it read.
var server, replica *mariadbtest.Server

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 2, func(c *mariadbtest.Cluster) int {
		if c != nil {
			server, replica = c.Servers[0], c.Servers[1]
		}
		return m.Run()
	})
}

func db(t testing.TB) *sql.DB {
	t.Helper()
	if server == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	d, err := sql.Open("mysql", server.DSN(""))
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

func pos(t testing.TB, d *sql.DB) string {
	t.Helper()
	var p string
	if err := d.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSubscribeUntil: a subscription over a range ends by itself at its
// Until position, names subtables by their logical table, leaves other
// tables out, numbers a transaction's rows and marks its last one.
func TestSubscribeUntil(t *testing.T) {
	d := db(t)
	exec(t, d, "DROP DATABASE IF EXISTS su", "CREATE DATABASE su",
		"CREATE TABLE su.t_0000 (id INT PRIMARY KEY, v INT)", "CREATE TABLE su.t_0001 (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE su.other (id INT PRIMARY KEY)")
	from := pos(t, d)
	exec(t, d, "INSERT INTO su.t_0000 VALUES (2, 20), (4, 40)", "INSERT INTO su.t_0001 VALUES (1, 10)",
		"INSERT INTO su.other VALUES (1)", "UPDATE su.t_0000 SET v = v + 1")
	until := pos(t, d)
	exec(t, d, "INSERT INTO su.t_0001 VALUES (3, 30)") // after the range
	cfg := &config.Config{Schemas: []config.Schema{{Shard: []config.ShardRule{{DB: "su", Table: "t", Type: "hash", Locations: []int{2}}}}}}
	src := Source{Node: "n1", Addr: server.Addr, User: server.User, Password: server.Password}
	changes, errc, err := Subscribe(context.Background(), []Source{src}, Names(cfg),
		Options{Tables: []string{"su.t"}, From: map[string]string{"n1": from}, Until: map[string]string{"n1": until}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ch := range changes {
		got = append(got, fmt.Sprintf("%s %s %s %d %v %v %v", ch.Table, ch.Subtable, ch.Op, ch.Seq, ch.Before["v"], ch.After["v"], ch.Last))
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := []string{
		"su.t su.t_0000 insert 0 <nil> 20 false", "su.t su.t_0000 insert 1 <nil> 40 true",
		"su.t su.t_0001 insert 0 <nil> 10 true",
		"su.t su.t_0000 update 0 20 21 false", "su.t su.t_0000 update 1 40 41 true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkDecode parses a binary log of 100-row INSERT, UPDATE and DELETE
// statements with go-mysql (b.N times over the file) and turns its rows
// into changes (route), reporting allocations per event and per row.
func BenchmarkDecode(b *testing.B) {
	d := db(b)
	exec(b, d, "DROP DATABASE IF EXISTS bd", "CREATE DATABASE bd", "CREATE TABLE bd.t_0000 (id INT PRIMARY KEY, k INT, c CHAR(60))")
	exec(b, d, "FLUSH BINARY LOGS")
	for lo := 0; lo < 10000; lo += 100 {
		var s strings.Builder
		s.WriteString("INSERT INTO bd.t_0000 VALUES ")
		for i := lo; i < lo+100; i++ {
			if i > lo {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, "(%d, %d, 'row %d of the benchmark')", i, i, i)
		}
		exec(b, d, s.String(), fmt.Sprintf("UPDATE bd.t_0000 SET k = k + 1 WHERE id BETWEEN %d AND %d", lo, lo+99))
	}
	exec(b, d, "DELETE FROM bd.t_0000", "FLUSH BINARY LOGS")
	files, _ := filepath.Glob(filepath.Join(server.DataDir, "mysql-bin.[0-9]*"))
	sort.Strings(files)
	file := files[len(files)-2] // the one the writes went to
	if st, err := os.Stat(file); err != nil || st.Size() < 1<<20 {
		b.Fatalf("binary log %s: %v", file, err)
	}
	cfg := &config.Config{Schemas: []config.Schema{{Shard: []config.ShardRule{{DB: "bd", Table: "t", Type: "hash", Locations: []int{1}}}}}}
	r := &reader{src: Source{Node: "n1"}, names: Names(cfg), want: map[string]bool{}}
	var events, rows int64
	b.ResetTimer()
	for range b.N {
		p := replication.NewBinlogParser()
		seq := 0
		var pending []Change
		err := p.ParseFile(file, 4, func(ev *replication.BinlogEvent) error {
			events++
			if e, ok := ev.Event.(*replication.RowsEvent); ok {
				var err error
				pending, err = r.rows(e, Change{}, &seq, pending[:0])
				rows += int64(len(pending))
				return err
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
	b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
}

// TestNames: subtables of hash and range rules and a date rule's periods
// are named by their logical table; other tables by themselves.
func TestNames(t *testing.T) {
	cfg := &config.Config{Schemas: []config.Schema{{Shard: []config.ShardRule{
		{DB: "d", Table: "h", Type: "hash", Locations: []int{2, 2}},
		{DB: "d", Table: "log", Type: "date_month"},
	}}}}
	names := Names(cfg)
	for _, tc := range [][3]string{
		{"d", "h_0000", "d.h"}, {"d", "h_0003", "d.h"}, {"d", "h_0004", "d.h_0004"},
		{"d", "log_202611", "d.log"}, {"d", "log_x", "d.log_x"}, {"d", "plain", "d.plain"}, {"e", "h_0000", "e.h_0000"},
	} {
		if got := names(tc[0], tc[1]); got != tc[2] {
			t.Errorf("Names(%s, %s) = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
}

// TestNamesWith: the subtables of a table's rule and of the rules of a
// move (old and new generation) are all the logical table.
func TestNamesWith(t *testing.T) {
	from := config.ShardRule{DB: "d", Table: "h", Type: "hash", Locations: []int{2}}
	to := config.ShardRule{DB: "d", Table: "h", Type: "hash", Locations: []int{3}, Generation: 1}
	cfg := &config.Config{Schemas: []config.Schema{{Shard: []config.ShardRule{from}}}}
	names := NamesWith(cfg, from, to)
	for _, tc := range [][3]string{
		{"d", "h_0000", "d.h"}, {"d", "h_0001", "d.h"}, {"d", "h_g1_0000", "d.h"}, {"d", "h_g1_0002", "d.h"},
		{"d", "h_g1_0003", "d.h_g1_0003"}, {"d", "h_g2_0000", "d.h_g2_0000"}, {"d", "other", "d.other"},
	} {
		if got := names(tc[0], tc[1]); got != tc[2] {
			t.Errorf("NamesWith(%s, %s) = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
	if got := Names(cfg)("d", "h_g1_0000"); got != "d.h_g1_0000" {
		t.Errorf("Names without the move: %s", got)
	}
}

// TestFlagged: the rows of transactions written with skip_replication=1
// are left out of a stream (their positions still come as marks), and
// come with KeepFlagged; an account with no privilege at all may set it.
func TestFlagged(t *testing.T) {
	d := db(t)
	exec(t, d, "DROP DATABASE IF EXISTS fl", "CREATE DATABASE fl", "CREATE TABLE fl.t (id INT PRIMARY KEY, v INT)",
		"DROP USER IF EXISTS 'fl_plain'@'%'", "CREATE USER 'fl_plain'@'%' IDENTIFIED BY 'fl'", "GRANT SELECT, INSERT, UPDATE, DELETE ON fl.* TO 'fl_plain'@'%'")
	from := pos(t, d)
	ctx := context.Background()
	plain, err := sql.Open("mysql", "fl_plain:fl@tcp("+server.Addr+")/fl")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	conn, err := plain.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"INSERT INTO t VALUES (1, 1)",
		"SET skip_replication = 1",
		"INSERT INTO t VALUES (2, 2)", "UPDATE t SET v = 10 WHERE id = 1", "DELETE FROM t WHERE id = 2",
		"SET skip_replication = 0",
		"INSERT INTO t VALUES (3, 3)",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s (as an account with SELECT, INSERT, UPDATE, DELETE on fl.* only): %v", q, err)
		}
	}
	until := pos(t, d)
	src := Source{Node: "n1", Addr: server.Addr, User: server.User, Password: server.Password}
	stream := func(keep bool) (rows []string, marks int) {
		changes, errc, err := Subscribe(ctx, []Source{src}, Names(&config.Config{}), Options{Tables: []string{"fl.t"}, Marks: true, KeepFlagged: keep,
			From: map[string]string{"n1": from}, Until: map[string]string{"n1": until}})
		if err != nil {
			t.Fatal(err)
		}
		for ch := range changes {
			if ch.Op == "mark" {
				marks++
				continue
			}
			rows = append(rows, fmt.Sprintf("%s %v %v", ch.Op, ch.Before["id"], ch.After["id"]))
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return rows, marks
	}
	rows, marks := stream(false)
	if strings.Join(rows, ", ") != "insert <nil> 1, insert <nil> 3" || marks != 5 {
		t.Errorf("flagged left out: %q and %d marks, want the two unflagged inserts and 5 marks", rows, marks)
	}
	rows, _ = stream(true)
	if want := "insert <nil> 1, insert <nil> 2, update 1 1, delete 2 <nil>, insert <nil> 3"; strings.Join(rows, ", ") != want {
		t.Errorf("KeepFlagged: %q, want %s", rows, want)
	}
}

// TestGTIDsFromAnEmptyPosition: a stream started from the first binary
// log (a position without this server's GTIDs) names each transaction by
// its own GTID, the one the server gave it (go-mysql moves the first
// event's GTID forward in place as later ones arrive; under -race, reading
// it was a data race).
func TestGTIDsFromAnEmptyPosition(t *testing.T) {
	d := db(t)
	exec(t, d, "DROP DATABASE IF EXISTS ge", "CREATE DATABASE ge", "CREATE TABLE ge.t (id INT PRIMARY KEY)")
	conn, err := d.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var want []string
	for i := range 30 {
		if _, err := conn.ExecContext(context.Background(), fmt.Sprintf("INSERT INTO ge.t VALUES (%d)", i)); err != nil {
			t.Fatal(err)
		}
		var g string
		if err := conn.QueryRowContext(context.Background(), "SELECT @@last_gtid").Scan(&g); err != nil {
			t.Fatal(err)
		}
		want = append(want, g)
	}
	until := pos(t, d)
	cfg := &config.Config{}
	src := Source{Node: "n1", Addr: server.Addr, User: server.User, Password: server.Password}
	changes, errc, err := Subscribe(context.Background(), []Source{src}, Names(cfg),
		Options{Tables: []string{"ge.t"}, From: map[string]string{"n1": ""}, Until: map[string]string{"n1": until}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ch := range changes {
		got = append(got, ch.GTID)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("GTIDs of the stream:\n%s\nthe server's:\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

// TestKey: each change names its table's primary-key columns in the key's
// order (a composite key declared out of column order, a key on a prefix
// of a column), and none for a table without one; the JSON line has them
// as "key".
func TestKey(t *testing.T) {
	d := db(t)
	exec(t, d, "DROP DATABASE IF EXISTS pk", "CREATE DATABASE pk",
		"CREATE TABLE pk.one (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE pk.two (a INT, v INT, b VARCHAR(10), PRIMARY KEY (b, a))",
		"CREATE TABLE pk.prefix (s VARCHAR(100), n INT, PRIMARY KEY (s(4), n))",
		"CREATE TABLE pk.none (v INT, UNIQUE KEY (v))")
	from := pos(t, d)
	exec(t, d, "INSERT INTO pk.one VALUES (1, 1)", "INSERT INTO pk.two VALUES (1, 2, 'x')",
		"INSERT INTO pk.prefix VALUES ('abcdef', 1)", "INSERT INTO pk.none VALUES (1)", "UPDATE pk.one SET v = 2")
	until := pos(t, d)
	src := Source{Node: "n1", Addr: server.Addr, User: server.User, Password: server.Password}
	changes, errc, err := Subscribe(context.Background(), []Source{src}, Names(&config.Config{}),
		Options{Tables: []string{"pk.one", "pk.two", "pk.prefix", "pk.none"}, Encode: true,
			From: map[string]string{"n1": from}, Until: map[string]string{"n1": until}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ch := range changes {
		var line struct {
			Key []string `json:"key"`
		}
		if err := json.Unmarshal(ch.JSON, &line); err != nil {
			t.Fatal(err)
		}
		if ch.Table == "pk.none" && (ch.Key != nil || strings.Contains(string(ch.JSON), `"key"`)) {
			t.Errorf("a table without a primary key: Key %q, JSON %s", ch.Key, ch.JSON)
		}
		got = append(got, fmt.Sprintf("%s %s %q %q", ch.Table, ch.Op, ch.Key, line.Key))
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := []string{
		`pk.one insert ["id"] ["id"]`, `pk.two insert ["b" "a"] ["b" "a"]`, `pk.prefix insert ["s" "n"] ["s" "n"]`,
		`pk.none insert [] []`, `pk.one update ["id"] ["id"]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
