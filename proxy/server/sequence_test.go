package server_test

import (
	"database/sql"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// seqEnv is a shard environment whose rule "items" (hash on id over four
// subtables) takes its ids from a global sequence in a sidecar database of
// the test's own on node1.
func seqEnv(t *testing.T, db string, block int, extra ...config.ShardRule) *shardEnv {
	t.Helper()
	sidecar := db + "_sidecar"
	for _, s := range backends(t)[:1] {
		if err := dropDirect(s, sidecar); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dropDirect(s, sidecar) })
	}
	rules := append([]config.ShardRule{{Table: "items", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"},
		Locations: []int{2, 2}, Sequence: "id", SequenceBlock: block}}, extra...)
	return newShardEnvWith(t, db, func(cfg *config.Config) {
		cfg.Sidecar = config.Sidecar{Node: "node1", DB: sidecar}
	}, rules...)
}

// ids returns every id of table on both nodes, read directly, sorted.
func (e *shardEnv) ids(table string) []int {
	e.t.Helper()
	var out []int
	for _, s := range hashSubs(table) {
		for _, r := range queryStrings(e.t, e.direct[s.node], "SELECT id FROM "+s.name) {
			v, _ := strconv.Atoi(r[0])
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestSequenceInserts: AUTO_INCREMENT on a sharded table, as one server
// would answer it: ids from the sequence for rows that leave the column
// out or give NULL, DEFAULT or 0, LAST_INSERT_ID() and the OK packet's
// insert id the statement's first, explicit ids kept, rows spread over
// the subtables by the ids they got, in text and binary protocols.
func TestSequenceInserts(t *testing.T) {
	e := seqEnv(t, "seq_ins", 5)
	mustExec(t, e.app, "CREATE TABLE items (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20))")

	lastID := func(res sql.Result, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	c := conn(t, e.app)
	if id := lastID(c.ExecContext(t.Context(), "INSERT INTO items (name) VALUES ('a')")); id != 1 {
		t.Errorf("first insert id %d, want 1", id)
	}
	if v := queryValue(t, c, "SELECT LAST_INSERT_ID()"); v != "1" {
		t.Errorf("LAST_INSERT_ID() = %s", v)
	}
	// Seven rows: more than a block; the statement's id is its first.
	if id := lastID(c.ExecContext(t.Context(), "INSERT INTO items (name) VALUES ('b'),('c'),('d'),('e'),('f'),('g'),('h')")); id != 2 {
		t.Errorf("multi-row insert id %d, want 2", id)
	}
	if v := queryValue(t, c, "SELECT LAST_INSERT_ID()"); v != "2" {
		t.Errorf("LAST_INSERT_ID() = %s", v)
	}
	// No column list (the catalog gives the order), NULL, DEFAULT, 0.
	if id := lastID(c.ExecContext(t.Context(), "INSERT INTO items VALUES (NULL, 'i'), (DEFAULT, 'j'), (0, 'k')")); id != 9 {
		t.Errorf("NULL/DEFAULT/0 insert id %d, want 9", id)
	}
	// An explicit id is kept and takes nothing from the sequence.
	lastID(c.ExecContext(t.Context(), "INSERT INTO items (id, name) VALUES (1000, 'x')"))
	if id := lastID(c.ExecContext(t.Context(), "INSERT INTO items SET name = 'l'")); id != 12 {
		t.Errorf("INSERT ... SET id %d, want 12", id)
	}
	if got, want := e.ids("items"), append(seq(1, 12), 1000); !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
	// Rows spread: every subtable holds some.
	for _, s := range hashSubs("items") {
		if n := queryValue(t, e.direct[s.node], "SELECT COUNT(*) FROM "+s.name); n == "0" {
			t.Errorf("%s holds no row", s.name)
		}
	}

	// Binary protocol: a prepared INSERT without the id, and with a ?
	// for it, bound to NULL and to a value.
	bin := openDB(t, e.p.dsn(e.db, "interpolateParams=false"))
	st, err := bin.Prepare("INSERT INTO items (name) VALUES (?)")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, want := range []int64{13, 14} {
		if id := lastID(st.Exec(fmt.Sprint("p", i))); id != want {
			t.Errorf("prepared insert id %d, want %d", id, want)
		}
	}
	st2, err := bin.Prepare("INSERT INTO items (id, name) VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if id := lastID(st2.Exec(nil, "n")); id != 15 {
		t.Errorf("prepared NULL id: insert id %d, want 15", id)
	}
	lastID(st2.Exec(2000, "v"))
	if got, want := e.ids("items"), append(seq(1, 15), 1000, 2000); !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}

	// NO_AUTO_VALUE_ON_ZERO: 0 is stored as 0, as MariaDB does.
	mustExec(t, c, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')")
	lastID(c.ExecContext(t.Context(), "INSERT INTO items (id, name) VALUES (0, 'zero')"))
	if v := queryValue(t, e.app, "SELECT name FROM items WHERE id = 0"); v != "zero" {
		t.Errorf("row 0: %q", v)
	}
}

// TestSequenceStartsPastRows: a sequence created over a table that has
// rows starts past the largest id of every subtable.
func TestSequenceStartsPastRows(t *testing.T) {
	e := seqEnv(t, "seq_start", 100)
	mustExec(t, e.app, "CREATE TABLE items (id INT NOT NULL PRIMARY KEY, name VARCHAR(20))",
		"INSERT INTO items (id, name) VALUES (7, 'a'), (498, 'b'), (3, 'c')")
	res, err := e.app.Exec("INSERT INTO items (name) VALUES ('new')")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 499 {
		t.Errorf("first id %d, want 499", id)
	}
}

// TestSysbenchDefaults: sysbench's own prepare and oltp_read_write, with
// default options (AUTO_INCREMENT ids, prepared statements), on a table
// sharded over both nodes.
func TestSysbenchDefaults(t *testing.T) {
	bin, err := exec.LookPath("sysbench")
	if err != nil {
		t.Fatal("sysbench is not installed: scripts/deps.sh sysbench (or apt-get install -y sysbench)")
	}
	e := seqEnv(t, "sbseq", 1000, config.ShardRule{Table: "sbtest1", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"},
		Locations: []int{2, 2}, Sequence: "id", SequenceBlock: 1000})
	host, port, _ := strings.Cut(e.p.addr, ":")
	args := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=" + appUser, "--mysql-password=" + appPassword, "--mysql-db=" + e.db,
		"--tables=1", "--table-size=2000", "--threads=2"}
	// The run uses one thread: with several, oltp_read_write's transactions
	// can deadlock across the two nodes, which neither server sees, and
	// sysbench ignores the lock wait timeout that ends it (50 s).
	for _, step := range [][]string{{"prepare"}, {"--time=4", "--threads=1", "--report-interval=0", "run"}} {
		out, err := exec.Command(bin, append(slices.Clone(args), step...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sysbench %s: %v\n%s", step[len(step)-1], err, out)
		}
		if step[len(step)-1] == "run" {
			if !strings.Contains(string(out), "ignored errors:                      0") {
				t.Errorf("sysbench run had errors:\n%s", out)
			}
			t.Logf("sysbench run:\n%s", out)
		}
	}
	if got := e.ids("sbtest1"); len(got) != 2000 || got[0] != 1 || got[len(got)-1] != 2000 {
		t.Errorf("%d rows, ids %d..%d; want 2000 rows with ids 1..2000", len(got), got[0], got[len(got)-1])
	}
}

// TestSequenceAdvance: with sequence_advance, an explicit id above the
// sequence moves it past that id (text and binary protocols), one below
// does not, and the ids it skips are never handed out.
func TestSequenceAdvance(t *testing.T) {
	sidecar := "seq_adv_sidecar"
	if err := dropDirect(backends(t)[0], sidecar); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropDirect(backends(t)[0], sidecar) })
	e := newShardEnvWith(t, "seq_adv", func(cfg *config.Config) {
		cfg.Sidecar = config.Sidecar{Node: "node1", DB: sidecar}
	}, config.ShardRule{Table: "items", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"},
		Locations: []int{2, 2}, Sequence: "id", SequenceBlock: 100, SequenceAdvance: true})
	mustExec(t, e.app, "CREATE TABLE items (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20))")
	insert := func(db *sql.DB, q string, args ...any) int64 {
		t.Helper()
		res, err := db.Exec(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	if id := insert(e.app, "INSERT INTO items (name) VALUES ('a')"); id != 1 {
		t.Fatalf("first id %d", id)
	}
	insert(e.app, "INSERT INTO items (id, name) VALUES (50, 'x'), (40, 'y')") // inside the block in hand
	if id := insert(e.app, "INSERT INTO items (name) VALUES ('b')"); id != 51 {
		t.Errorf("after explicit 50: id %d, want 51", id)
	}
	insert(e.app, "INSERT INTO items (id, name) VALUES (5000, 'z')") // past the block
	if id := insert(e.app, "INSERT INTO items (name) VALUES ('c')"); id != 5001 {
		t.Errorf("after explicit 5000: id %d, want 5001", id)
	}
	insert(e.app, "INSERT INTO items (id, name) VALUES (70, 'below')") // below: nothing moves
	bin := openDB(t, e.p.dsn(e.db, "interpolateParams=false"))
	insert(bin, "INSERT INTO items (id, name) VALUES (?, ?)", 7000, "p")
	if id := insert(bin, "INSERT INTO items (id, name) VALUES (?, ?)", nil, "q"); id != 7001 {
		t.Errorf("prepared, after explicit 7000: id %d, want 7001", id)
	}
	if got, want := e.ids("items"), []int{1, 40, 50, 51, 70, 5000, 5001, 7000, 7001}; !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
}
