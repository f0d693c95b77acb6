package router

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// TestFastPathAllocs checks that a schema without shard rules is routed
// without parsing and without allocating, hints and EXPLAIN detection
// included.
func TestFastPathAllocs(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "plain", DB: "sbtest"}
	for _, sql := range []string{
		"SELECT c FROM sbtest1 WHERE id=1",
		"/*node1*/ SELECT 1",
		"SELECT /* comment */ 1",
		"EXPLAIN SELECT 1",
		"INSERT INTO t (a) VALUES (1), (2)",
	} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := r.Route(sql, s); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%q: %v allocations per Route, want 0", sql, allocs)
		}
	}
}

// TestBoundPlaceholders plans a prepared statement's text with values bound
// to its placeholders, as the executor will once COM_STMT_EXECUTE is
// routed.
func TestBoundPlaceholders(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	bind := func(vals ...value) binder {
		return func(order int) (value, bool) {
			if order < len(vals) {
				return vals[order], true
			}
			return value{}, false
		}
	}
	tests := []struct {
		sql      string
		bind     binder
		subtable []string
		sql0     string
	}{
		{"SELECT c FROM sbtest1 WHERE id = ?", bind(value{kind: valInt, i: 2}), []string{"sbtest1_0002"}, "SELECT `c` FROM `sbtest1_0002` WHERE `id`=?"},
		{"SELECT c FROM sbtest1 WHERE k = ? AND id = ?", bind(value{kind: valInt, i: 9}, value{kind: valString, s: "7"}), []string{"sbtest1_0003"}, ""},
		{"SELECT c FROM sbtest1 WHERE id = ?", nil, []string{"sbtest1_0000", "sbtest1_0001", "sbtest1_0002", "sbtest1_0003"}, ""},
		// Placeholder IN lists are not cut: parameters are numbered
		// across the whole statement.
		{"SELECT c FROM sbtest1 WHERE id IN (?, ?)", bind(value{kind: valInt, i: 1}, value{kind: valInt, i: 2}), []string{"sbtest1_0001", "sbtest1_0002"}, "SELECT `c` FROM `sbtest1_0001` WHERE `id` IN (?,?)"},
		{"SELECT * FROM ranged WHERE id BETWEEN ? AND ?", bind(value{kind: valInt, i: 5}, value{kind: valInt, i: 10005}), []string{"ranged_0000", "ranged_0001"}, ""},
		{"INSERT INTO sbtest1 (id, c) VALUES (?, ?)", bind(value{kind: valInt, i: 4}, value{kind: valString, s: "x"}), []string{"sbtest1_0000"}, "INSERT INTO `sbtest1_0000` (`id`,`c`) VALUES (?,?)"},
	}
	for _, tc := range tests {
		p, err := r.schemas[s.User].plan(tc.sql, s, tc.bind)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		var got []string
		for _, tg := range p.Targets {
			got = append(got, tg.Subtable)
		}
		if len(got) != len(tc.subtable) {
			t.Errorf("%s: subtables %v, want %v", tc.sql, got, tc.subtable)
			continue
		}
		for i := range got {
			if got[i] != tc.subtable[i] {
				t.Errorf("%s: subtables %v, want %v", tc.sql, got, tc.subtable)
				break
			}
		}
		if tc.sql0 != "" && p.Targets[0].SQL != tc.sql0 {
			t.Errorf("%s: SQL %q, want %q", tc.sql, p.Targets[0].SQL, tc.sql0)
		}
	}
}

// TestConcurrentRoute routes the golden corpus from many goroutines at once
// (run with -race) and checks every answer equals the sequential one.
func TestConcurrentRoute(t *testing.T) {
	r := testRouter(t)
	var all []goldenCase
	for _, cases := range loadGolden(t) {
		all = append(all, cases...)
	}
	want := make([][]byte, len(all))
	for i := range all {
		p, e := outcome(r, &all[i])
		want[i] = marshal([]any{p, e})
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := range all {
				i := (k + g*len(all)/8) % len(all)
				p, e := outcome(r, &all[i])
				if got := marshal([]any{p, e}); string(got) != string(want[i]) {
					t.Errorf("%s: concurrent answer differs:\n%s\nwant\n%s", all[i].SQL, got, want[i])
				}
			}
		}(g)
	}
	wg.Wait()
}

