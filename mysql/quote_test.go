package mysql

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/internal/mariadbtest"
)

func TestQuoteString(t *testing.T) {
	for _, tc := range []struct {
		s, charset, want string
	}{
		{"", "", "''"},
		{"abc", "", "'abc'"},
		{"it's", "", "'it''s'"},
		{"''", "utf8mb4", "_utf8mb4 ''''''"},
		{"é", "utf8mb4", "_utf8mb4 'é'"},
		{`a\b`, "", "X'615C62'"},
		{"a\x00", "binary", "_binary X'6100'"},
		{"\xff", "", "X'FF'"},
		{"a\nb\x1a", "", "'a\nb\x1a'"},
	} {
		if got := QuoteString(tc.s, tc.charset); got != tc.want {
			t.Errorf("QuoteString(%q, %q) = %q, want %q", tc.s, tc.charset, got, tc.want)
		}
	}
	if got := string(AppendQuoted([]byte("x = "), "a'b", "")); got != "x = 'a''b'" {
		t.Errorf("AppendQuoted = %q", got)
	}
}

func TestQuoteIdent(t *testing.T) {
	for s, want := range map[string]string{"t": "`t`", "a`b": "`a``b`", "``": "``````", "": "``", "a.b": "`a.b`"} {
		if got := QuoteIdent(s); got != want {
			t.Errorf("QuoteIdent(%q) = %q, want %q", s, got, want)
		}
	}
}

// quoteModes are the sql_modes the fuzz targets read every literal and
// name under: the default, and the two that change how quotes and
// backslashes are read.
var quoteModes = []string{"", "NO_BACKSLASH_ESCAPES,ANSI_QUOTES"}

// quoteDSNEnv carries the fuzzing coordinator's server to its worker
// processes (they inherit its environment): one server, not one per
// worker.
const quoteDSNEnv = "SHARDGATE_QUOTE_FUZZ_DSN"

var quoteServer struct {
	once    sync.Once
	dsn     string
	err     error
	cluster *mariadbtest.Cluster // started here; stopped by TestMain
}

// stopQuoteServer stops the server quoteDB started, if any.
func stopQuoteServer() {
	if c := quoteServer.cluster; c != nil {
		c.Stop()
	}
}

// quoteDB returns one connection per quoteModes entry, each with its
// sql_mode, to a MariaDB server: the coordinator's (quoteDSNEnv) when
// fuzzing in a worker, otherwise one started for this process on first
// use and stopped by TestMain. Under -short it returns nil.
func quoteDB(f *testing.F) []*sql.Conn {
	if testing.Short() {
		return nil
	}
	quoteServer.once.Do(func() {
		if dsn := os.Getenv(quoteDSNEnv); dsn != "" {
			quoteServer.dsn = dsn
			return
		}
		c, err := mariadbtest.Start("", 1)
		if err != nil {
			quoteServer.err = err
			return
		}
		quoteServer.cluster = c
		quoteServer.dsn = c.Servers[0].DSN("") + "&charset=utf8mb4"
		os.Setenv(quoteDSNEnv, quoteServer.dsn)
	})
	if quoteServer.err != nil {
		f.Fatalf("MariaDB for the round trip (go test -short skips it): %v", quoteServer.err)
	}
	db, err := sql.Open("mysql", quoteServer.dsn)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	var conns []*sql.Conn
	for _, mode := range quoteModes {
		c, err := db.Conn(context.Background())
		if err != nil {
			f.Fatal(err)
		}
		if _, err := c.ExecContext(context.Background(), "SET SESSION sql_mode = '"+mode+"'"); err != nil {
			f.Fatal(err)
		}
		conns = append(conns, c)
	}
	return conns
}

