package server_test

import (
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

var stateFuzzSeed = flag.Uint64("statefuzz.seed", 0, "TestStateFuzz's random seed (0: a new one each run, logged)")

var stateFuzzTime = flag.Duration("statefuzz", 4*time.Second, "how long TestStateFuzz runs (go test -run TestStateFuzz -statefuzz=10m ./proxy/server for a soak)")

// fuzzVar is a session variable MariaDB lets a client set.
type fuzzVar struct {
	name, typ string
	enum      []string
}

// notCompared are session variables whose values differ between a proxy
// session and a direct one for reasons other than isolation: the proxy's
// session trackers (it turns them on for every pooled connection),
// values tied to the connection (its thread id, its random seeds), or to
// the moment
// (TIMESTAMP is compared through the probe instead: "now" or the value
// set).
var notCompared = map[string]bool{
	"SESSION_TRACK_STATE_CHANGE": true, "SESSION_TRACK_SCHEMA": true, "SESSION_TRACK_SYSTEM_VARIABLES": true,
	"SESSION_TRACK_TRANSACTION_INFO": true, "PSEUDO_THREAD_ID": true, "TIMESTAMP": true,
	"LAST_GTID": true, "IN_TRANSACTION": true, "RAND_SEED1": true, "RAND_SEED2": true,
}

// fuzzValues are the values the fuzzer sets for variables whose type
// alone does not give a useful one: a timeout of 1 would close the
// connection under the fuzzer, a max_join_size of 1 fails its probe, a
// free-form list or name needs a real entry.
var fuzzValues = map[string][]string{
	"WAIT_TIMEOUT": {"3600", "28800"}, "INTERACTIVE_TIMEOUT": {"3600", "28800"},
	"NET_READ_TIMEOUT": {"30", "60"}, "NET_WRITE_TIMEOUT": {"30", "90"},
	"MAX_STATEMENT_TIME": {"0", "100.5"}, "LOCK_WAIT_TIMEOUT": {"60", "86400"}, "INNODB_LOCK_WAIT_TIMEOUT": {"10", "50"},
	"MAX_JOIN_SIZE": {"1000000000", "18446744073709551615"}, "SQL_SELECT_LIMIT": {"1", "5", "18446744073709551615"},
	"MAX_SESSION_MEM_USED":     {"9223372036854775807", "1000000000"},
	"CHARACTER_SET_RESULTS":    {"'utf8mb4'", "'latin1'", "'utf8mb3'", "NULL", "'binary'"},
	"CHARACTER_SET_CLIENT":     {"'utf8mb4'", "'latin1'", "'utf8mb3'", "'ascii'"},
	"CHARACTER_SET_CONNECTION": {"'utf8mb4'", "'latin1'", "'utf8mb3'", "'ucs2'"},
	"COLLATION_CONNECTION":     {"'utf8mb4_general_ci'", "'utf8mb4_unicode_ci'", "'utf8mb4_bin'", "'latin1_swedish_ci'", "'latin1_bin'"},
	"SQL_MODE":                 {"''", "'ANSI_QUOTES'", "'NO_BACKSLASH_ESCAPES'", "'ANSI'", "'PIPES_AS_CONCAT,STRICT_ALL_TABLES'", "'TRADITIONAL'", "'ORACLE'", "'HIGH_NOT_PRECEDENCE,IGNORE_SPACE'"},
	"OLD_MODE":                 {"''", "'NO_PROGRESS_INFO'", "'ZERO_DATE_TIME_CAST,NO_DUP_KEY_WARNINGS_WITH_IGNORE'"},
	"OPTIMIZER_SWITCH":         {"'index_merge=off'", "'mrr=on,mrr_sort_keys=on'", "'derived_merge=off'"},
	"OPTIMIZER_TRACE":          {"'enabled=on'", "'enabled=off'"},
	"LOG_SLOW_FILTER":          {"'admin'", "'filesort,full_scan'", "''"},
	"LOG_DISABLED_STATEMENTS":  {"'sp'", "'slave,sp'", "''"}, "LOG_SLOW_DISABLED_STATEMENTS": {"'admin,call'", "'sp'", "''"},
	"DEFAULT_STORAGE_ENGINE": {"'MyISAM'", "'InnoDB'", "'Aria'"}, "DEFAULT_TMP_STORAGE_ENGINE": {"'MyISAM'", "'Aria'", "NULL"},
	"ENFORCE_STORAGE_ENGINE": {"'InnoDB'", "NULL"},
	"TIMESTAMP":              {"1700000000", "1700000000.123456"}, "RAND_SEED1": {"1", "123456"}, "RAND_SEED2": {"7", "654321"},
	"INSERT_ID": {"5", "1000"}, "LAST_INSERT_ID": {"7", "77"}, "IDENTITY": {"9", "99"},
	"PSEUDO_THREAD_ID": {"12345", "7"}, "GTID_SEQ_NO": {"1000000"}, "GTID_DOMAIN_ID": {"0", "7"}, "SERVER_ID": {"@@SESSION.server_id", "4242"},
	"SESSION_TRACK_SYSTEM_VARIABLES": {"''", "'autocommit'", "'*'"}, "SESSION_TRACK_TRANSACTION_INFO": {"'OFF'", "'STATE'", "'CHARACTERISTICS'"},
	"IN_PREDICATE_CONVERSION_THRESHOLD": {"0", "1000"}, "PROFILING_HISTORY_SIZE": {"0", "15", "100"},
}

// fuzzSkip are the variables the fuzzer does not set, each for a reason
// (MariaDB 10.11 as packaged lists none of them as a writable session
// variable; the list is for servers that do):
var fuzzSkip = map[string]bool{
	// only in debug builds of the server, where they can crash it;
	"DEBUG": true, "DEBUG_DBUG": true,
	// for replaying a binary log: the server refuses it outside one.
	"PSEUDO_SLAVE_MODE": true,
}

// TestStateFuzz: random sequences of state-changing statements from many
// sessions over a pool of two backend connections. After every statement
// the session compares every session variable it can see, its user
// variables, its temporary table, its lock and its transaction with a
// direct connection to MariaDB that ran the same sequence: what one client
// does must never show in another, and a client's own state must follow it
// from one pooled connection to the next. Runs for -statefuzz (4s by
// default; longer as a soak).
func TestStateFuzz(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.Nodes[0].MaxConnsLimit = 2
	cfg.Backend.AcquireTimeout = 50 * time.Millisecond
	// The policy (tested on its own in TestAttackPolicy) is off so that
	// the statements it refuses are fuzzed too: sql_log_bin, ...
	cfg.DenyStatements = nil
	p := startProxy(t, cfg)
	dbSetup(t, s, "fuzz_t")
	direct := openDB(t, directDSN(s, "fuzz_t", ""))

	var vars []fuzzVar
	rows, err := direct.QueryContext(t.Context(), "SELECT VARIABLE_NAME, VARIABLE_TYPE, IFNULL(ENUM_VALUE_LIST, '') FROM information_schema.SYSTEM_VARIABLES WHERE VARIABLE_SCOPE = 'SESSION' AND READ_ONLY = 'NO' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v fuzzVar
		var enum string
		if err := rows.Scan(&v.name, &v.typ, &enum); err != nil {
			t.Fatal(err)
		}
		if enum != "" {
			v.enum = strings.Split(enum, ",")
		}
		if !fuzzSkip[v.name] {
			vars = append(vars, v)
		}
	}
	rows.Close()
	if len(vars) < 100 {
		t.Fatalf("only %d session variables to fuzz", len(vars))
	}
	t.Logf("%d writable session variables", len(vars))

	// A pair is one client session through the proxy and its twin, a
	// direct connection that runs the same statements. Pairs end after a
	// random number of steps (so the pool's two connections, which
	// sessions holding state keep, come free again) and are replaced.
	type pair struct {
		name          string
		pdb, ddb      *sql.DB
		proxy, direct *sql.Conn
		rng           *rand.Rand
		steps         []string
	}
	gen := 0
	open := func(x *pair) {
		gen++
		x.name = fmt.Sprintf("g%d", gen)
		x.pdb, x.ddb = openDB(t, p.dsn("", "")), openDB(t, directDSN(s, "", ""))
		x.proxy, x.direct = conn(t, x.pdb), conn(t, x.ddb)
		x.steps = nil
	}
	closePair := func(x *pair) {
		x.proxy.Close()
		x.direct.Close()
		x.pdb.Close()
		x.ddb.Close()
	}
	seed := *stateFuzzSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-args -statefuzz.seed=%d repeats the draws; timing may still differ)", seed, seed)
	const sessions = 3
	var ps []*pair
	for i := range sessions {
		x := &pair{rng: rand.New(rand.NewPCG(uint64(i), seed))}
		open(x)
		ps = append(ps, x)
	}
	// statement draws the next state-changing statement of session x.
	statement := func(x *pair) string {
		r := x.rng
		lock := "fuzz_lock_" + x.name + "_{side}"
		switch r.IntN(14) {
		case 0, 1, 2, 3: // a session system variable, by every SET spelling
			v := vars[r.IntN(len(vars))]
			val := "DEFAULT"
			switch {
			case len(fuzzValues[v.name]) > 0:
				if r.IntN(4) > 0 { // DEFAULT a quarter of the time
					val = fuzzValues[v.name][r.IntN(len(fuzzValues[v.name]))]
				}
			case len(v.enum) > 0 && v.typ != "SET" && v.typ != "FLAGSET":
				val = "'" + v.enum[r.IntN(len(v.enum))] + "'"
			case v.typ == "BOOLEAN":
				val = []string{"0", "1"}[r.IntN(2)]
			case strings.Contains(v.typ, "INT") && r.IntN(2) == 0:
				val = "@@SESSION." + v.name + " + 1"
			}
			return []string{
				"SET SESSION " + v.name + " = " + val,
				"SET @@" + v.name + " = " + val,
				"SET @u" + strconv.Itoa(r.IntN(3)) + " = 1, @@SESSION." + v.name + " = " + val,
				"SET @u0 = 2 /*M!, SESSION " + v.name + " = " + val + " */",
			}[r.IntN(4)]
		case 4:
			return fmt.Sprintf("SET @u%d = %d", r.IntN(3), r.IntN(100))
		case 5:
			return fmt.Sprintf("SELECT %d INTO @u%d", r.IntN(100), r.IntN(3))
		case 6:
			return []string{"SET NAMES latin1", "SET NAMES utf8mb4", "SET CHARACTER SET utf8mb4", "SET sql_mode = 'ANSI_QUOTES'", "SET sql_mode = DEFAULT", "SET time_zone = '+02:00'"}[r.IntN(6)]
		case 7:
			return []string{"SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"}[r.IntN(3)]
		case 8:
			return []string{"CREATE TEMPORARY TABLE IF NOT EXISTS fuzz_t.fuzz_tmp (a INT)", "DROP TEMPORARY TABLE IF EXISTS fuzz_t.fuzz_tmp", "INSERT INTO fuzz_t.fuzz_tmp VALUES (1)"}[r.IntN(3)]
		case 9:
			return []string{"DO GET_LOCK('" + lock + "', 0)", "DO RELEASE_LOCK('" + lock + "')"}[r.IntN(2)]
		case 10:
			return []string{"BEGIN", "COMMIT", "ROLLBACK", "SET autocommit = 0", "SET autocommit = 1"}[r.IntN(5)]
		case 11:
			return fmt.Sprintf("SELECT LAST_INSERT_ID(%d)", r.IntN(100))
		case 12:
			return []string{"PREPARE fuzz_s FROM 'SELECT 1'", "DEALLOCATE PREPARE fuzz_s"}[r.IntN(2)]
		default:
			return "SELECT 1"
		}
	}
	// probe reads what a session sees of its state.
	probe := func(t *testing.T, c *sql.Conn, lock string) (string, error) {
		rows, err := c.QueryContext(t.Context(), "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES ORDER BY 1 LIMIT 100000")
		if err != nil {
			return "", err
		}
		var out []string
		for rows.Next() {
			var n, v sql.NullString
			if err := rows.Scan(&n, &v); err != nil {
				rows.Close()
				return "", err
			}
			if !notCompared[n.String] {
				out = append(out, n.String+"="+v.String)
			}
		}
		rows.Close()
		var extra string
		err = c.QueryRowContext(t.Context(), "SELECT CONCAT_WS(',', IFNULL(@u0,'-'), IFNULL(@u1,'-'), IFNULL(@u2,'-'), LAST_INSERT_ID(), @@in_transaction, "+
			"IF(ABS(@@timestamp - UNIX_TIMESTAMP(SYSDATE(6))) < 30, 'now', @@timestamp)) LIMIT 1").Scan(&extra)
		if err != nil {
			return "", err
		}
		var tmp string
		if err := c.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM fuzz_t.fuzz_tmp LIMIT 1").Scan(&tmp); err != nil {
			tmp = "none"
		}
		var held string
		if err := direct.QueryRowContext(t.Context(), "SELECT IS_USED_LOCK(?) IS NOT NULL", lock).Scan(&held); err != nil {
			return "", err
		}
		return strings.Join(out, "\n") + "\nextra=" + extra + "\ntmp=" + tmp + "\nlock=" + held, nil
	}
	deadline := time.Now().Add(*stateFuzzTime)
	steps, busy := 0, 0
	rng := rand.New(rand.NewPCG(7, seed))
	for time.Now().Before(deadline) {
		x := ps[rng.IntN(len(ps))]
		q := statement(x)
		x.steps = append(x.steps, q)
		_, perr := x.proxy.ExecContext(t.Context(), strings.ReplaceAll(q, "{side}", "p"))
		if isSQLError(perr, 1040) {
			// Every pooled connection is held by sessions with state: end
			// this one (its twin ran nothing yet) and go on.
			busy++
			for _, y := range []*pair{x, ps[rng.IntN(len(ps))]} {
				closePair(y)
				open(y)
			}
			continue
		}
		_, derr := x.direct.ExecContext(t.Context(), strings.ReplaceAll(q, "{side}", "d"))
		if (perr == nil) != (derr == nil) {
			t.Fatalf("%s step %d %q: through the proxy %v, directly %v\nsequence: %q", x.name, len(x.steps), q, perr, derr, x.steps)
		}
		lock := "fuzz_lock_" + x.name + "_"
		got, err := probe(t, x.proxy, lock+"p")
		if isSQLError(err, 1040) {
			busy++
			for _, y := range []*pair{x, ps[rng.IntN(len(ps))]} {
				closePair(y)
				open(y)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: probe through the proxy: %v\nsequence: %q", x.name, err, x.steps)
		}
		want, err := probe(t, x.direct, lock+"d")
		if err != nil {
			t.Fatalf("%s: probe directly: %v", x.name, err)
		}
		if got != want {
			t.Fatalf("%s after %q differs from a direct session:\n%s\nsequence: %q", x.name, q, diffLines(got, want), x.steps)
		}
		steps++
		if x.rng.IntN(8) == 0 {
			closePair(x)
			open(x)
		}
	}
	t.Logf("%d statements over %d sessions at a time (%d in all) and 2 pooled connections; %d waits for a free connection", steps, sessions, gen, busy)
}

// diffLines lists the lines of got and want that differ.
func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			out = append(out, fmt.Sprintf("  proxy:  %s\n  direct: %s", a, b))
		}
	}
	return strings.Join(out, "\n")
}
