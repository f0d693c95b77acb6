package router

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// cacheCatalog is a Catalog that is also a KeyTyper: the integer keys of
// the test tables (testdata/ks.yaml). sbtest1 has primary key id and
// unique key k, global table region primary key id and unique key code; orders is sharded by user_id and has primary key id;
// items' key sku is not an integer.
type cacheCatalog struct{}

func (cacheCatalog) Columns(db, table string) ([]string, bool) {
	return goldenCatalog{}.Columns(db, table)
}

func (cacheCatalog) IntegerKey(db, table, column string) (primary, ok bool) {
	switch db + "." + table + "." + column {
	case "sbtest.sbtest1.id", "sbtest.region.id", "sbtest.ranged.id", "sbtest.orders.id", "sbtest.events.id":
		return true, true
	case "sbtest.sbtest1.k", "sbtest.region.code":
		return false, true
	}
	return false, false
}

// cacheCase is one statement and the facts expected of it. fill is the
// fill target as "node subtable: SQL" ("" when not cacheable).
type cacheCase struct {
	name   string
	user   string // "" means shard
	db     string // "" means sbtest
	sql    string
	args   []Arg
	mode   Mode
	why    string
	table  string
	column string
	prim   bool
	points []int64
	rng    *KeyRange
	fill   string
}

func ints(vs ...string) []Arg {
	out := make([]Arg, len(vs))
	for i, v := range vs {
		out[i] = Arg{Kind: ArgInt, Text: v}
	}
	return out
}

const t1 = "sbtest.sbtest1"

