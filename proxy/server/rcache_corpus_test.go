package server_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/resultcache"
)

// The result cache's corpus (issue 39): statements whose answer depends
// on more than the rows they read, and changes a cached answer must not
// survive, each run through the proxy several times (so that a second run
// may be a hit) and compared byte for byte, column metadata included,
// with the same statement run on the node that holds the row.

// A corpus step is one statement. "{t}" names the table: t through the
// proxy, the physical subtable directly; "{sub}" is the subtable on both
// sides. A leading "? " marks a query whose answer is compared; a
// leading "! " a statement run through the proxy only (a change to the
// rows both sides read); anything else runs on both sides and its
// outcome is compared.
type corpusCase struct {
	name  string
	id    int // the row whose subtable the direct side reads
	runs  int // times the script runs (0: 3)
	steps []string
	// volatile: the values differ from run to run (NOW(), RAND()):
	// compare column metadata and row counts only.
	volatile bool
	// sequential: the whole script runs through the proxy, then directly
	// (a transaction that would wait for the other side's row locks);
	// otherwise each step runs on both sides before the next.
	sequential bool
	want       string // "hit": some run was served from the cache; "none": no hit nor fill
	textOnly   bool   // a change that runs once (the binary pass leaves it out)
}

// corpusPair is a proxy session and a direct session on the node that
// holds a row, with the names {t} and {sub} stand for.
type corpusPair struct {
	px, dx *sql.Conn
	pxT    string // {t} through the proxy
	sub    string // {t} directly, and {sub} on both sides
	binary bool   // queries are prepared and executed (COM_STMT_EXECUTE)
}