// TestSharedPlansUnchanged checks that planning never modifies the shared
// default and hint plans.
func TestSharedPlansUnchanged(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	p1, _ := r.Route("SELECT * FROM plain_t", s)
	p2, _ := r.Route("EXPLAIN FORMAT='shard' SELECT * FROM plain_t", s)
	p3, _ := r.Route("SELECT * FROM plain_t", s)
	if p1 != p3 || p1.Targets[0].SQL != "" || p2.Targets[0].SQL == "" {
		t.Fatalf("shared plan modified: %+v %+v %+v", p1, p2, p3)
	}
}

// TestErrorCodes lists the errors Route produces with their code and
// SQLSTATE.
func TestErrorCodes(t *testing.T) {
	r := testRouter(t)
	tests := []struct {
		user, sql string
		code      uint16
		state     string
	}{
		{"nobody", "SELECT 1", mysql.ErDBAccessDenied, "42000"},
		{"shard", "SELECT * FROM sbtest1 WHERE", mysql.ErSyntax, "42000"},
		{"shard", "UPDATE sbtest1 SET c = 1 ORDER BY id LIMIT 1", mysql.ErNotSupported, "42000"},
		{"shard", "SELECT * FROM ranged WHERE id = 40000", ErNoPartition, "HY000"},
		{"shard", "INSERT INTO sbtest1 (id, c) VALUES (1)", ErWrongValueCount, "21S01"},
	}
	for _, tc := range tests {
		_, err := r.Route(tc.sql, Session{User: tc.user, DB: "sbtest"})
		var se *mysql.SQLError
		if !errors.As(err, &se) || se.Code != tc.code || se.State != tc.state {
			t.Errorf("%s: got %v, want %d (%s)", tc.sql, err, tc.code, tc.state)
		}
	}
}

// TestDefaultNode checks DefaultNode for known and unknown users.
func TestDefaultNode(t *testing.T) {
	r := testRouter(t)
	if n, ok := r.DefaultNode("plain"); !ok || n != "node2" {
		t.Errorf("DefaultNode(plain) = %q, %v", n, ok)
	}
	if _, ok := r.DefaultNode("nobody"); ok {
		t.Error("DefaultNode(nobody) found a schema")
	}
}

// TestNewRejects checks rules New cannot compile even when a Config built
// in code skipped Validate.
func TestNewRejects(t *testing.T) {
	base := func(rule config.ShardRule) *config.Config {
		return &config.Config{Schemas: []config.Schema{{User: "u", Nodes: []string{"n1", "n2"}, Default: "n1", Shard: []config.ShardRule{rule}}}}
	}
	for _, rule := range []config.ShardRule{
		{DB: "d", Table: "t", Key: "k", Type: "hash", Nodes: []string{"n1", "n2"}, Locations: []int{1}},
		{DB: "d", Table: "t", Key: "k", Type: "range", Nodes: []string{"n1"}, Locations: []int{2}},
		{DB: "d", Table: "t", Key: "k", Type: "date_month", Nodes: []string{"n1"}, DateRange: []string{"2016"}},
		{DB: "d", Table: "t", Key: "k", Type: "date_day", Nodes: []string{"n1"}, DateRange: []string{"20160230"}},
		{DB: "d", Table: "t", Key: "k", Type: "list", Nodes: []string{"n1"}},
	} {
		if _, err := New(base(rule)); err == nil {
			t.Errorf("New accepted %+v", rule)
		}
	}
}

func TestLikeMatch(t *testing.T) {
	tests := []struct {
		name, pattern string
		want          bool
	}{
		{"sbtest1", "sbtest1", true},
		{"sbtest1", "sbtest%", true},
		{"sbtest1", "sb_test1", false},
		{"sbtest1", "sbtes_1", true},
		{"sbtest1", "%1", true},
		{"sbtest1", "%2", false},
		{"a_b", `a\_b`, true},
		{"axb", `a\_b`, false},
		{"SBTEST1", "sbtest1", false},
		{"", "%", true},
	}
	for _, tc := range tests {
		if got := likeMatch(tc.name, tc.pattern, '\\'); got != tc.want {
			t.Errorf("likeMatch(%q, %q) = %v", tc.name, tc.pattern, got)
		}
	}
}

