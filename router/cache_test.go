package router

import (
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/format"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		sql, shape, classes string
		ok                  bool
	}{
		{"SELECT c FROM sbtest1 WHERE id=5021", "SELECT c FROM sbtest1 WHERE id=?", "i", true},
		{"SELECT c FROM t1 WHERE id = -5 AND x = 1.5 AND y = .5 LIMIT 18446744073709551615, 18446744073709551616", "SELECT c FROM t1 WHERE id = -? AND x = ? AND y = .5 LIMIT ?, ?", "inin", true},
		{"SELECT 1.5e3", "", "", false},
		{"SELECT 1" + strings.Repeat("0", 60), "", "", false},
		{`UPDATE t SET c='a''b', d="x\"y", e='plain' WHERE id=7`, "UPDATE t SET c=?, d=?, e=? WHERE id=?", "eesi", true},
		{"SELECT _utf8mb4'x', N'y', X'0A', B'01', 0x1F, 0b01, @'v', 1abc FROM t", "SELECT _utf8mb4'x', N'y', X'0A', B'01', 0x1F, 0b01, @'v', 1abc FROM t", "", true},
		{"SELECT `a``1` , t.5, a1 FROM `x 2` /* 3 */ -- 4\n# 5\nWHERE 6", "SELECT `a``1` , t.5, a1 FROM `x 2` /* 3 */ -- 4\n# 5\nWHERE ?", "i", true},
		{"SELECT /*+ MAX_EXECUTION_TIME(10) */ 1", "SELECT /*+ MAX_EXECUTION_TIME(10) */ ?", "i", true},
		{"SELECT 1e", "SELECT 1e", "", true},
		{"SELECT 2.", "SELECT ?", "n", true},
		{"SELECT ? FROM t", "", "", false},
		{"SELECT 'open", "", "", false},
		{"SELECT 1 /* open", "", "", false},
		{"SELECT `open", "", "", false},
		{"SELECT '\x00'", "SELECT ?", "s", true},
		{"SELECT \x00", "", "", false},
	}
	for _, tc := range tests {
		key, spans, ok := normalize(nil, tc.sql, nil)
		if ok != tc.ok {
			t.Errorf("normalize(%q): ok %v, want %v", tc.sql, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		shape := string(key[:len(key)-len(spans)-1])
		classes := string(key[len(key)-len(spans):])
		if shape != tc.shape || classes != tc.classes || key[len(key)-len(spans)-1] != 0 {
			t.Errorf("normalize(%q) = %q %q, want %q %q", tc.sql, shape, classes, tc.shape, tc.classes)
		}
		for i, s := range spans {
			if lit := tc.sql[s.off:s.end]; strings.ContainsAny(lit[:1], "'\"") != (s.class == litString || s.class == litEscaped) {
				t.Errorf("normalize(%q): literal %d is %q, class %c", tc.sql, i, lit, s.class)
			}
		}
	}
}

// canonicalPlan is a plan in golden form with every target's SQL parsed
// and restored, so that a statement the cache spliced from the client's
// literals compares equal to the one the planner restored.
func canonicalPlan(tb testing.TB, r *Router, sql string, s Session) string {
	tb.Helper()
	c := goldenCase{SQL: sql, DB: s.DB, User: s.User}
	gp, ge := outcome(r, &c)
	if gp != nil {
		for i := range gp.Targets {
			gp.Targets[i].SQL = restoreCanonical(tb, gp.Targets[i].SQL)
		}
	}
	return string(marshal([]any{gp, ge}))
}

func restoreCanonical(tb testing.TB, sql string) string {
	if sql == "" {
		return ""
	}
	stmts, _, err := parser.New().Parse(sql, "", "")
	if err != nil || len(stmts) != 1 {
		return "unparsable: " + sql
	}
	var b strings.Builder
	if err := stmts[0].Restore(format.NewRestoreCtx(Mode(0).restoreFlags(), &b)); err != nil {
		tb.Fatalf("restore %q: %v", sql, err)
	}
	return b.String()
}

// variants returns sql with its literals replaced by other values of the
// same kind, chosen to land on every subtable of every test rule and
// outside the ranges.
func variants(sql string, rng *rand.Rand, n int) []string {
	_, spans, ok := normalize(nil, sql, nil)
	if !ok || len(spans) == 0 {
		return nil
	}
	ints := []string{"0", "1", "2", "3", "4", "5", "7", "9999", "10000", "19999", "20000", "39999", "40000", "123456789", "9223372036854775807", "9223372036854775808", "18446744073709551615", "99999999999999999999", "2016", "1457308800"}
	strs := []string{"'x'", "'7'", "'12'", "''", "'2016-03-06'", "'2016-03-09 10:00:00'", "'2015-12-31'", "'2017-06-01'", "'2016-07-15'", "'2019-01-01'", "'-3'", "'abc'"}
	var out []string
	for k := 0; k < n; k++ {
		var b strings.Builder
		last := 0
		for _, s := range spans {
			b.WriteString(sql[last:s.off])
			switch s.class {
			case litInt:
				b.WriteString(ints[rng.Intn(len(ints))])
			case litString:
				b.WriteString(strs[rng.Intn(len(strs))])
			default:
				b.WriteString(sql[s.off:s.end])
			}
			last = s.end
		}
		b.WriteString(sql[last:])
		out = append(out, b.String())
	}
	return out
}

// TestPlanCacheMatchesPlanner routes every golden statement, and variants
// of it with other literal values, through a router with a plan cache and
// one without: the targets must be the same, and the statements the same
// once restored. Each is routed three times so that the cache builds its
// template and then answers from it.
func TestPlanCacheMatchesPlanner(t *testing.T) {
	plain, cached := testRouter(t), testCachedRouter(t)
	rng := rand.New(rand.NewSource(1))
	checked := 0
	for file, cases := range loadGolden(t) {
		for i := range cases {
			c := &cases[i]
			s := c.session()
			for _, sql := range append([]string{c.SQL}, variants(c.SQL, rng, 12)...) {
				want := canonicalPlan(t, plain, sql, s)
				for rep := 0; rep < 3; rep++ {
					if got := canonicalPlan(t, cached, sql, s); got != want {
						t.Fatalf("%s: %s\n  sql %s (round %d)\ncached:\n%s\nplanner:\n%s", file, c.Comment, sql, rep, got, want)
					}
				}
				checked++
			}
		}
	}
	hits, misses, shapes := cached.CacheStats()
	t.Logf("%d statements; cache hits %d, misses %d, shapes %d", checked, hits, misses, shapes)
	if hits == 0 {
		t.Fatal("the plan cache never answered")
	}
}

// TestPlanCacheTemplates checks which shapes get a template: the
// single-shard statements sysbench sends do, and statements whose target
// does not follow from one literal do not.
func TestPlanCacheTemplates(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	tests := []struct {
		sql    string
		cached bool
	}{
		{"SELECT c FROM sbtest1 WHERE id=%d", true},
		{"UPDATE sbtest1 SET k=k+1 WHERE id=%d", true},
		{"UPDATE sbtest1 SET c='%d-x' WHERE id=%d", true},
		{"DELETE FROM sbtest1 WHERE id=%d", true},
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (%d, 1, 'c', 'p')", true},
		{"INSERT INTO sbtest1 SET k=1, id=%d", true},
		{"SELECT c FROM sbtest.sbtest1 AS t WHERE t.id = %d AND c LIKE 'a%%'", true},
		{"SELECT * FROM logd WHERE ctime = '2016-03-0%d'", true},
		// Merges whose targets and merge no literal decides: a hash rule
		// never reads range bounds, and the literals are in the WHERE.
		{"SELECT c FROM sbtest1 WHERE id BETWEEN %d AND 5", true},
		{"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN %d AND 105 ORDER BY c", true},
		{"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN %d AND 105", true},
		{"SELECT c FROM sbtest1 WHERE k > %d ORDER BY c LIMIT 3", false}, // LIMIT 3 is a literal of the shape too
		// A range rule prunes by the bounds; a literal outside the WHERE
		// may shape the merge.
		{"SELECT * FROM ranged WHERE id BETWEEN %d AND 5", false},
		{"SELECT c FROM sbtest1 WHERE k > 1 ORDER BY c LIMIT %d", false},
		{"SELECT c, %d FROM sbtest1", false},
		{"SELECT k, COUNT(*) FROM sbtest1 GROUP BY k HAVING COUNT(*) > %d", false},
		{"SELECT c FROM sbtest1 WHERE id=%d OR id=4", false},
		{"SELECT c FROM sbtest1 WHERE id=%d AND id=5", false},
		{"SELECT c FROM sbtest1 WHERE id IN (%d)", false},
		{"SELECT c FROM sbtest1 WHERE id=%d ORDER BY c LIMIT 3", true},
		{"SELECT c FROM sbtest1 WHERE id=(SELECT %d)", false},
		{"SELECT a.c FROM sbtest1 a JOIN orders o ON a.id=o.user_id WHERE a.id=%d", false},
		{"SELECT c FROM plain_t WHERE id=%d", false},
		{"INSERT INTO sbtest1 (id, k) VALUES (%d, 1), (2, 2)", false},
		{"/*node2*/ SELECT c FROM sbtest1 WHERE id=%d", false},
	}
	for _, tc := range tests {
		var sql string
		for v := 6; v <= 8; v++ {
			args := []any{v}
			if strings.Count(tc.sql, "%d") == 2 {
				args = append(args, v)
			}
			sql = fmt.Sprintf(tc.sql, args...)
			if _, err := r.Route(sql, s); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		sc := r.schemas["shard"]
		key, _, ok := normalize(append([]byte{keyText}, append([]byte(s.DB), 0)...), sql, nil)
		sc.cache.mu.RLock()
		tp := sc.cache.m[string(key)]
		sc.cache.mu.RUnlock()
		if got := ok && tp != nil && tp.state == ready; got != tc.cached {
			t.Errorf("%s: template %v, want %v", sql, got, tc.cached)
		}
	}
}

// TestPlanCachePrepared routes prepared statements with bound arguments
// through both routers.
func TestPlanCachePrepared(t *testing.T) {
	plain, cached := testRouter(t), testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest"}
	stmts := []string{
		"SELECT c FROM sbtest1 WHERE id=?",
		"UPDATE sbtest1 SET c=? WHERE id=?",
		"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)",
		"SELECT c FROM sbtest1 WHERE id=? LIMIT ? OFFSET ?",
		"SELECT * FROM ranged WHERE id = ?",
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
	}
	argSets := [][]Arg{
		{{ArgInt, "1"}, {ArgInt, "2"}, {ArgString, "x"}, {ArgInt, "4"}},
		{{ArgInt, "7"}, {ArgInt, "10001"}, {ArgInt, "3"}, {ArgInt, "0"}},
		{{ArgString, "9"}, {ArgString, "abc"}, {ArgInt, "20000"}, {ArgNull, ""}},
		{{ArgInt, "99999"}, {ArgFloat, "1.5"}, {ArgInt, "2"}, {ArgUnknown, ""}},
		{{ArgNull, ""}, {ArgInt, "5"}, {ArgInt, "6"}, {ArgInt, "7"}},
	}
	for _, sql := range stmts {
		n := strings.Count(sql, "?")
		for rep := 0; rep < 3; rep++ {
			for _, args := range argSets {
				args = args[:n]
				a, errA := plain.RouteArgs(sql, s, args)
				b, errB := cached.RouteArgs(sql, s, args)
				ga, gb := fmt.Sprint(errA), fmt.Sprint(errB)
				if a != nil {
					ga = fmt.Sprintf("%v %v %v", a.Kind, a.Targets, a.Tables)
				}
				if b != nil {
					gb = fmt.Sprintf("%v %v %v", b.Kind, b.Targets, b.Tables)
				}
				if ga != gb {
					t.Fatalf("%s %v: cached %s, planner %s", sql, args, gb, ga)
				}
			}
		}
	}
	if hits, _, _ := cached.CacheStats(); hits == 0 {
		t.Fatal("the plan cache never answered")
	}
}

// TestPlanCacheBounded checks that the cache never holds more shapes than
// configured, that a stream of shapes seen once does not evict the
// templates in use, and that long statements are not kept at all.
func TestPlanCacheBounded(t *testing.T) {
	r := newTestRouter(t, 8)
	s := Session{User: "shard", DB: "sbtest"}
	hot := func(i int) string { return fmt.Sprintf("SELECT c FROM sbtest1 WHERE id=%d", i) }
	r.Route(hot(1), s)
	r.Route(hot(2), s)
	for i := 0; i < 100; i++ {
		r.Route(fmt.Sprintf("SELECT c%d FROM sbtest1 WHERE id=1", i), s) // each shape once
		if _, _, n := r.CacheStats(); n > 8 {
			t.Fatalf("%d shapes cached, limit 8", n)
		}
	}
	before, _, _ := r.CacheStats()
	r.Route(hot(3), s)
	if hits, _, _ := r.CacheStats(); hits != before+1 {
		t.Fatal("one-off shapes evicted the template in use")
	}
	for i := 0; i < 100; i++ {
		sql := fmt.Sprintf("SELECT c%d FROM sbtest1 WHERE id=1", i)
		r.Route(sql, s)
		r.Route(sql, s) // built: fills the cache with templates
		if _, _, n := r.CacheStats(); n > 8 {
			t.Fatalf("%d shapes cached, limit 8", n)
		}
	}
	r = newTestRouter(t, 8)
	long := "SELECT c FROM sbtest1 WHERE id=1 AND c <> '" + strings.Repeat("x", maxShapeLen) + "'"
	r.Route(long, s)
	r.Route(long, s)
	if _, _, n := r.CacheStats(); n != 0 {
		t.Fatalf("a statement of %d bytes was cached", len(long))
	}
}

// TestPlanCacheConcurrent routes golden statements and their variants
// from several goroutines through one cached router (run with -race).
func TestPlanCacheConcurrent(t *testing.T) {
	plain, cached := testRouter(t), testCachedRouter(t)
	rng := rand.New(rand.NewSource(2))
	type item struct {
		sql  string
		s    Session
		want string
	}
	var items []item
	for _, cases := range loadGolden(t) {
		for i := range cases {
			c := &cases[i]
			for _, sql := range append([]string{c.SQL}, variants(c.SQL, rng, 2)...) {
				items = append(items, item{sql, c.session(), canonicalPlan(t, plain, sql, c.session())})
			}
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 3*len(items); k++ {
				it := &items[(k+g*len(items)/4)%len(items)]
				if got := canonicalPlan(t, cached, it.sql, it.s); got != it.want {
					t.Errorf("%s: cached answer differs:\n%s\nwant\n%s", it.sql, got, it.want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// BenchmarkRouteCacheMiss plans sysbench's point select without a cache:
// parse, analyse, rewrite.
func BenchmarkRouteCacheMiss(b *testing.B) {
	r := testRouter(b)
	s := Session{User: "shard", DB: "sbtest"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := r.Route("SELECT c FROM sbtest1 WHERE id=5021", s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteCacheHitPrepared routes an execution of a prepared point
// select from the cache.
func BenchmarkRouteCacheHitPrepared(b *testing.B) {
	r := testCachedRouter(b)
	s := Session{User: "shard", DB: "sbtest"}
	args := make([][]Arg, 64)
	for i := range args {
		args[i] = []Arg{{ArgInt, fmt.Sprint(i * 97)}}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := r.RouteArgs("SELECT c FROM sbtest1 WHERE id=?", s, args[i%len(args)]); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzPlanCache routes arbitrary text three times through a router with a
// plan cache and once through one without: the answers must agree.
func FuzzPlanCache(f *testing.F) {
	plain, cached := testRouter(f), testCachedRouter(f)
	for _, cases := range loadGolden(f) {
		for _, c := range cases {
			f.Add(c.SQL, c.DB)
		}
	}
	f.Fuzz(func(t *testing.T, sql, db string) {
		s := Session{User: "shard", DB: db}
		want := canonicalPlan(t, plain, sql, s)
		for rep := 0; rep < 3; rep++ {
			if got := canonicalPlan(t, cached, sql, s); got != want {
				t.Fatalf("%q (round %d): cached\n%s\nplanner\n%s", sql, rep, got, want)
			}
		}
	})
}