// newCorpusEnv is newCacheEnv's table and rows with the configuration
// changed by edit before the proxy starts.
func newCorpusEnv(t *testing.T, db string, n int, edit func(*config.Config)) *shardEnv {
	t.Helper()
	e := newShardEnvWith(t, db, func(cfg *config.Config) {
		cfg.Cache = &config.Cache{Tables: []string{db + ".t"}, Memory: 8 << 20, MaxEntry: 64 << 10, MaxStaleness: time.Second, MaxWaiters: 64}
		if edit != nil {
			edit(cfg)
		}
	}, config.ShardRule{Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, u INT UNIQUE, c VARCHAR(40) NOT NULL)")
	for i := 1; i <= n; i++ {
		mustExec(t, e.app, fmt.Sprintf("INSERT INTO t VALUES (%d, %d, 'v%d')", i, 100+i, i))
	}
	return e
}

// home returns the node index and subtable of t that hold row id, read
// directly.
func (e *shardEnv) home(t *testing.T, id int) (int, string) {
	t.Helper()
	for _, s := range hashSubs("t") {
		var n int
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE id = %d", s.name, id)
		if err := e.direct[s.node].QueryRow(q).Scan(&n); err == nil && n == 1 {
			return s.node, s.name
		}
	}
	t.Fatalf("no subtable holds id %d", id)
	return 0, ""
}

// pair opens a corpus pair over proxy handle px for row id.
func (e *shardEnv) pair(t *testing.T, px *sql.DB, id int) *corpusPair {
	node, sub := e.home(t, id)
	return &corpusPair{px: conn(t, px), dx: conn(t, e.direct[node]), pxT: "t", sub: sub}
}

// corpusAnswer runs q on c and returns its answer as text: each column's name,
// type, nullability, precision and scan type, then each row's values as
// raw bytes (quoted; NULL apart), or the error's code and SQLSTATE.
func corpusAnswer(ctx context.Context, c *sql.Conn, q string, binary, volatile bool) string {
	var rows *sql.Rows
	var err error
	if binary {
		var st *sql.Stmt
		if st, err = c.PrepareContext(ctx, q); err == nil {
			defer st.Close()
			rows, err = st.QueryContext(ctx)
		}
	} else {
		rows, err = c.QueryContext(ctx, q)
	}
	if err != nil {
		return errText(err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return errText(err)
	}
	var b strings.Builder
	for _, ct := range cts {
		null, _ := ct.Nullable()
		p, s, _ := ct.DecimalSize()
		fmt.Fprintf(&b, "col %q %s null=%v dec=%d,%d scan=%v\n", ct.Name(), ct.DatabaseTypeName(), null, p, s, ct.ScanType())
	}
	vals := make([]sql.RawBytes, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		n++
		if err := rows.Scan(ptrs...); err != nil {
			return b.String() + errText(err)
		}
		if volatile {
			continue
		}
		for _, v := range vals {
			if v == nil {
				b.WriteString("NULL ")
			} else {
				fmt.Fprintf(&b, "%q ", []byte(v))
			}
		}
		b.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		return b.String() + errText(err)
	}
	return fmt.Sprintf("%s%d rows", b.String(), n)
}

// errText is an error as the corpus compares it: MariaDB's code and
// SQLSTATE (messages name the physical table directly).
func errText(err error) string {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("ERR %d %s", me.Number, me.SQLState[:])
	}
	return "ERR " + err.Error()
}

// step runs one step on one side and returns its outcome ("" for a
// proxy-only step on the direct side).
func (cp *corpusPair) step(ctx context.Context, direct bool, st string, volatile bool) string {
	c, tname := cp.px, cp.pxT
	if direct {
		c, tname = cp.dx, cp.sub
	}
	pxOnly := strings.HasPrefix(st, "! ")
	if pxOnly && direct {
		return ""
	}
	st = strings.NewReplacer("{t}", tname, "{sub}", cp.sub).Replace(strings.TrimPrefix(st, "! "))
	if q, ok := strings.CutPrefix(st, "? "); ok {
		return corpusAnswer(ctx, c, q, cp.binary, volatile)
	}
	if _, err := c.ExecContext(ctx, st); err != nil {
		if pxOnly {
			return err.Error()
		}
		return errText(err)
	}
	return "ok"
}

// run runs c's script c.runs times on both sides of cp, compares each
// step's outcome, and checks what the cache did against c.want.
func (e *shardEnv) runCase(t *testing.T, cp *corpusPair, c corpusCase) {
	t.Helper()
	ctx := t.Context()
	if c.want == "hit" {
		// The session's own writes (earlier cases) keep it off the cache
		// until the cache has applied them (read-your-writes): on a
		// loaded machine that outlasts a whole script.
		probe := "SELECT id FROM " + cp.pxT + " WHERE id = 1"
		eventually(t, 5*time.Second, "the cache to follow the session's writes", func() bool {
			corpusAnswer(ctx, cp.px, probe, false, false)
			h := e.p.srv.Stats().Cache.Hits
			corpusAnswer(ctx, cp.px, probe, false, false)
			return e.p.srv.Stats().Cache.Hits > h
		})
	}
	before := *e.p.srv.Stats().Cache
	runs := c.runs
	if runs == 0 {
		runs = 3
	}
	for run := 1; run <= runs; run++ {
		px := make([]string, len(c.steps))
		dx := make([]string, len(c.steps))
		var served []string
		for i, st := range c.steps {
			h0 := *e.p.srv.Stats().Cache
			px[i] = cp.step(ctx, false, st, c.volatile)
			if strings.HasPrefix(st, "? ") {
				served = append(served, servedAs(h0, *e.p.srv.Stats().Cache))
			}
			if !c.sequential {
				dx[i] = cp.step(ctx, true, st, c.volatile)
			}
		}
		t.Logf("run %d: %s", run, strings.Join(served, " "))
		for i, st := range c.steps {
			if c.sequential {
				dx[i] = cp.step(ctx, true, st, c.volatile)
			}
			switch {
			case strings.HasPrefix(st, "! "):
				if px[i] != "ok" {
					t.Logf("run %d: %s through the proxy: %s", run, st, px[i])
				}
			case px[i] != dx[i]:
				t.Errorf("run %d, step %d %q differs:\nproxy:\n%s\ndirect:\n%s", run, i, st, px[i], dx[i])
			}
		}
	}
	after := *e.p.srv.Stats().Cache
	hits, fills, bypassed := after.Hits-before.Hits, after.Fills-before.Fills, after.Bypassed-before.Bypassed
	t.Logf("%s: hits %d, fills %d, bypassed %d", c.name, hits, fills, bypassed)
	switch {
	case c.want == "hit" && hits == 0:
		t.Errorf("%s: no run was served from the cache", c.name)
	case c.want == "none" && hits+fills != 0:
		t.Errorf("%s: %d hits and %d fills of statements that may not be cached", c.name, hits, fills)
	}
}

// servedAs says how the cache took a query, from its stats before and
// after: hit, fill, bypassed (looked at, not cacheable) or - (not looked
// up, or missed and not kept).
func servedAs(before, after resultcache.Stats) string {
	switch {
	case after.Hits > before.Hits:
		return "hit"
	case after.Fills > before.Fills:
		return "fill"
	case after.Bypassed > before.Bypassed:
		return "bypassed"
	}
	return "-"
}

// corpusCases are the cases on one table, in the order they run (the
// ALTER adds the TIMESTAMP column the time zone case reads).
func corpusCases() []corpusCase {
	q3 := "? SELECT id, u, c FROM {t} WHERE id = 3"
	return []corpusCase{
		{name: "point", id: 3, steps: []string{q3}, want: "hit"},
		// u is not the shard key: the statement reads every subtable, and only
		// one-target statements are kept.
		{name: "unique", id: 3, steps: []string{"? SELECT id, c FROM {t} WHERE u = 103"}},
		{name: "charset", id: 3, want: "hit", steps: []string{
			"SET NAMES latin1", "? SELECT id, c, c = 'HÉLLO wörld €' FROM {t} WHERE id = 3",
			"SET NAMES utf8mb4", "? SELECT id, c, c = 'HÉLLO wörld €' FROM {t} WHERE id = 3",
			"SET NAMES utf8mb4 COLLATE utf8mb4_bin", "? SELECT id, c, c = 'HÉLLO wörld €' FROM {t} WHERE id = 3"}},
		{name: "collation_connection, character_set_results", id: 3, steps: []string{
			"SET collation_connection = utf8mb4_bin", "? SELECT id, c, c = 'HÉLLO wörld €' FROM {t} WHERE id = 3",
			"SET collation_connection = utf8mb4_general_ci", "? SELECT id, c, c = 'HÉLLO wörld €' FROM {t} WHERE id = 3",
			"SET character_set_results = binary", "? SELECT id, c FROM {t} WHERE id = 3",
			"SET character_set_results = latin1", "? SELECT id, c FROM {t} WHERE id = 3"}},
		{name: "sql_mode", id: 3, want: "hit", steps: []string{
			"SET sql_mode = 'ANSI_QUOTES'", `? SELECT id, "c" FROM {t} WHERE id = 3`,
			"SET sql_mode = ''", `? SELECT id, "c" FROM {t} WHERE id = 3`,
			"SET sql_mode = 'PIPES_AS_CONCAT'", "? SELECT id, c || 'x' FROM {t} WHERE id = 3",
			"SET sql_mode = 'STRICT_ALL_TABLES'", "? SELECT id, c || 'x' FROM {t} WHERE id = 3"}},
		{name: "div_precision_increment", id: 1, want: "hit", steps: []string{
			"SET div_precision_increment = 0", "? SELECT AVG(u), SUM(u) / 7 FROM {t} WHERE id IN (1, 5)",
			"SET div_precision_increment = 9", "? SELECT AVG(u), SUM(u) / 7 FROM {t} WHERE id IN (1, 5)"}},
		{name: "group_concat_max_len", id: 1, want: "hit", steps: []string{
			"SET group_concat_max_len = 4", "? SELECT GROUP_CONCAT(c ORDER BY id) FROM {t} WHERE id IN (1, 5)", "? SHOW WARNINGS",
			"SET group_concat_max_len = 100000", "? SELECT GROUP_CONCAT(c ORDER BY id) FROM {t} WHERE id IN (1, 5)"}},
		{name: "functions", id: 3, volatile: true, want: "none", steps: []string{
			"? SELECT id, NOW(6), SYSDATE(6) FROM {t} WHERE id = 3", "? SELECT id, RAND() FROM {t} WHERE id = 3",
			"? SELECT id, UUID() FROM {t} WHERE id = 3", "? SELECT id, CONNECTION_ID() FROM {t} WHERE id = 3"}},
		{name: "last_insert_id", id: 3, want: "none", steps: []string{
			"? SELECT id, LAST_INSERT_ID(id + 40) FROM {t} WHERE id = 3", "? SELECT id, LAST_INSERT_ID() FROM {t} WHERE id = 3"}},
		{name: "user variable", id: 3, want: "none", steps: []string{
			"SET @v = 'a'", "? SELECT id, @v FROM {t} WHERE id = 3", "SET @v = 'b'", "? SELECT id, @v FROM {t} WHERE id = 3"}},
		{name: "locking reads", id: 3, want: "none", steps: []string{
			"? SELECT id, c FROM {t} WHERE id = 3 FOR UPDATE", "? SELECT id, c FROM {t} WHERE id = 3 LOCK IN SHARE MODE"}},
		{name: "INTO", id: 7, want: "none", steps: []string{
			"! UPDATE t SET c = 'into1' WHERE id = 7", "SELECT c FROM {t} WHERE id = 7 INTO @v", "? SELECT @v",
			"! UPDATE t SET c = 'into2' WHERE id = 7", "SELECT c FROM {t} WHERE id = 7 INTO @v", "? SELECT @v"}},
		// On the default node, where the proxy keeps a session's
		// temporary tables: t_0001 read through t is the temporary one.
		{name: "temporary table", id: 1, runs: 2, steps: []string{
			"? SELECT id, u, c FROM {t} WHERE id = 1", "? SELECT id, u, c FROM {t} WHERE id = 1",
			"! CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, u INT, c VARCHAR(40) NOT NULL)",
			"CREATE TEMPORARY TABLE {sub} (id INT PRIMARY KEY, u INT, c VARCHAR(40) NOT NULL)",
			"INSERT INTO {sub} VALUES (1, 0, 'temporary')", "? SELECT id, u, c FROM {t} WHERE id = 1",
			"DROP TEMPORARY TABLE {sub}", "? SELECT id, u, c FROM {t} WHERE id = 1"}},
		{name: "rollback", id: 3, runs: 2, sequential: true, want: "hit", steps: []string{
			"? SELECT id, c FROM {t} WHERE id = 3", "BEGIN", "UPDATE {t} SET c = 'rolled back' WHERE id = 3",
			"? SELECT id, c FROM {t} WHERE id = 3", "ROLLBACK", "? SELECT id, c FROM {t} WHERE id = 3"}},
		{name: "ALTER", id: 3, runs: 1, textOnly: true, want: "hit", steps: []string{
			"? SELECT * FROM {t} WHERE id = 3", "? SELECT * FROM {t} WHERE id = 3",
			"! ALTER TABLE t ADD COLUMN ts TIMESTAMP NULL", "? SELECT * FROM {t} WHERE id = 3",
			"! UPDATE t SET ts = '2026-06-01 12:00:00' WHERE id = 3", "? SELECT * FROM {t} WHERE id = 3", "? SELECT * FROM {t} WHERE id = 3"}},
		{name: "time_zone", id: 3, want: "hit", steps: []string{
			"SET time_zone = '+00:00'", "? SELECT id, ts FROM {t} WHERE id = 3",
			"SET time_zone = '+05:30'", "? SELECT id, ts FROM {t} WHERE id = 3"}},
		{name: "RENAME", id: 3, runs: 1, textOnly: true, steps: []string{
			"? SELECT id, c FROM {t} WHERE id = 3", "? SELECT id, c FROM {t} WHERE id = 3", "! RENAME TABLE t TO t_moved",
			"? SELECT id, c FROM {t} WHERE id = 3", "! RENAME TABLE t_moved TO t", "? SELECT id, c FROM {t} WHERE id = 3"}},
		{name: "TRUNCATE", id: 3, runs: 1, textOnly: true, steps: []string{
			"? SELECT id, c FROM {t} WHERE id = 3", "? SELECT id, c FROM {t} WHERE id = 3", "! TRUNCATE TABLE t",
			"? SELECT id, c FROM {t} WHERE id = 3", "? SELECT COUNT(*) FROM {t} WHERE id = 3",
			"? SELECT id, c FROM {t} WHERE id = 7"}},
	}
}

// TestCacheCorpus runs the corpus through the cache and directly. The
// second user, app2, has a schema without t's shard rule: its t is the
// default node's own table, which app's cached answers must not answer.
func TestCacheCorpus(t *testing.T) {
	e := newCorpusEnv(t, "rc_corpus", 8, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{User: "app2", Password: appPassword})
		cfg.Schemas = append(cfg.Schemas, config.Schema{User: "app2", Nodes: []string{"node1"}, Default: "node1"})
		cfg.BackendLogins = "app2"
	})
	defer func() { t.Logf("cache stats %+v", *e.p.srv.Stats().Cache) }()
	mustExec(t, e.app, "UPDATE t SET c = 'héllo wörld €' WHERE id = 3")
	warm := conn(t, e.app)
	eventually(t, 10*time.Second, "the cache's readers", func() bool {
		queryStrings(t, warm, "SELECT id FROM t WHERE id = 2")
		return e.p.srv.Stats().Cache.Fills > 0
	})
	for _, c := range corpusCases() {
		e.run(c.name, func(t *testing.T) { e.runCase(t, e.pair(t, e.app, c.id), c) })
	}
	for i := 1; i <= 8; i++ { // after TRUNCATE, from a session of its own (see truncateThenInsert)
		mustExec(t, e.app, fmt.Sprintf("INSERT IGNORE INTO t (id, u, c) VALUES (%d, %d, 'v%d')", i, 100+i, i))
	}
	e.run("users", func(t *testing.T) {
		mustExec(t, e.direct[0], "CREATE TABLE t (id INT PRIMARY KEY, u INT, c VARCHAR(40) NOT NULL)", "INSERT INTO t VALUES (1, 999, 'app2 reads this')")
		app2 := openDB(t, userDSN("app2", appPassword, e.p.addr, e.db, ""))
		q := "? SELECT id, u, c FROM {t} WHERE id = 1"
		e.appCached(t, q)
		cp := &corpusPair{px: conn(t, app2), dx: conn(t, e.direct[0]), pxT: "t", sub: "t"}
		e.runCase(t, cp, corpusCase{name: "app2", steps: []string{q, "? SELECT id, u, c FROM {t} WHERE id = 3"}})
	})
	e.run("users with different grants", func(t *testing.T) { e.grants(t) })
	e.run("cascade", func(t *testing.T) { e.cascade(t) })
	// The binary protocol: the same cases, their queries prepared.
	for _, c := range corpusCases() {
		if !c.textOnly {
			e.run("binary "+c.name, func(t *testing.T) {
				cp := e.pair(t, e.app, c.id)
				cp.binary = true
				e.runCase(t, cp, c)
			})
		}
	}
	e.run("warnings after a hit", func(t *testing.T) { e.warningsAfterHit(t) })
	e.run("TRUNCATE then INSERT", func(t *testing.T) { e.truncateThenInsert(t) })
}