var quoteSeeds = []string{"", "a", "it's", "'", `\`, `\'`, `a\\'b`, "\x00", "\\0", "\xff\xfe", "é", "😀", "\xe2\x82", "\xc3'", "\x1a", "\n\r\t", "``", "a`b", `"`, "--", "/*", "?", "%_", strings.Repeat("x'", 100)}

// FuzzQuoteString round-trips any byte string through a real MariaDB
// under every quoteModes sql_mode: SELECT of the literal returns exactly
// the bytes for charset "" and "binary", and for "utf8mb4" when they are
// UTF-8 (otherwise the server refuses the literal with 1300, or takes it
// as it is).
func FuzzQuoteString(f *testing.F) {
	for _, s := range quoteSeeds {
		f.Add([]byte(s))
	}
	conns := quoteDB(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		for _, cs := range []string{"", "binary", "utf8mb4"} {
			lit := QuoteString(s, cs)
			if strings.Contains(lit, `\`) {
				t.Fatalf("QuoteString(%q, %q) = %q holds a backslash", s, cs, lit)
			}
			for i, c := range conns {
				var got []byte
				err := c.QueryRowContext(context.Background(), "SELECT "+lit).Scan(&got)
				var me *mysqldriver.MySQLError
				switch {
				case cs == "utf8mb4" && !utf8.ValidString(s):
					// The server refuses what it does not read as utf8mb4
					// (1300); some sequences Go rejects it takes (UTF-8 of a
					// UTF-16 surrogate, ED A0-BF xx), and then the bytes
					// must come back exactly.
					if err == nil && string(got) == s {
						break
					}
					if !errors.As(err, &me) || me.Number != 1300 {
						t.Fatalf("sql_mode %q: SELECT %s of a string that is not UTF-8: %v (%q), want error 1300 or the bytes", quoteModes[i], lit, err, got)
					}
				case err != nil:
					t.Fatalf("sql_mode %q: SELECT %s: %v", quoteModes[i], lit, err)
				case string(got) != s:
					t.Fatalf("sql_mode %q: SELECT %s returned %q, want %q", quoteModes[i], lit, got, s)
				}
			}
		}
	})
}

// FuzzQuoteIdent creates a table under any name through QuoteIdent, under
// every quoteModes sql_mode, and reads the name back from
// information_schema: it is exactly the name. A name the server does not
// take as a table name (empty, too long, a trailing space, not UTF-8...)
// may be refused, but never as a syntax error (1064), which would mean
// the quoting broke; a name holding NUL, which no identifier can hold, is
// refused.
func FuzzQuoteIdent(f *testing.F) {
	for _, s := range quoteSeeds {
		f.Add(s)
	}
	conns := quoteDB(f)
	if conns != nil {
		// Each process (fuzzing worker) has its own database.
		db := "quote_ident_" + strings.ReplaceAll(strings.ReplaceAll(f.Name(), "/", "_"), "#", "_") + "_" + strconv.Itoa(os.Getpid())
		for _, q := range []string{"DROP DATABASE IF EXISTS " + db, "CREATE DATABASE " + db} {
			if _, err := conns[0].ExecContext(context.Background(), q); err != nil {
				f.Fatal(err)
			}
		}
		f.Cleanup(func() { conns[0].ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+db) })
		for _, c := range conns {
			if _, err := c.ExecContext(context.Background(), "USE "+db); err != nil {
				f.Fatal(err)
			}
		}
	}
	f.Fuzz(func(t *testing.T, name string) {
		q := QuoteIdent(name)
		if strings.Count(q, "`")%2 != 0 || !strings.HasPrefix(q, "`") || !strings.HasSuffix(q, "`") {
			t.Fatalf("QuoteIdent(%q) = %s", name, q)
		}
		for i, c := range conns {
			ctx := context.Background()
			_, err := c.ExecContext(ctx, "CREATE TABLE "+q+" (a INT) ENGINE=MEMORY")
			var me *mysqldriver.MySQLError
			if errors.As(err, &me) && (me.Number != 1064 || strings.Contains(name, "\x00")) {
				continue // a name the server does not take
			}
			if err != nil {
				t.Fatalf("sql_mode %q: CREATE TABLE %s: %v", quoteModes[i], q, err)
			}
			var got []byte
			err = c.QueryRowContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()").Scan(&got)
			if _, err := c.ExecContext(ctx, "DROP TABLE "+q); err != nil {
				t.Fatalf("sql_mode %q: DROP TABLE %s: %v", quoteModes[i], q, err)
			}
			if err != nil || string(got) != name {
				t.Fatalf("sql_mode %q: the table created as %s reads back as %q (%v), want %q", quoteModes[i], q, got, err, name)
			}
		}
	})
}
