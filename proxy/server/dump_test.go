package server_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
)

// dumpSource is the database the round trip starts from: tables (one big
// enough to matter, utf8mb4 text and binary data), a view, a trigger, a
// procedure and a function. order_totals and f_orders read orders, which
// the sharded restore shards: they are refused there, clearly.
var dumpSource = []string{
	"CREATE TABLE countries (code CHAR(2) PRIMARY KEY, name VARCHAR(50)) DEFAULT CHARSET=utf8mb4",
	"INSERT INTO countries VALUES ('de','Deutschland'),('jp','日本'),('fr','França')",
	"CREATE TABLE orders (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, country CHAR(2), note VARCHAR(100) CHARACTER SET utf8mb4, " +
		"payload VARBINARY(32), amount DECIMAL(10,2), created DATETIME, KEY (country)) ENGINE=InnoDB",
	"CREATE TABLE notes (id INT AUTO_INCREMENT PRIMARY KEY, body TEXT CHARACTER SET utf8mb4) ENGINE=InnoDB",
	"INSERT INTO notes (body) VALUES ('hello 😀'), (NULL), ('it''s \\\\ back')",
	"CREATE VIEW note_view AS SELECT id, body FROM notes",
	"CREATE VIEW order_totals AS SELECT country, SUM(amount) total FROM orders GROUP BY country",
	"CREATE TRIGGER notes_bi BEFORE INSERT ON notes FOR EACH ROW SET NEW.body = CONCAT(IFNULL(NEW.body, ''), '!')",
	"CREATE PROCEDURE count_notes() SELECT COUNT(*) FROM notes",
	"CREATE FUNCTION f_orders() RETURNS INT READS SQL DATA RETURN (SELECT COUNT(*) FROM orders)",
	"INSERT INTO orders (country, note, payload, amount, created) SELECT ELT(1 + seq % 3, 'de', 'jp', 'fr'), " +
		"CONCAT('note ', seq, IF(seq % 7 = 0, ' 😀', '')), UNHEX(MD5(seq)), seq / 100, '2026-01-01' + INTERVAL seq MINUTE FROM seq_1_to_100000",
}

// dumpTables are the tables compared, with the columns of their checksum.
var dumpTables = map[string]string{
	"countries": "code, name",
	"orders":    "id, country, note, HEX(payload), amount, created",
	"notes":     "id, body",
}

// checksums returns, per table, its row count and the sum of its rows'
// CRC32s: equal for equal contents whatever the row order, and computed
// across shards by the proxy's merge.
func checksums(t *testing.T, db querier, schema string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for table, cols := range dumpTables {
		r := queryStrings(t, db, "SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', "+cols+"))) FROM "+schema+"."+table)
		out[table] = strings.Join(r[0], "/")
	}
	return out
}

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: it comes with MariaDB (scripts/deps.sh mariadb)", name)
	}
	return p
}

// clientArgs are a command-line client's connection options.
func clientArgs(addr, user, password string) []string {
	host, port, _ := strings.Cut(addr, ":")
	return []string{"--no-defaults", "--default-character-set=utf8mb4", "-h" + host, "-P" + port, "-u" + user, "-p" + password}
}