// appCached runs corpus step q as app until the cache answers it.
func (e *shardEnv) appCached(t *testing.T, q string) {
	t.Helper()
	app := e.pair(t, e.app, 1)
	eventually(t, 5*time.Second, "app's answer in the cache", func() bool {
		h := e.p.srv.Stats().Cache.Hits
		e.runCase(t, app, corpusCase{name: "app", steps: []string{q}})
		return e.p.srv.Stats().Cache.Hits > h
	})
}

// grants: MariaDB accounts with different privileges on node1's own t
// (as "users" made it), logged in through the proxy as themselves
// (backend_logins), read what they read directly: the whole row, or the
// column they may read and error 1143 for the others; app's answer to
// the same text, kept by the cache, answers none of them, and their
// sessions, on connections of their own, keep nothing.
func (e *shardEnv) grants(t *testing.T) {
	accounts := [][2]string{{"rc_ro", "ro-pw"}, {"rc_idonly", "id-pw"}}
	for _, a := range accounts {
		mustExec(t, e.direct[0], fmt.Sprintf("CREATE USER IF NOT EXISTS %s IDENTIFIED BY '%s'", a[0], a[1]))
	}
	t.Cleanup(func() {
		for _, a := range accounts {
			e.direct[0].Exec("DROP USER IF EXISTS " + a[0])
		}
	})
	mustExec(t, e.direct[0], "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY, u INT, c VARCHAR(40) NOT NULL)",
		"INSERT IGNORE INTO t VALUES (1, 999, 'app2 reads this')",
		"GRANT SELECT ON "+e.db+".t TO rc_ro", "GRANT SELECT (id) ON "+e.db+".t TO rc_idonly")
	q := "? SELECT id, u, c FROM {t} WHERE id = 1"
	e.appCached(t, q)
	for _, a := range accounts {
		px := openDB(t, userDSN(a[0], a[1], e.p.addr, e.db, ""))
		dx := openDB(t, userDSN(a[0], a[1], e.servers[0].Addr, e.db, ""))
		cp := &corpusPair{px: conn(t, px), dx: conn(t, dx), pxT: "t", sub: "t"}
		e.runCase(t, cp, corpusCase{name: a[0], want: "none", steps: []string{q, "? SELECT id FROM {t} WHERE id = 1", "? SELECT c FROM {t} WHERE id = 1"}})
	}
}