var cacheCases = []cacheCase{
	// Points.
	{name: "point, sysbench", sql: "SELECT c FROM sbtest1 WHERE id=1", table: t1, column: "id", prim: true, points: []int64{1},
		fill: "node1 sbtest1_0001: SELECT `c` FROM `sbtest1_0001` WHERE `id`=1 LOCK IN SHARE MODE NOWAIT"},
	{name: "point, literal on the left", sql: "SELECT c FROM sbtest1 WHERE 4 = id", table: t1, column: "id", prim: true, points: []int64{4},
		fill: "node1 sbtest1_0000: SELECT `c` FROM `sbtest1_0000` WHERE 4=`id` LOCK IN SHARE MODE NOWAIT"},
	{name: "point, negative, qualified, <=>", sql: "SELECT s.c FROM sbtest.sbtest1 s WHERE s.id <=> -3", db: "other", table: t1, column: "id", prim: true, points: []int64{-3},
		fill: "node1 sbtest1_0001: SELECT `s`.`c` FROM `sbtest`.`sbtest1_0001` AS `s` WHERE `s`.`id`<=>-3 LOCK IN SHARE MODE NOWAIT"},
	{name: "IN on one subtable, sorted, each once", sql: "SELECT c FROM sbtest1 WHERE id IN (5, 1, 5) ORDER BY c LIMIT 3", table: t1, column: "id", prim: true, points: []int64{1, 5},
		fill: "node1 sbtest1_0001: SELECT `c` FROM `sbtest1_0001` WHERE `id` IN (5,1,5) ORDER BY `c` LIMIT 3 LOCK IN SHARE MODE NOWAIT"},
	{name: "two point terms intersect", sql: "SELECT c FROM sbtest1 WHERE id IN (1, 5) AND id = 5", table: t1, column: "id", prim: true, points: []int64{5},
		fill: "node1 sbtest1_0001: SELECT `c` FROM `sbtest1_0001` WHERE `id` IN (1,5) AND `id`=5 LOCK IN SHARE MODE NOWAIT"},
	{name: "points win over a range", sql: "SELECT c FROM sbtest1 WHERE id > 0 AND id = 1 AND id < 10", table: t1, column: "id", prim: true, points: []int64{1},
		fill: "node1 sbtest1_0001: SELECT `c` FROM `sbtest1_0001` WHERE `id`>0 AND `id`=1 AND `id`<10 LOCK IN SHARE MODE NOWAIT"},
	{name: "other terms only narrow", sql: "SELECT DISTINCT c, k + 1, CASE WHEN k > 1 THEN 'a' ELSE 'b' END FROM sbtest1 WHERE (id = 1) AND (c LIKE 'a%' OR c IS NULL) AND k BETWEEN 1 AND 2 AND pad IN ('x') AND NOT k = 3 AND c = 'y' COLLATE utf8mb4_bin",
		table: t1, column: "id", prim: true, points: []int64{1},
		fill: "node1 sbtest1_0001: SELECT DISTINCT `c`,`k`+1 AS `k + 1`,CASE WHEN `k`>1 THEN 'a' ELSE 'b' END AS `CASE WHEN k > 1 THEN 'a' ELSE 'b' END` FROM `sbtest1_0001` WHERE (`id`=1) AND (`c` LIKE 'a%' OR `c` IS NULL) AND `k` BETWEEN 1 AND 2 AND `pad` IN ('x') AND NOT `k`=3 AND `c`='y' COLLATE utf8mb4_bin LOCK IN SHARE MODE NOWAIT"},
	{name: "aggregates, GROUP BY, HAVING, ORDER BY position", sql: "SELECT c, COUNT(*), SUM(k), MIN(k), MAX(k), AVG(k), GROUP_CONCAT(c), BIT_OR(k), STD(k), VARIANCE(k) FROM sbtest1 WHERE id = 1 GROUP BY c HAVING COUNT(*) > 1 ORDER BY 1",
		table: t1, column: "id", prim: true, points: []int64{1},
		fill: "node1 sbtest1_0001: SELECT `c`,COUNT(1) AS `COUNT(*)`,SUM(`k`) AS `SUM(k)`,MIN(`k`) AS `MIN(k)`,MAX(`k`) AS `MAX(k)`,AVG(`k`) AS `AVG(k)`,GROUP_CONCAT(`c` SEPARATOR ',') AS `GROUP_CONCAT(c)`,BIT_OR(`k`) AS `BIT_OR(k)`,STDDEV_POP(`k`) AS `STD(k)`,VAR_POP(`k`) AS `VARIANCE(k)` FROM `sbtest1_0001` WHERE `id`=1 GROUP BY `c` HAVING COUNT(1)>1 ORDER BY 1 LOCK IN SHARE MODE NOWAIT"},
	{name: "unique key: points", sql: "SELECT name FROM region WHERE code IN (3, 1)", table: "sbtest.region", column: "code", points: []int64{1, 3},
		fill: "node1 region: SELECT `name` FROM `region` WHERE `code` IN (3,1) LOCK IN SHARE MODE NOWAIT"},
	{name: "unique key: points win over a primary range", sql: "SELECT name FROM region WHERE id > 5 AND code = 1", table: "sbtest.region", column: "code", points: []int64{1},
		fill: "node1 region: SELECT `name` FROM `region` WHERE `id`>5 AND `code`=1 LOCK IN SHARE MODE NOWAIT"},
	{name: "unique key: no range", sql: "SELECT name FROM region WHERE code >= 5", table: "sbtest.region", why: "range on a key that is not the primary key of sbtest.region"},
	{name: "unique key: on every subtable", sql: "SELECT id FROM sbtest1 WHERE k = 7", table: t1, why: "reads 4 subtables (one only in this version)"},
	{name: "primary key points win over unique ones", sql: "SELECT id FROM sbtest1 WHERE k = 7 AND id = 6", table: t1, column: "id", prim: true, points: []int64{6},
		fill: "node2 sbtest1_0002: SELECT `id` FROM `sbtest1_0002` WHERE `k`=7 AND `id`=6 LOCK IN SHARE MODE NOWAIT"},
	{name: "global table: points", sql: "SELECT name FROM region WHERE id IN (3, 2)", table: "sbtest.region", column: "id", prim: true, points: []int64{2, 3},
		fill: "node1 region: SELECT `name` FROM `region` WHERE `id` IN (3,2) LOCK IN SHARE MODE NOWAIT"},

	// Ranges (primary key only), normalised to inclusive bounds.
	{name: "range >= and <", sql: "SELECT c FROM ranged WHERE id >= 5 AND id < 100", table: "sbtest.ranged", column: "id", prim: true, rng: &KeyRange{Lo: 5, Hi: 99},
		fill: "node1 ranged_0000: SELECT `c` FROM `ranged_0000` WHERE `id`>=5 AND `id`<100 LOCK IN SHARE MODE NOWAIT"},
	{name: "range > and <=", sql: "SELECT c FROM ranged WHERE id > 5 AND id <= 100", table: "sbtest.ranged", column: "id", prim: true, rng: &KeyRange{Lo: 6, Hi: 100},
		fill: "node1 ranged_0000: SELECT `c` FROM `ranged_0000` WHERE `id`>5 AND `id`<=100 LOCK IN SHARE MODE NOWAIT"},
	{name: "range BETWEEN, tightened", sql: "SELECT c FROM ranged WHERE id BETWEEN 10 AND 20 AND id > 12 AND 18 >= id", table: "sbtest.ranged", column: "id", prim: true, rng: &KeyRange{Lo: 13, Hi: 18},
		fill: "node1 ranged_0000: SELECT `c` FROM `ranged_0000` WHERE `id` BETWEEN 10 AND 20 AND `id`>12 AND 18>=`id` LOCK IN SHARE MODE NOWAIT"},
	{name: "range, value on the left", sql: "SELECT c FROM region WHERE 5 < id", table: "sbtest.region", column: "id", prim: true, rng: &KeyRange{Lo: 6, NoHi: true},
		fill: "node1 region: SELECT `c` FROM `region` WHERE 5<`id` LOCK IN SHARE MODE NOWAIT"},
	{name: "range open below", sql: "SELECT COUNT(*) FROM region WHERE id < 0", table: "sbtest.region", column: "id", prim: true, rng: &KeyRange{Hi: -1, NoLo: true},
		fill: "node1 region: SELECT COUNT(1) AS `COUNT(*)` FROM `region` WHERE `id`<0 LOCK IN SHARE MODE NOWAIT"},
	{name: "range open above, >=", sql: "SELECT c FROM region WHERE id >= 9223372036854775807", table: "sbtest.region", column: "id", prim: true, rng: &KeyRange{Lo: 9223372036854775807, NoHi: true},
		fill: "node1 region: SELECT `c` FROM `region` WHERE `id`>=9223372036854775807 LOCK IN SHARE MODE NOWAIT"},
	{name: "range on a unique key", sql: "SELECT c FROM sbtest1 WHERE k > 5", table: t1, why: "range on a key that is not the primary key of sbtest.sbtest1"},
	{name: "contradictory range", sql: "SELECT c FROM region WHERE id > 10 AND id < 5", table: "sbtest.region", why: "contradictory range"},
	{name: "nothing above BIGINT's maximum", sql: "SELECT c FROM region WHERE id > 9223372036854775807", table: "sbtest.region", why: "contradictory range"},
	{name: "empty intersection of points", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND id = 5", table: t1, why: "no key value satisfies the WHERE"},

	// Prepared statements: the fill keeps the placeholders.
	{name: "prepared point", sql: "SELECT c FROM sbtest1 WHERE id = ?", args: ints("1"), table: t1, column: "id", prim: true, points: []int64{1},
		fill: "node1 sbtest1_0001: SELECT `c` FROM `sbtest1_0001` WHERE `id`=? LOCK IN SHARE MODE NOWAIT"},
	{name: "prepared IN and LIMIT", sql: "SELECT c FROM sbtest1 WHERE id IN (?, ?) LIMIT ?", args: ints("5", "1", "2"), table: t1, column: "id", prim: true, points: []int64{1, 5},
		fill: "node1 sbtest1_0001: SELECT `c` FROM `sbtest1_0001` WHERE `id` IN (?,?) LIMIT ? LOCK IN SHARE MODE NOWAIT"},
	{name: "prepared range on a global table", sql: "SELECT c FROM region WHERE id BETWEEN ? AND ?", args: ints("-2", "7"), table: "sbtest.region", column: "id", prim: true, rng: &KeyRange{Lo: -2, Hi: 7},
		fill: "node1 region: SELECT `c` FROM `region` WHERE `id` BETWEEN ? AND ? LOCK IN SHARE MODE NOWAIT"},
	{name: "prepared string", sql: "SELECT c FROM sbtest1 WHERE id = ?", args: []Arg{{Kind: ArgString, Text: "1"}}, table: t1, why: "key compared with a non-integer value"},
	{name: "prepared float", sql: "SELECT c FROM sbtest1 WHERE id = ?", args: []Arg{{Kind: ArgFloat, Text: "1.0"}}, table: t1, why: "key compared with a non-integer value"},
	{name: "prepared NULL", sql: "SELECT c FROM sbtest1 WHERE id = ?", args: []Arg{{Kind: ArgNull}}, table: t1, why: "key compared with a non-integer value"},
	{name: "prepared unsigned above BIGINT", sql: "SELECT c FROM sbtest1 WHERE id = ?", args: ints("18446744073709551615"), table: t1, why: "key compared with an integer above BIGINT"},
	{name: "prepared, too few arguments", sql: "SELECT c FROM sbtest1 WHERE id = ? AND k = ?", args: ints("1"), table: t1, why: "has a ? without a bound value"},

	// Values the key is compared with.
	{name: "string literal", sql: "SELECT c FROM sbtest1 WHERE id = '1'", table: t1, why: "key compared with a non-integer value"},
	{name: "decimal literal", sql: "SELECT c FROM sbtest1 WHERE id = 1.0", table: t1, why: "key compared with a non-integer value"},
	{name: "float in IN", sql: "SELECT c FROM sbtest1 WHERE id IN (1, 1e0)", table: t1, why: "key compared with a non-integer value"},
	{name: "string in a range", sql: "SELECT c FROM region WHERE id > '5'", table: "sbtest.region", why: "key compared with a non-integer value"},
	{name: "NULL", sql: "SELECT c FROM sbtest1 WHERE id = NULL", table: t1, why: "key compared with a non-integer value"},
	{name: "unsigned literal above BIGINT", sql: "SELECT c FROM sbtest1 WHERE id = 18446744073709551615", table: t1, why: "key compared with an integer above BIGINT"},
	{name: "integer key term beside a string one", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND id = '1'", table: t1, why: "key compared with a non-integer value"},

	// No key lookup.
	{name: "no WHERE", sql: "SELECT c FROM sbtest1", table: t1, why: "no key lookup on table sbtest.sbtest1"},
	{name: "OR of points", sql: "SELECT c FROM sbtest1 WHERE id = 1 OR id = 5", table: t1, why: "no key lookup on table sbtest.sbtest1"},
	{name: "NOT IN", sql: "SELECT c FROM sbtest1 WHERE id NOT IN (1)", table: t1, why: "no key lookup on table sbtest.sbtest1"},
	{name: "column compared with a column", sql: "SELECT c FROM sbtest1 WHERE id = k", table: t1, why: "no key lookup on table sbtest.sbtest1"},
	{name: "not a key", sql: "SELECT c FROM sbtest1 WHERE pad = 1", table: t1, why: "key column not known to be an integer primary or unique key"},
	{name: "key not an integer", sql: "SELECT name FROM items WHERE sku = 1", db: "shop", table: "shop.items", why: "key column not known to be an integer primary or unique key"},
	{name: "point on several subtables", sql: "SELECT c FROM sbtest1 WHERE id IN (1, 2)", table: t1, why: "reads 2 subtables (one only in this version)"},
	{name: "key other than the shard key", sql: "SELECT c FROM orders WHERE id = 1", table: "sbtest.orders", why: "reads 4 subtables (one only in this version)"},
	{name: "table without rule", sql: "SELECT c FROM plain_t WHERE id = 1", table: "sbtest.plain_t", why: "table has no shard rule"},
	{name: "schema without rules", user: "plain", sql: "SELECT c FROM sbtest1 WHERE id = 1", why: "table has no shard rule"},
	{name: "unknown user", user: "nobody", sql: "SELECT 1", why: "no schema for user nobody"},
	{name: "no database", db: "-", sql: "SELECT c FROM sbtest1 WHERE id = 1", why: "no database selected"},

	// The statement.
	{name: "parse error", sql: "SELEC c FROM sbtest1", why: "does not parse"},
	{name: "two statements", sql: "SELECT c FROM sbtest1 WHERE id = 1; SELECT 1", why: "2 statements"},
	{name: "UPDATE", sql: "UPDATE sbtest1 SET c = 'x' WHERE id = 1", why: "not a SELECT"},
	{name: "UNION", sql: "SELECT c FROM sbtest1 WHERE id = 1 UNION SELECT c FROM sbtest1 WHERE id = 5", why: "set operation (UNION, EXCEPT, INTERSECT)"},
	{name: "WITH", sql: "WITH x AS (SELECT 1) SELECT c FROM sbtest1 WHERE id = 1", table: t1, why: "WITH"},
	{name: "TABLE", sql: "TABLE sbtest1", table: t1, why: "TABLE statement"},
	{name: "VALUES", sql: "VALUES ROW(1)", why: "VALUES statement"},
	{name: "EXPLAIN", sql: "EXPLAIN SELECT c FROM sbtest1 WHERE id = 1", why: "EXPLAIN"},
	{name: "EXPLAIN FORMAT=shard", sql: "EXPLAIN FORMAT='shard' SELECT c FROM sbtest1 WHERE id = 1", why: "EXPLAIN"},
	{name: "node hint", sql: "/*node2*/ SELECT c FROM sbtest1 WHERE id = 1", why: "names a node (hint)"},
	{name: "INTO variables", sql: "SELECT c FROM sbtest1 WHERE id = 1 INTO @a", table: t1, why: "INTO"},
	{name: "INTO OUTFILE", sql: "SELECT c FROM sbtest1 WHERE id = 1 INTO OUTFILE '/tmp/x'", table: t1, why: "INTO"},
	{name: "INTO DUMPFILE (the parser does not read it)", sql: "SELECT c FROM sbtest1 WHERE id = 1 INTO DUMPFILE '/tmp/x'", why: "does not parse"},
	{name: "FOR UPDATE", sql: "SELECT c FROM sbtest1 WHERE id = 1 FOR UPDATE", table: t1, why: "locking read"},
	{name: "LOCK IN SHARE MODE", sql: "SELECT c FROM sbtest1 WHERE id = 1 LOCK IN SHARE MODE", table: t1, why: "locking read"},
	{name: "FOR SHARE", sql: "SELECT c FROM sbtest1 WHERE id = 1 FOR SHARE", table: t1, why: "locking read"},
	{name: "SQL_CALC_FOUND_ROWS", sql: "SELECT SQL_CALC_FOUND_ROWS c FROM sbtest1 WHERE id = 1", table: t1, why: "SQL_CALC_FOUND_ROWS"},
	{name: "SQL_NO_CACHE", sql: "SELECT SQL_NO_CACHE c FROM sbtest1 WHERE id = 1", table: t1, why: "SQL_NO_CACHE"},
	{name: "no table", sql: "SELECT 1", why: "reads no table"},
	{name: "join", sql: "SELECT a.c FROM sbtest1 a JOIN orders b ON a.id = b.user_id WHERE a.id = 1", why: "joins 2 tables"},
	{name: "comma join", sql: "SELECT 1 FROM sbtest1, orders, region WHERE sbtest1.id = 1", why: "joins 3 tables"},
	{name: "derived table", sql: "SELECT c FROM (SELECT c, id FROM sbtest1 WHERE id = 1) d WHERE id = 1", why: "reads a derived table"},

	// Anything else in the statement.
	{name: "subquery in the select list", sql: "SELECT (SELECT 1) FROM sbtest1 WHERE id = 1", table: t1, why: "has a subquery"},
	{name: "IN subquery", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND k IN (SELECT k FROM region)", table: t1, why: "has a subquery"},
	{name: "EXISTS in HAVING", sql: "SELECT c FROM sbtest1 WHERE id = 1 HAVING EXISTS (SELECT 1)", table: t1, why: "has a subquery"},
	{name: "subquery in ORDER BY", sql: "SELECT c FROM sbtest1 WHERE id = 1 ORDER BY (SELECT 1)", table: t1, why: "has a subquery"},
	{name: "NOW in WHERE", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND c < NOW()", table: t1, why: "calls NOW()"},
	{name: "RAND in the select list", sql: "SELECT RAND() FROM sbtest1 WHERE id = 1", table: t1, why: "calls RAND()"},
	{name: "LAST_INSERT_ID as the key", sql: "SELECT c FROM sbtest1 WHERE id = LAST_INSERT_ID()", table: t1, why: "calls LAST_INSERT_ID()"},
	{name: "UUID", sql: "SELECT uuid() FROM sbtest1 WHERE id = 1", table: t1, why: "calls UUID()"},
	{name: "CONNECTION_ID", sql: "SELECT CONNECTION_ID() FROM sbtest1 WHERE id = 1", table: t1, why: "calls CONNECTION_ID()"},
	{name: "USER", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND c = USER()", table: t1, why: "calls USER()"},
	{name: "DATABASE", sql: "SELECT DATABASE() FROM sbtest1 WHERE id = 1", table: t1, why: "calls DATABASE()"},
	{name: "CURRENT_TIMESTAMP", sql: "SELECT CURRENT_TIMESTAMP FROM sbtest1 WHERE id = 1", table: t1, why: "calls CURRENT_TIMESTAMP()"},
	{name: "CONVERT_TZ", sql: "SELECT CONVERT_TZ(c, '+00:00', '+01:00') FROM sbtest1 WHERE id = 1", table: t1, why: "calls CONVERT_TZ()"},
	{name: "deterministic function", sql: "SELECT CONCAT(c, 'x') FROM sbtest1 WHERE id = 1", table: t1, why: "calls CONCAT()"},
	{name: "CAST", sql: "SELECT CAST(c AS CHAR) FROM sbtest1 WHERE id = 1", table: t1, why: "calls CAST()"},
	{name: "CONVERT", sql: "SELECT CONVERT(c, CHAR) FROM sbtest1 WHERE id = 1", table: t1, why: "calls CONVERT()"},
	{name: "REGEXP", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND c REGEXP 'a'", table: t1, why: "uses REGEXP"},
	{name: "window function", sql: "SELECT ROW_NUMBER() OVER () FROM sbtest1 WHERE id = 1", table: t1, why: "calls window function ROW_NUMBER()"},
	{name: "aggregate as a window function", sql: "SELECT SUM(k) OVER () FROM sbtest1 WHERE id = 1", table: t1, why: "calls window function SUM()"},
	{name: "JSON aggregate", sql: "SELECT JSON_ARRAYAGG(c) FROM sbtest1 WHERE id = 1", table: t1, why: "calls JSON_ARRAYAGG()"},
	{name: "user variable", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND c = @x", table: t1, why: "reads a user variable"},
	{name: "user variable as the key", sql: "SELECT c FROM sbtest1 WHERE id = @id", table: t1, why: "reads a user variable"},
	{name: "system variable", sql: "SELECT @@time_zone FROM sbtest1 WHERE id = 1", table: t1, why: "reads a system variable"},
	{name: "session system variable", sql: "SELECT c FROM sbtest1 WHERE id = @@session.auto_increment_offset", table: t1, why: "reads a system variable"},
	{name: "unbound ? in text", sql: "SELECT c FROM sbtest1 WHERE id = ?", table: t1, why: "has a ? without a bound value"},
	{name: "DEFAULT()", sql: "SELECT DEFAULT(c) FROM sbtest1 WHERE id = 1", table: t1, why: "calls DEFAULT()"},
	{name: "optimizer hint", sql: "SELECT /*+ MAX_EXECUTION_TIME(1000) */ c FROM sbtest1 WHERE id = 1", table: t1, why: "has an optimizer hint"},
	{name: "MATCH AGAINST", sql: "SELECT c FROM sbtest1 WHERE id = 1 AND MATCH (c) AGAINST ('x')", table: t1, why: "uses MATCH ... AGAINST"},
	{name: "sql_mode=ORACLE", mode: ModeForeign, sql: "SELECT c FROM sbtest1 WHERE id = 1", why: "sql_mode=ORACLE"},
	{name: "ANSI_QUOTES: read as the session reads", mode: ModeANSIQuotes, sql: "SELECT \"c\" FROM \"sbtest1\" WHERE \"id\" = 1", table: t1, column: "id", prim: true, points: []int64{1},
		fill: "node1 sbtest1_0001: SELECT `c` FROM `sbtest1_0001` WHERE `id`=1 LOCK IN SHARE MODE NOWAIT"},
}

func TestCacheFacts(t *testing.T) {
	r := testRouter(t)
	for _, c := range cacheCases {
		t.Run(c.name, func(t *testing.T) {
			got := r.CacheFacts(c.sql, c.session(cacheCatalog{}), c.args)
			if d := c.diff(got); d != "" {
				t.Errorf("%s\n%s", c.sql, d)
			}
		})
	}
}

func (c *cacheCase) session(cat Catalog) Session {
	s := Session{User: c.user, DB: c.db, Catalog: cat, Mode: c.mode}
	if s.User == "" {
		s.User = "shard"
	}
	switch s.DB {
	case "":
		s.DB = "sbtest"
	case "-":
		s.DB = ""
	}
	return s
}

// diff describes how got differs from what c expects, or returns "".
func (c *cacheCase) diff(got Cacheable) string {
	var d []string
	check := func(what string, g, w any) {
		if gs, ws := fmt.Sprint(g), fmt.Sprint(w); gs != ws {
			d = append(d, fmt.Sprintf("%s: got %s, want %s", what, gs, ws))
		}
	}
	check("why", got.Why, c.why)
	check("table", got.Table, c.table)
	check("column", got.Column, c.column)
	check("primary", got.Primary, c.prim)
	check("points", got.Points, c.points)
	check("range", fmt.Sprintf("%+v", got.Range), fmt.Sprintf("%+v", c.rng))
	fill := ""
	if f := got.Fill; f != nil {
		if f.Kind != Forward || len(f.Targets) != 1 {
			return fmt.Sprintf("fill is not a Forward plan with one target: %+v", f)
		}
		tg := f.Targets[0]
		fill = tg.Node + " " + tg.Subtable + ": " + tg.SQL
	}
	check("fill", fill, c.fill)
	if (got.Why == "") != (got.Fill != nil) {
		d = append(d, "a statement is cacheable exactly when it has a fill plan")
	}
	return strings.Join(d, "\n")
}

// TestCacheFactsCatalog: without a KeyTyper the key's type is unknown.
func TestCacheFactsCatalog(t *testing.T) {
	r := testRouter(t)
	for _, cat := range []Catalog{nil, goldenCatalog{}} {
		got := r.CacheFacts("SELECT c FROM sbtest1 WHERE id = 1", Session{User: "shard", DB: "sbtest", Catalog: cat}, nil)
		if got.Why != "key column not known to be an integer primary or unique key" || got.Table != t1 || got.Fill != nil {
			t.Errorf("catalog %T: %+v", cat, got)
		}
	}
}

// TestCacheFactsLeavesRouting: CacheFacts neither counts in the plan
// cache nor changes what Route answers, before or after it.
func TestCacheFactsLeavesRouting(t *testing.T) {
	r := testCachedRouter(t)
	s := Session{User: "shard", DB: "sbtest", Catalog: cacheCatalog{}}
	const q = "SELECT c FROM sbtest1 WHERE id = 1"
	before, err := r.Route(q, s)
	if err != nil {
		t.Fatal(err)
	}
	hits, misses, shapes := r.CacheStats()
	for range 3 {
		if f := r.CacheFacts(q, s, nil); f.Why != "" {
			t.Fatal(f.Why)
		}
		if f := r.CacheFacts("SELECT c FROM sbtest1 WHERE id = ?", s, ints("1")); f.Why != "" {
			t.Fatal(f.Why)
		}
	}
	if h, m, n := r.CacheStats(); h != hits || m != misses || n != shapes {
		t.Errorf("plan cache stats moved: %d/%d/%d -> %d/%d/%d", hits, misses, shapes, h, m, n)
	}
	after, err := r.Route(q, s)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", before.Targets) != fmt.Sprintf("%+v", after.Targets) || strings.Contains(after.Targets[0].SQL, "LOCK") {
		t.Errorf("Route changed: %+v -> %+v", before.Targets, after.Targets)
	}
}

// TestCacheFactsGolden checks every cacheable SELECT of the golden files
// against its golden plan: the fill runs the planner's own target, on the
// same node and subtable, with the lock clause appended.
func TestCacheFactsGolden(t *testing.T) {
	r := testRouter(t)
	checked := 0
	for file, cases := range loadGolden(t) {
		for _, c := range cases {
			s := c.session()
			s.Catalog = cacheCatalog{}
			got := r.CacheFacts(c.SQL, s, nil)
			if got.Why != "" {
				continue
			}
			checked++
			p := c.Plan
			if p == nil || p.Kind != "Forward" || len(p.Targets) != 1 {
				t.Errorf("%s: %s: cacheable, but its plan is %+v", file, c.SQL, p)
				continue
			}
			want, tg := p.Targets[0], got.Fill.Targets[0]
			if want.SQL == "" {
				want.SQL = restoreCanonical(t, c.SQL)
			}
			if tg.Node != want.Node || tg.Subtable != want.Subtable || tg.SQL != want.SQL+fillLock {
				t.Errorf("%s: %s:\n fill %+v\n plan %+v", file, c.SQL, tg, want)
			}
			if !slices.Equal(got.Fill.Tables, p.Tables) {
				t.Errorf("%s: %s: fill tables %v, plan %v", file, c.SQL, got.Fill.Tables, p.Tables)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d golden cases are cacheable", checked)
	}
	t.Logf("%d cacheable golden cases checked", checked)
}

// BenchmarkCacheFacts: parsed (no plan cache), and from the shape's
// template (the plan cache holds the shape, as after Route), for text and
// for a prepared statement's execution.
func BenchmarkCacheFacts(b *testing.B) {
	s := Session{User: "shard", DB: "sbtest", Catalog: cacheCatalog{}}
	const q = "SELECT c FROM sbtest1 WHERE id = 1"
	for _, bc := range []struct {
		name string
		r    *Router
	}{{"parsed", testRouter(b)}, {"shape", testCachedRouter(b)}} {
		b.Run(bc.name, func(b *testing.B) {
			for range 3 {
				bc.r.Route(q, s)
				bc.r.CacheFacts(q, s, nil)
			}
			b.ReportAllocs()
			for b.Loop() {
				if f := bc.r.CacheFacts(q, s, nil); f.Why != "" {
					b.Fatal(f.Why)
				}
			}
		})
		b.Run(bc.name+" prepared", func(b *testing.B) {
			const q = "SELECT c FROM sbtest1 WHERE id = ?"
			args := ints("1")
			for range 3 {
				bc.r.RouteArgs(q, s, args)
				bc.r.CacheFacts(q, s, args)
			}
			b.ReportAllocs()
			for b.Loop() {
				if f := bc.r.CacheFacts(q, s, args); f.Why != "" {
					b.Fatal(f.Why)
				}
			}
		})
	}
}

// TestCacheFactsFromShape: once Route has a template for a shape,
// CacheFacts answers its statements from the template (cacheshape.go):
// every case of cacheCases, and statements of one shape with other
// literals, get the facts the parsed statement gives.
func TestCacheFactsFromShape(t *testing.T) {
	r, parsing := testCachedRouter(t), testRouter(t) // parsing has no plan cache: every statement is parsed
	parsed := func(sql string, s Session) Cacheable { return parsing.CacheFacts(sql, s, nil) }
	check := func(sql string, s Session) {
		t.Helper()
		for range 3 { // the plan cache builds its template at the second sighting
			r.Route(sql, s)
		}
		for i := range 3 {
			got, want := r.CacheFacts(sql, s, nil), parsed(sql, s)
			if got.Fill != nil && want.Fill != nil {
				// The template splices the client's literals where the
				// parsed statement is restored (007 and 7): either is the
				// routed statement, locked.
				if p, err := r.Route(sql, s); err == nil && len(p.Targets) == 1 && got.Fill.Targets[0].SQL == p.Targets[0].SQL+fillLock {
					w := *want.Fill
					w.Targets = []Target{want.Fill.Targets[0]}
					w.Targets[0].SQL = got.Fill.Targets[0].SQL
					want.Fill = &w
				}
			}
			if g, w := factsString(got), factsString(want); g != w {
				t.Errorf("%s (call %d):\n got %s\nwant %s", sql, i+1, g, w)
			}
		}
	}
	for _, c := range cacheCases {
		if c.args == nil && !strings.Contains(c.sql, "INTO") {
			check(c.sql, c.session(cacheCatalog{}))
		}
	}
	s := Session{User: "shard", DB: "sbtest", Catalog: cacheCatalog{}}
	for _, v := range []string{"1", "7", "123456", "-3", "0", "007", "9223372036854775807", "9223372036854775808", "18446744073709551616", "'5'", "0x5", "5.0", "1e3"} {
		check("SELECT c FROM sbtest1 WHERE id = "+v, s)
		check("SELECT c, pad FROM sbtest1 WHERE id = "+v+" AND k > 3", s)
		check("SELECT c FROM sbtest1 WHERE k = 2 AND id = "+v, s)
		check("SELECT c FROM sbtest1 WHERE id = "+v+" AND id = 8", s)
		check("SELECT NOW(), c FROM sbtest1 WHERE id = "+v, s)
		check("SELECT c FROM sbtest1 WHERE id = "+v+" FOR UPDATE", s)
	}
	// Prepared statements: their template is the prepared one (RouteArgs).
	checkArgs := func(sql string, s Session, args []Arg) {
		t.Helper()
		for range 3 {
			r.RouteArgs(sql, s, args)
		}
		for i := range 3 {
			got, want := r.CacheFacts(sql, s, args), parsing.CacheFacts(sql, s, args)
			if g, w := factsString(got), factsString(want); g != w {
				t.Errorf("%s %v (call %d):\n got %s\nwant %s", sql, args, i+1, g, w)
			}
		}
	}
	for _, c := range cacheCases {
		if c.args != nil {
			checkArgs(c.sql, c.session(cacheCatalog{}), c.args)
		}
	}
	for _, a := range [][]Arg{ints("1"), ints("7"), ints("-3"), ints("9223372036854775807"), ints("18446744073709551615"),
		{{ArgString, "5"}}, {{ArgNull, ""}}, {{ArgFloat, "5"}}, {{ArgUnknown, ""}}} {
		checkArgs("SELECT c FROM sbtest1 WHERE id = ?", s, a)
		checkArgs("SELECT c, pad FROM sbtest1 WHERE id = ? AND k > 3", s, a)
		checkArgs("SELECT NOW(), c FROM sbtest1 WHERE id = ?", s, a)
	}
	known, fast := 0, 0
	c := r.schemas["shard"].cache
	c.mu.RLock()
	for _, tp := range c.m {
		if f := tp.facts.Load(); f != nil {
			known++
			if f.ok {
				fast++
			}
		}
	}
	c.mu.RUnlock()
	if fast == 0 || fast == known {
		t.Errorf("%d shapes known to CacheFacts, %d of them answered without a parse: want some of each", known, fast)
	}
	t.Logf("%d shapes known to CacheFacts, %d of them answered without a parse", known, fast)
	// The catalog is asked again at each statement: a key that is no longer
	// the integer primary key makes the shape's statements not cacheable.
	sql := "SELECT c FROM sbtest1 WHERE id = 42"
	check(sql, s)
	for _, cat := range []Catalog{nil, goldenCatalog{}} {
		s2 := s
		s2.Catalog = cat
		if got := r.CacheFacts(sql, s2, nil); got.Why == "" || got.Fill != nil {
			t.Errorf("catalog %T: %s", cat, factsString(got))
		}
	}
}

// factsString prints all of c, its fill plan's target included.
func factsString(c Cacheable) string {
	fill := "<nil>"
	if f := c.Fill; f != nil {
		fill = fmt.Sprintf("%+v", *f)
	}
	return fmt.Sprintf("why=%q table=%q column=%q primary=%v points=%v range=%+v fill=%s", c.Why, c.Table, c.Column, c.Primary, c.Points, c.Range, fill)
}