// BenchmarkRoute routes every statement of the golden corpus.
func BenchmarkRoute(b *testing.B) {
	r := testRouter(b)
	var all []goldenCase
	for _, cases := range loadGolden(b) {
		all = append(all, cases...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := &all[i%len(all)]
		r.Route(c.SQL, c.session())
	}
}

// BenchmarkRoutePointSelect is sysbench's oltp_point_select on a sharded
// table with a warm plan cache: strip the literals, look the shape up, map
// the key, splice the statement.
func BenchmarkRoutePointSelect(b *testing.B) {
	r := testCachedRouter(b)
	s := Session{User: "shard", DB: "sbtest"}
	sqls := make([]string, 64)
	for i := range sqls {
		sqls[i] = fmt.Sprintf("SELECT c FROM sbtest1 WHERE id=%d", 5021+i*97)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := r.Route(sqls[i%len(sqls)], s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteUnsharded is the fast path of a schema without rules: no
// parse, no allocation.
func BenchmarkRouteUnsharded(b *testing.B) {
	r := testRouter(b)
	s := Session{User: "plain", DB: "sbtest"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := r.Route("SELECT c FROM sbtest1 WHERE id=5021", s); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzRoute feeds arbitrary text to Route: it must never panic, and every
// error must carry a MySQL code.
func FuzzRoute(f *testing.F) {
	r := testRouter(f)
	for _, cases := range loadGolden(f) {
		for _, c := range cases {
			f.Add(c.SQL, c.DB)
		}
	}
	f.Fuzz(func(t *testing.T, sql, db string) {
		for _, user := range []string{"shard", "plain"} {
			p, err := r.Route(sql, Session{User: user, DB: db})
			if err != nil {
				var se *mysql.SQLError
				if !errors.As(err, &se) {
					t.Fatalf("%q: uncoded error %v", sql, err)
				}
				continue
			}
			if p == nil || len(p.Targets) == 0 {
				t.Fatalf("%q: plan without targets: %+v", sql, p)
			}
		}
	})
}

// TestPrepared checks which statements may be forwarded as binary prepared
// statements to the default node.
func TestPrepared(t *testing.T) {
	r := testRouter(t)
	tests := []struct {
		sql string
		ok  bool
	}{
		{"SELECT ? + 1", true},
		{"SELECT c FROM unsharded_t WHERE id = ?", true},
		{"SELECT c FROM sbtest1 WHERE id = ?", false},
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)", false},
		{"UPDATE sbtest1 SET k = k + 1 WHERE id = ?", false},
		{"/*node2*/ SELECT ?", false},
	}
	for _, tc := range tests {
		err := r.Prepared(tc.sql, Session{User: "shard", DB: "sbtest"})
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.sql, err)
		}
		if !tc.ok {
			var se *mysql.SQLError
			if !errors.As(err, &se) || se.Code != mysql.ErNotSupported {
				t.Errorf("%s: got %v, want 1235", tc.sql, err)
			}
		}
	}
	if err := r.Prepared("SELECT c FROM sbtest1 WHERE id = ?", Session{User: "plain", DB: "sbtest"}); err != nil {
		t.Errorf("schema without rules: %v", err)
	}
}

// TestRouteArgs checks that bound values reach the placeholder they belong
// to (the parser leaves every placeholder's Order at 0; the router numbers
// them by position) and that Inline places literals in text order.
func TestRouteArgs(t *testing.T) {
	r := testRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	p, err := r.RouteArgs("UPDATE sbtest1 SET k = ? WHERE id = ?", s, []Arg{{ArgInt, "7"}, {ArgInt, "10"}})
	if err != nil || p.Kind != Forward || p.Targets[0].Subtable != "sbtest1_0002" {
		t.Fatalf("UPDATE by the second placeholder: %+v %v", p, err)
	}
	if n := Placeholders(p.Targets[0].SQL, 0); n != 2 {
		t.Errorf("target SQL %q keeps %d placeholders, want 2", p.Targets[0].SQL, n)
	}
	p, err = r.RouteArgs("SELECT c FROM sbtest1 WHERE id IN (?, ?) AND k = '?'", s, []Arg{{ArgInt, "1"}, {ArgInt, "3"}})
	if err != nil || len(p.Targets) != 2 {
		t.Fatalf("IN over two subtables: %+v %v", p, err)
	}
	got, err := Inline("SELECT /* ? */ c FROM sbtest1 WHERE id IN (?, ?) AND c = '?'", []string{"1", "_utf8mb4 X'41'"}, 0)
	if want := "SELECT /* ? */ c FROM sbtest1 WHERE id IN (1, _utf8mb4 X'41') AND c = '?'"; err != nil || got != want {
		t.Errorf("Inline = %q, %v; want %q", got, err, want)
	}
	if _, err := Inline("SELECT ?", nil, 0); err == nil {
		t.Error("Inline with a missing value: no error")
	}
}