// warningsAfterHit: SHOW WARNINGS after a statement the cache answered
// says what MariaDB says after that statement: nothing.
func (e *shardEnv) warningsAfterHit(t *testing.T) {
	// Before 96c8b33+1, the text protocol's SHOW WARNINGS after a hit
	// returned the warnings of the statement before it (1260).
	e.runCase(t, e.pair(t, e.app, 1), corpusCase{name: "warnings", want: "hit", steps: []string{
		"SET group_concat_max_len = 4", "? SELECT GROUP_CONCAT(c ORDER BY id) FROM {t} WHERE id IN (1, 5)", "? SHOW WARNINGS",
		"SET group_concat_max_len = 100000", "? SELECT GROUP_CONCAT(c ORDER BY id) FROM {t} WHERE id IN (1, 5)", "? SHOW WARNINGS"}})
}

// truncateThenInsert: a session whose fill ran on node2 and which then
// truncates t must still be able to write on node1, as it can without
// the cache (it got 1235, "the session holds state on node node2", until
// 96c8b33: MariaDB reports the return of NOWAIT's lock wait timeouts
// with the next statement on that connection).
func (e *shardEnv) truncateThenInsert(t *testing.T) {
	c := conn(t, e.app)
	queryStrings(t, c, "SELECT id, c FROM t WHERE id = 3")
	mustExec(t, c, "TRUNCATE TABLE t", "INSERT INTO t (id, u, c) VALUES (1, 101, 'v1')")
}

