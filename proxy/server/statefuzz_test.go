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

var stateFuzzTime = flag.Duration("statefuzz", 4*time.Second, "how long TestStateFuzz runs (go test -run TestStateFuzz -statefuzz=10m ./proxy/server for a soak)")

// fuzzVar is a session variable MariaDB lets a client set.
type fuzzVar struct {
	name, typ string
	enum      []string
}

// notCompared are session variables whose values differ between a proxy
// session and a direct one for reasons other than isolation: the proxy's
// session trackers, values tied to the connection or the moment.
var notCompared = map[string]bool{
	"SESSION_TRACK_STATE_CHANGE": true, "SESSION_TRACK_SCHEMA": true, "SESSION_TRACK_SYSTEM_VARIABLES": true,
	"SESSION_TRACK_TRANSACTION_INFO": true, "PSEUDO_THREAD_ID": true, "TIMESTAMP": true, "LAST_INSERT_ID": true,
	"INSERT_ID": true, "IDENTITY": true, "RAND_SEED1": true, "RAND_SEED2": true, "WARNING_COUNT": true,
	"ERROR_COUNT": true, "LAST_GTID": true, "GTID_SEQ_NO": true, "IN_TRANSACTION": true,
}

// fuzzSkip are variables the fuzzer does not set: they end or break the
// connection or the server for everyone (timeouts, debugging), need a
// value the generator cannot make, or are refused by the proxy's policy.
var fuzzSkip = map[string]bool{
	"WAIT_TIMEOUT": true, "INTERACTIVE_TIMEOUT": true, "NET_READ_TIMEOUT": true, "NET_WRITE_TIMEOUT": true,
	"MAX_STATEMENT_TIME": true, "LOCK_WAIT_TIMEOUT": true, "INNODB_LOCK_WAIT_TIMEOUT": true, "DEBUG": true,
	"DEBUG_DBUG": true, "SQL_LOG_BIN": true, "SQL_LOG_OFF": true, "PSEUDO_SLAVE_MODE": true, "PSEUDO_THREAD_ID": true,
	"SESSION_TRACK_STATE_CHANGE": true, "SESSION_TRACK_SCHEMA": true, "SESSION_TRACK_SYSTEM_VARIABLES": true,
	"SESSION_TRACK_TRANSACTION_INFO": true, "TIMESTAMP": true, "RAND_SEED1": true, "RAND_SEED2": true,
	"INSERT_ID": true, "LAST_INSERT_ID": true, "IDENTITY": true, "GTID_SEQ_NO": true, "GTID_DOMAIN_ID": true,
	"SERVER_ID": true, "SKIP_REPLICATION": true, "WSREP_ON": true, "WSREP_OSU_METHOD": true, "WSREP_SYNC_WAIT": true,
	"WSREP_CAUSAL_READS": true, "WSREP_DIRTY_READS": true, "WSREP_RETRY_AUTOCOMMIT": true, "WSREP_TRX_FRAGMENT_SIZE": true,
	"WSREP_TRX_FRAGMENT_UNIT": true, "SQL_SAFE_UPDATES": true, "MAX_JOIN_SIZE": true, "SQL_BIG_SELECTS": true,
	"SQL_SELECT_LIMIT": true, "IN_PREDICATE_CONVERSION_THRESHOLD": true, "CHARACTER_SET_RESULTS": true,
	"CHARACTER_SET_CLIENT": true, "CHARACTER_SET_CONNECTION": true, "COLLATION_CONNECTION": true,
	"LOG_SLOW_FILTER": true, "SQL_MODE": true, "OPTIMIZER_SWITCH": true, "OPTIMIZER_TRACE": true,
	"OLD_MODE": true, "LOG_DISABLED_STATEMENTS": true, "LOG_SLOW_DISABLED_STATEMENTS": true, "DEFAULT_STORAGE_ENGINE": true,
	"DEFAULT_TMP_STORAGE_ENGINE": true, "ENFORCE_STORAGE_ENGINE": true, "SQL_IF_EXISTS": true, "OLD_PASSWORDS": true,
	"PROFILING": true, "PROFILING_HISTORY_SIZE": true, "SLOW_QUERY_LOG": true, "GENERAL_LOG": true,
	// A limit on the connection's memory, which differs through the proxy
	// (it caches prepared statements on pooled connections).
	"MAX_SESSION_MEM_USED": true,
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
	const sessions = 3
	var ps []*pair
	for i := range sessions {
		x := &pair{rng: rand.New(rand.NewPCG(uint64(i), 42))}
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
		rows, err := c.QueryContext(t.Context(), "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES ORDER BY 1")
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
		err = c.QueryRowContext(t.Context(), "SELECT CONCAT_WS(',', IFNULL(@u0,'-'), IFNULL(@u1,'-'), IFNULL(@u2,'-'), LAST_INSERT_ID(), @@in_transaction)").Scan(&extra)
		if err != nil {
			return "", err
		}
		var tmp string
		if err := c.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM fuzz_t.fuzz_tmp").Scan(&tmp); err != nil {
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
	rng := rand.New(rand.NewPCG(7, 7))
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
