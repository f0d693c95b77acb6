package server_test

import (
	"slices"
	"testing"
)

// TestProfilesShowClientStatements: with profiling on, SHOW PROFILES
// lists the client's statements only, as MariaDB does, not what the proxy
// runs for its own needs on the session's connection: the read-back of the
// values a SET assigned (user and system variables, several spellings, in
// and outside a transaction) and the SET that checks they can be carried.
func TestProfilesShowClientStatements(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	scripts := [][]string{
		{"SET @a = 1", "SELECT 1"},
		{"SET sql_mode = '', @b = 'x'", "SET time_zone = '+02:00'", "SELECT @b"},
		// START TRANSACTION: the proxy begins a transaction with the statement
		// it composes, which a BEGIN is not (a difference left).
		{"START TRANSACTION", "SET @d = 5", "SELECT @d", "COMMIT"},
		{"SET @@session.sort_buffer_size = 300000, @e := 2", "SET SESSION max_join_size = 1000000", "SELECT 6"},
		{"set @`f` = 'é', @g = NULL", "SET LOCAL net_read_timeout = 40", "SELECT @f"},
	}
	run := func(dsn string, script []string) [][]string {
		db := openDB(t, dsn)
		defer db.Close()
		c, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		mustExec(t, c, "SET profiling = 1")
		mustExec(t, c, script...)
		rows := queryStrings(t, c, "SHOW PROFILES")
		out := make([][]string, len(rows))
		for j, r := range rows {
			out[j] = []string{r[2]} // Query; ids and durations differ
		}
		return out
	}
	for i, script := range scripts {
		want := run(directDSN(s, "", ""), script)
		got := run(p.dsn("", ""), script)
		if !slices.EqualFunc(want, got, slices.Equal) {
			t.Errorf("script %d: SHOW PROFILES through the proxy %q, MariaDB %q", i, got, want)
		}
	}
	// The next clients of the pool get neither profiling nor profiles.
	for range 4 {
		c := conn(t, openDB(t, p.dsn("", "")))
		if got := queryStrings(t, c, "SHOW PROFILES"); len(got) != 0 {
			t.Errorf("a new client's SHOW PROFILES: %q", got)
		}
		if got := queryValue(t, c, "SELECT @@profiling"); got != "0" {
			t.Errorf("a new client's @@profiling: %s", got)
		}
	}
}