// cascade: t's subtable that holds row 3 becomes the child of a parent
// table whose ON DELETE CASCADE removes the row. MariaDB does not write
// cascaded child rows to the binary log, so the cache must not keep the
// child's answers: no hit once the cache could have seen the foreign key
// (max_staleness after the ALTER), and the row is gone as soon as the
// parent's delete is acknowledged.
func (e *shardEnv) cascade(t *testing.T) {
	node, sub := e.home(t, 3)
	d := e.direct[node]
	c := conn(t, e.app)
	const q = "SELECT id, u, c FROM t WHERE id = 3"
	hit := func() bool {
		h := e.p.srv.Stats().Cache.Hits
		queryStrings(t, c, q)
		return e.p.srv.Stats().Cache.Hits > h
	}
	eventually(t, 5*time.Second, "a hit of the row before the foreign key", hit)
	mustExec(t, d, "CREATE TABLE par (id INT PRIMARY KEY)", "INSERT INTO par SELECT u FROM "+sub,
		"ALTER TABLE "+sub+" ADD CONSTRAINT fk_par FOREIGN KEY (u) REFERENCES par (id) ON DELETE CASCADE")
	defer func() { // t as it was, for the cases after this one
		mustExec(t, d, "ALTER TABLE "+sub+" DROP FOREIGN KEY fk_par", "DROP TABLE par")
		mustExec(t, e.app, "INSERT IGNORE INTO t (id, u, c) VALUES (3, 103, 'v3')")
		eventually(t, 5*time.Second, "hits again without the foreign key", hit)
	}()
	acked, bound := time.Now(), e.p.cfg.Cache.MaxStaleness
	hits := 0
	for time.Since(acked) < bound+200*time.Millisecond {
		started := time.Now()
		if hit() && started.Sub(acked) > bound {
			hits++
		}
	}
	if hits > 0 {
		t.Errorf("%q was served from the cache %d times more than max_staleness (%v) after %s got a cascading foreign key", q, hits, bound, sub)
	}
	u := queryValue(t, d, "SELECT u FROM "+sub+" WHERE id = 3")
	mustExec(t, d, "DELETE FROM par WHERE id = "+u)
	if got := queryStrings(t, c, q); len(got) != 0 {
		t.Errorf("BUG: %q still answers %v after DELETE FROM par WHERE id = %s cascaded to it: the binary log has no event for cascaded child rows", q, got, u)
	}
}
