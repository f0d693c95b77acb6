package server_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// TestExactCallWithCursor: a procedure that opens a cursor inside makes
// MariaDB set SERVER_STATUS_CURSOR_EXISTS on the EOF of the result it
// returns. The relay took that for a binary-protocol cursor and stopped
// reading: CALL p1() never returned (mtr's sp-cursor and others timed out).
// Now the flag means a cursor only for an execution that asked for one;
// the CALL returns its row and its final OK within the 10 s bound, with
// and without CLIENT_DEPRECATE_EOF.
func TestExactCallWithCursor(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "exact_t")
	direct := openDB(t, directDSN(s, "exact_t", ""))
	mustExec(t, direct, "CREATE TABLE t (a INT)", "INSERT INTO t VALUES (7)",
		"CREATE PROCEDURE p1() BEGIN DECLARE x INT; DECLARE c CURSOR FOR SELECT a FROM t; OPEN c; FETCH c INTO x; CLOSE c; SELECT x; END")
	for _, caps := range []uint32{rawCaps, rawCaps &^ mysql.ClientDeprecateEOF} {
		r := dialRaw(t, p.addr)
		r.loginDB("exact_t", caps)
		r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		r.command(append([]byte{mysql.ComQuery}, "CALL p1()"...))
		if p := r.read(); len(p) == 0 || p[0] != 1 {
			t.Fatalf("caps %#x: got %s, want a result with one column", caps, describe(p))
		}
		r.read() // the column
		if caps&mysql.ClientDeprecateEOF == 0 {
			r.read() // EOF after the columns
		}
		if row := r.read(); string(row) != "\x017" {
			t.Fatalf("caps %#x: row %q, want 7", caps, row)
		}
		end := r.read() // EOF or OK of the result, more results to come
		if st, ok := mysql.ResultStatus(end); !ok || st&mysql.StatusMoreResultsExists == 0 {
			t.Fatalf("caps %#x: end of the result %s, want more results", caps, describe(end))
		}
		r.expectOK() // the CALL's own result
		r.command([]byte{mysql.ComPing})
		r.expectOK()
	}
}

// TestExactCommentsOnly: a statement made only of comments, and text that
// starts with no keyword, get the server's own answer (the proxy used to
// answer 1065 to both): the same as on MariaDB directly.
func TestExactCommentsOnly(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "exact_t")
	proxied := conn(t, openDB(t, p.dsn("exact_t", "")))
	direct := conn(t, openDB(t, directDSN(s, "exact_t", "")))
	for _, q := range []string{"/* x */", "/*!*/", "-- x\n", "# x\n", "@arg00 a from t1", "   "} {
		got, want := outcome(t, proxied, q), outcome(t, direct, q)
		if got != want {
			t.Errorf("%q: proxy %s, MariaDB %s", q, got, want)
		}
	}
}

// TestExactChain: COMMIT/ROLLBACK AND CHAIN start a new transaction with
// the same access mode, and RELEASE ends the connection after the answer,
// as on MariaDB directly (the proxy used to refuse them with 1235).
func TestExactChain(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "exact_t")
	direct := openDB(t, directDSN(s, "exact_t", ""))
	mustExec(t, direct, "CREATE TABLE c (id INT PRIMARY KEY)")
	sequences := [][]string{
		{"BEGIN", "INSERT INTO c VALUES (1)", "COMMIT AND CHAIN", "INSERT INTO c VALUES (2)", "ROLLBACK", "SELECT COUNT(*) FROM c"},
		{"BEGIN", "INSERT INTO c VALUES (3)", "ROLLBACK WORK AND CHAIN", "INSERT INTO c VALUES (4)", "COMMIT AND NO CHAIN", "SELECT COUNT(*) FROM c"},
		{"START TRANSACTION READ ONLY", "COMMIT AND CHAIN", "INSERT INTO c VALUES (5)", "ROLLBACK", "SELECT COUNT(*) FROM c"},
		{"BEGIN", "INSERT INTO c VALUES (6)", "COMMIT NO RELEASE", "SELECT COUNT(*) FROM c"},
		{"BEGIN", "INSERT INTO c VALUES (7)", "COMMIT RELEASE", "SELECT 1"},
		{"COMMIT AND CHAIN RELEASE"},
	}
	run := func(c *sql.Conn, seq []string) []string {
		var out []string
		for _, q := range seq {
			out = append(out, outcome(t, c, q))
		}
		return out
	}
	for _, seq := range sequences {
		mustExec(t, direct, "DELETE FROM c")
		want := run(conn(t, direct), seq)
		mustExec(t, direct, "DELETE FROM c")
		got := run(conn(t, openDB(t, p.dsn("exact_t", ""))), seq)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%q:\n proxy   %q\n MariaDB %q", seq, got, want)
		}
	}
}

// TestExactPreparedCompound: a prepared BEGIN NOT ATOMIC ... END is a
// compound statement, not a transaction: it was refused (1235) and now
// runs on the backend like on MariaDB, as text and prepared.
func TestExactPreparedCompound(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "exact_t")
	const q = "BEGIN NOT ATOMIC DECLARE x INT DEFAULT 41; SELECT x + 1; END"
	db := openDB(t, p.dsn("exact_t", ""))
	for _, args := range [][]any{nil, {}} {
		var v int
		var err error
		if args == nil {
			err = db.QueryRow(q).Scan(&v) // text
		} else {
			st, perr := db.Prepare(q) // binary
			if perr != nil {
				t.Fatalf("prepare: %v", perr)
			}
			err = st.QueryRow().Scan(&v)
			st.Close()
		}
		if err != nil || v != 42 {
			t.Errorf("%s (prepared %v): %d, %v", q, args != nil, v, err)
		}
	}
}

// TestExactSetNames: SET NAMES after the character set variables were
// changed another way (collation_connection, or a SET NAMES of a character
// set the proxy does not know) takes effect on the server, as directly:
// the proxy used to keep what it believed and leave utf16 or koi8r there.
func TestExactSetNames(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "exact_t")
	const probe = "SELECT CONCAT_WS(',', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"
	for _, seq := range [][]string{
		{"SET collation_connection = utf16_general_ci", "SET NAMES latin1"},
		{"SET NAMES koi8r", "SET NAMES latin1"},
		{"SET NAMES koi8r", "SET NAMES utf8mb4"},
		{"SET character_set_results = NULL", "SET NAMES utf8mb4"},
		{"SET NAMES latin1", "SET CHARACTER SET utf8mb4", "SET NAMES latin1"},
	} {
		pdb, ddb := openDB(t, p.dsn("exact_t", "")), openDB(t, directDSN(s, "exact_t", ""))
		proxied, direct := conn(t, pdb), conn(t, ddb)
		mustExec(t, proxied, seq...)
		mustExec(t, direct, seq...)
		if got, want := queryValue(t, proxied, probe), queryValue(t, direct, probe); got != want {
			t.Errorf("%q: proxy %s, MariaDB %s", seq, got, want)
		}
		proxied.Close()
		direct.Close()
		pdb.Close() // ends the proxy session and frees its pinned connection
		ddb.Close()
	}
}