// TestDumpRoundTrip: a mariadb-dump of a database (tables, views, a
// trigger, routines, utf8mb4 and binary data, 100 000 rows) restores
// through the proxy into an unsharded database and into one whose big
// table is sharded (with a global sequence) and its small table global;
// mariadb-dump --single-transaction through the proxy dumps it back, and
// that dump restored on a plain server has the same contents.
func TestDumpRoundTrip(t *testing.T) {
	dump, client := tool(t, "mariadb-dump"), tool(t, "mariadb")
	servers := backends(t)[:2]
	origin := servers[1] // the source lives outside the proxy's schema
	for _, db := range []string{"dumpsrc", "dumpback"} {
		if err := dropDirect(origin, db); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dropDirect(origin, db) })
	}
	if err := dropDirect(servers[0], "dumpun"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropDirect(servers[0], "dumpun") })
	direct := openDB(t, directDSN(origin, "", ""))
	mustExec(t, direct, "CREATE DATABASE dumpsrc CHARACTER SET utf8mb4", "CREATE DATABASE dumpback CHARACTER SET utf8mb4")
	src := openDB(t, directDSN(origin, "dumpsrc", ""))
	mustExec(t, src, dumpSource...)
	want := checksums(t, src, "dumpsrc")

	file := filepath.Join(t.TempDir(), "dump.sql")
	run := func(stdin string, name string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(name, args...)
		if stdin != "" {
			f, err := os.Open(stdin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Stdin = f
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if stdin == "" && err == nil {
			return string(out), nil
		}
		return stderr.String(), err // the client's errors
	}
	text, err := run("", dump, append(clientArgs(origin.Addr, origin.User, origin.Password), "--routines", "--triggers", "dumpsrc")...)
	if err != nil {
		t.Fatalf("mariadb-dump: %v", err)
	}
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	e := newShardEnvWith(t, "dumpsh", func(cfg *config.Config) {
		cfg.Sidecar = config.Sidecar{Node: "node1", DB: "dumpsh_sidecar"}
	},
		config.ShardRule{Table: "orders", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}, Sequence: "id", SequenceBlock: 1000},
		config.ShardRule{Table: "countries", Type: "global", Nodes: []string{"node1", "node2"}})
	t.Cleanup(func() { dropDirect(servers[0], "dumpsh_sidecar") })
	mustExec(t, e.app, "CREATE DATABASE dumpun CHARACTER SET utf8mb4", "ALTER DATABASE dumpsh CHARACTER SET utf8mb4")
	proxyArgs := clientArgs(e.p.addr, appUser, appPassword)

	// Unsharded: everything restores, and works.
	if msg, err := run(file, client, append(proxyArgs, "dumpun")...); err != nil {
		t.Fatalf("restore into an unsharded database: %v\n%s", err, msg)
	}
	checkSame(t, "unsharded restore", checksums(t, e.app, "dumpun"), want)
	// A stored function's call leaves the server's "session state
	// changed" flag on an EOF that cannot say what changed: the session
	// keeps its connection on node1. Its own client, then.
	fn := openDB(t, e.p.dsn("dumpun", ""))
	if v := queryValue(t, fn, "SELECT f_orders()"); v != "100000" {
		t.Errorf("f_orders() = %s", v)
	}
	fn.Close()

	// Sharded: everything but the view and the function over the sharded
	// table, which are refused with 1235 and a reason.
	// mariadb --force reports the errors and exits with 0.
	msg, _ := run(file, client, append(proxyArgs, "--force", "dumpsh")...)
	var errs []string
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		if strings.HasPrefix(l, "ERROR") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "ERROR 1235") || !strings.Contains(errs[0], "CREATE FUNCTION that names sharded table orders") ||
		!strings.Contains(errs[1], "CREATE VIEW over sharded table orders") {
		t.Fatalf("sharded restore: want exactly the refusals of f_orders and order_totals, got:\n%s", msg)
	}
	checkSame(t, "sharded restore", checksums(t, e.app, "dumpsh"), want)
	for i := range servers {
		if n := queryValue(t, e.direct[i], "SELECT COUNT(*) FROM countries"); n != "3" {
			t.Errorf("node%d holds %s rows of the global table countries, want 3", i+1, n)
		}
	}
	if v := queryValue(t, e.app, "SELECT COUNT(*) FROM dumpsh.note_view"); v != "3" {
		t.Errorf("note_view: %s rows", v)
	}
	// The sequence continues where the source's AUTO_INCREMENT was (the
	// dump's AUTO_INCREMENT=... table option), as on one server.
	next := queryValue(t, src, "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dumpsrc' AND TABLE_NAME = 'orders'")
	res, err := e.app.Exec("INSERT INTO orders (country) VALUES ('de')")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if fmt.Sprint(id) != next {
		t.Errorf("the first id after the restore is %d, want %s (the source's next AUTO_INCREMENT)", id, next)
	}
	mustExec(t, e.app, fmt.Sprintf("DELETE FROM orders WHERE id = %d", id))

	// And back: a consistent dump through the proxy, restored on a plain
	// server, holds what the source held.
	text, err = run("", dump, append(proxyArgs, "--single-transaction", "--routines", "--triggers", "dumpsh")...)
	if err != nil {
		t.Fatalf("mariadb-dump through the proxy: %v\n%s", err, text)
	}
	if strings.Contains(text, "orders_0001") {
		t.Error("the dump through the proxy names a subtable")
	}
	back := filepath.Join(t.TempDir(), "back.sql")
	if err := os.WriteFile(back, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := run(back, client, append(clientArgs(origin.Addr, origin.User, origin.Password), "dumpback")...); err != nil {
		t.Fatalf("restoring the dump taken through the proxy: %v\n%s", err, msg)
	}
	checkSame(t, "dumped back through the proxy", checksums(t, direct, "dumpback"), want)
}

func checkSame(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for table, w := range want {
		if got[table] != w {
			t.Errorf("%s: table %s has rows/checksum %s, the source %s", what, table, got[table], w)
		}
	}
}

// TestLoadDataSplit: LOAD DATA LOCAL INFILE into a sharded table sends each
// line to the subtable of its shard key (CSV with quotes, commas and line
// breaks inside fields, NULLs, a header skipped with IGNORE), with the
// counts one server would give; the same file loaded into a plain table
// directly holds the same rows. mariadb-import --local does the same.
func TestLoadDataSplit(t *testing.T) {
	e := newShardEnv(t, "loadsplit", config.ShardRule{Table: "items", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), note TEXT)")
	mustExec(t, e.direct[0], "CREATE TABLE plain (id INT PRIMARY KEY, name VARCHAR(40), note TEXT)")
	var b strings.Builder
	b.WriteString("id,name,note\n")
	for i := 1; i <= 1000; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "%d,\"comma, and \"\"quote\"\"\",\"line\nbreak\"\n", i)
		case 1:
			fmt.Fprintf(&b, "%d,plain%d,\\N\n", i, i)
		default:
			fmt.Fprintf(&b, "\"%d\",name%d,NULL\n", i, i)
		}
	}
	file := filepath.Join(t.TempDir(), "items.csv")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	gomysql.RegisterLocalFile(file)
	defer gomysql.DeregisterLocalFile(file)
	load := "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE %s FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n' IGNORE 1 LINES (id, name, note)"
	res, err := e.app.Exec(fmt.Sprintf(load, "items"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1000 {
		t.Errorf("LOAD DATA through the proxy: %d rows affected, want 1000", n)
	}
	if _, err := e.direct[0].Exec(fmt.Sprintf(load, "plain")); err != nil {
		t.Fatal(err)
	}
	for _, s := range hashSubs("items") {
		idx := s.name[len(s.name)-1] - '0'
		if n := queryValue(t, e.direct[s.node], fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE id %% 4 <> %d", s.name, idx)); n != "0" {
			t.Errorf("%s holds %s rows of other subtables", s.name, n)
		}
		if n := queryValue(t, e.direct[s.node], "SELECT COUNT(*) FROM "+s.name); n != "250" {
			t.Errorf("%s holds %s rows, want 250", s.name, n)
		}
	}
	sum := "SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', id, name, IFNULL(note, 'null')))) FROM "
	if got, want := queryStrings(t, e.app, sum+"items"), queryStrings(t, e.direct[0], sum+"plain"); strings.Join(got[0], "/") != strings.Join(want[0], "/") {
		t.Errorf("through the proxy %v, directly %v", got, want)
	}

	// mariadb-import --local: tab-separated, file name = table name.
	imp := tool(t, "mariadb-import")
	dir := t.TempDir()
	var tsv strings.Builder
	for i := 2001; i <= 2100; i++ {
		fmt.Fprintf(&tsv, "%d\timported %d\t\\N\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "items.txt"), []byte(tsv.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(imp, append(clientArgs(e.p.addr, appUser, appPassword), "--local", e.db, filepath.Join(dir, "items.txt"))...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Records: 100") {
		t.Fatalf("mariadb-import --local: %v\n%s", err, out)
	}
	if n := queryValue(t, e.app, "SELECT COUNT(*) FROM items WHERE id > 2000"); n != "100" {
		t.Errorf("imported rows: %s", n)
	}

	// A key no rule maps, a server-side file: clear refusals.
	_, err = e.app.Exec("LOAD DATA INFILE '/etc/hostname' INTO TABLE items")
	wantSQLError(t, err, 1235, "42000")
}
