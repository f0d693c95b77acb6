# Differential corpus for TestDifferential: one query per line, {t} is the
# table (a sharded table through the proxy, or the reference table on one
# MariaDB server). Rows are compared in order when the ORDER BY ends with the
# unique id (or the line starts with [ordered]: a total order for grouped
# and DISTINCT queries), as multisets otherwise; LIMIT without a total order
# compares against the answer without LIMIT. Columns: id (shard key, 0..799),
# a INT, b INT NOT NULL (0..5), c BIGINT, d DECIMAL(12,3), f DOUBLE,
# s VARCHAR utf8mb4_general_ci, sb VARCHAR utf8mb4_bin, dt DATE, ts DATETIME.

# Plain reads: every subtable concatenated.
SELECT * FROM {t}
SELECT id, a, b FROM {t}
SELECT s, sb FROM {t}
SELECT id FROM {t} WHERE a IS NULL
SELECT * FROM {t} WHERE s IS NULL OR sb IS NULL

# WHERE on the key: points, IN lists split per subtable, ranges.
SELECT * FROM {t} WHERE id = 7
SELECT * FROM {t} WHERE id = 799
SELECT * FROM {t} WHERE id IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
SELECT * FROM {t} WHERE id IN (0, 100, 200, 300, 400, 500, 600, 700) ORDER BY id
SELECT * FROM {t} WHERE id BETWEEN 90 AND 210 ORDER BY id
SELECT * FROM {t} WHERE id >= 650 ORDER BY id DESC
SELECT * FROM {t} WHERE id < 120 ORDER BY id
SELECT * FROM {t} WHERE id > 1000
SELECT * FROM {t} WHERE id < 100 OR id >= 700 ORDER BY id
SELECT * FROM {t} WHERE id NOT IN (1, 2, 3) AND id < 50 ORDER BY id
SELECT * FROM {t} WHERE id = 3 AND id = 4
SELECT id, s FROM {t} WHERE id IN (5, 105, 205, 305) AND s IS NOT NULL ORDER BY id

# WHERE on other columns.
SELECT id, a FROM {t} WHERE a BETWEEN -5 AND 5 ORDER BY id
SELECT id, a FROM {t} WHERE a IN (-20, -1, 0, 1, 20) ORDER BY a, id
SELECT id, s FROM {t} WHERE s = 'apple' ORDER BY id
SELECT id, s FROM {t} WHERE s = 'ECLAIR' ORDER BY id
SELECT id, sb FROM {t} WHERE sb = 'Apple' ORDER BY id
SELECT id, s FROM {t} WHERE s LIKE 'a%' ORDER BY id
SELECT id, sb FROM {t} WHERE sb LIKE 'a%' ORDER BY id
SELECT id, s FROM {t} WHERE s IN ('straße', 'STRASSE', 'naive') ORDER BY id
SELECT id, d FROM {t} WHERE d > 50000 ORDER BY d DESC, id
SELECT id, d FROM {t} WHERE d = -1.5 ORDER BY id
SELECT id, f FROM {t} WHERE f < -1000 ORDER BY f, id
SELECT id, dt FROM {t} WHERE dt >= '2022-01-01' ORDER BY dt, id
SELECT id, ts FROM {t} WHERE ts BETWEEN '2021-01-01' AND '2021-12-31 23:59:59' ORDER BY ts DESC, id
SELECT id, c FROM {t} WHERE c > 8000000000000000000 ORDER BY c, id
SELECT id, d FROM {t} WHERE d >= '99999.999' ORDER BY id
SELECT id, a FROM {t} WHERE a = '-7' OR b = '3' ORDER BY id
SELECT id FROM {t} WHERE NOT (a > 0 OR b < 3) ORDER BY id
SELECT id FROM {t} WHERE a <=> NULL ORDER BY id

# ORDER BY: columns, expressions, NULLs, collations, directions, keys not
# selected, aliases, positions.
SELECT id, a FROM {t} ORDER BY a, id
SELECT id, a FROM {t} ORDER BY a DESC, id
SELECT id, a FROM {t} ORDER BY a DESC, id DESC
SELECT id, s FROM {t} ORDER BY s, id
SELECT id, s FROM {t} ORDER BY s DESC, id
SELECT id, sb FROM {t} ORDER BY sb, id
SELECT id, sb FROM {t} ORDER BY sb DESC, id DESC
SELECT id, s, sb FROM {t} ORDER BY s, sb, id
SELECT id, d FROM {t} ORDER BY d, id
SELECT id, d FROM {t} ORDER BY d DESC, id
SELECT id, f FROM {t} ORDER BY f, id
SELECT id, f FROM {t} ORDER BY f DESC, id
SELECT id, c FROM {t} ORDER BY c, id
SELECT id, c FROM {t} ORDER BY c DESC, id
SELECT id, dt FROM {t} ORDER BY dt, id
SELECT id, ts FROM {t} ORDER BY ts DESC, id
SELECT id, dt, ts FROM {t} ORDER BY dt DESC, ts, id
SELECT id FROM {t} ORDER BY s, id
SELECT id FROM {t} ORDER BY b DESC, a, id
SELECT a FROM {t} ORDER BY id
SELECT a, b FROM {t} ORDER BY id DESC
SELECT s FROM {t} ORDER BY sb DESC, d, id
SELECT id, a + b FROM {t} ORDER BY a + b, id
SELECT id, a + b AS ab FROM {t} ORDER BY ab DESC, id
[ordered] SELECT id, a * b FROM {t} ORDER BY 2, 1
SELECT id, -a FROM {t} ORDER BY 2 DESC, id
SELECT id, a FROM {t} ORDER BY a % 3, id
SELECT id, LOWER(s) FROM {t} ORDER BY LOWER(s), id
SELECT id, s FROM {t} ORDER BY s COLLATE utf8mb4_bin, id
SELECT id, s FROM {t} ORDER BY UPPER(s) DESC, id
SELECT id, CONCAT(s, sb) AS cs FROM {t} ORDER BY cs, id
SELECT id, CHAR_LENGTH(s) FROM {t} ORDER BY CHAR_LENGTH(s) DESC, s, id
SELECT id, d * 2 FROM {t} ORDER BY d * 2, id
[ordered] SELECT id, f / 4 FROM {t} ORDER BY 2, 1 DESC
SELECT id, YEAR(dt) AS y FROM {t} ORDER BY y DESC, id
SELECT id, IFNULL(a, 100) FROM {t} ORDER BY IFNULL(a, 100), id
SELECT id, COALESCE(sb, s) FROM {t} ORDER BY COALESCE(sb, s), id
SELECT * FROM {t} ORDER BY a, id
SELECT * FROM {t} ORDER BY s DESC, id
SELECT * FROM {t} ORDER BY f, d, id
SELECT {t}.* FROM {t} ORDER BY id
[ordered] SELECT x.id, x.s FROM {t} AS x ORDER BY x.s, x.id
SELECT x.id, x.s FROM {t} x ORDER BY s, id
[ordered] SELECT `id`, `a` FROM {t} ORDER BY `a`, `id`
[ordered] SELECT id AS key1, b FROM {t} ORDER BY b, key1
[unordered] SELECT id, s FROM {t} ORDER BY s
[unordered] SELECT id, a FROM {t} ORDER BY a DESC
[unordered] SELECT * FROM {t} ORDER BY b
SELECT *, a + b AS ab FROM {t} ORDER BY ab, id
SELECT {t}.*, s AS s2 FROM {t} ORDER BY s2 DESC, id
SELECT *, -a FROM {t} ORDER BY -a, id DESC

# LIMIT n and LIMIT o,n with a total order (streams merged and stopped early).
SELECT id FROM {t} ORDER BY id LIMIT 10
SELECT id FROM {t} ORDER BY id DESC LIMIT 10
SELECT id, a FROM {t} ORDER BY a, id LIMIT 15
SELECT id, a FROM {t} ORDER BY a DESC, id LIMIT 5, 10
SELECT id, s FROM {t} ORDER BY s, id LIMIT 20
SELECT id, s FROM {t} ORDER BY s DESC, id LIMIT 7 OFFSET 3
SELECT id, sb FROM {t} ORDER BY sb, id LIMIT 12
SELECT id, d FROM {t} ORDER BY d DESC, id LIMIT 100, 5
SELECT id, f FROM {t} ORDER BY f, id LIMIT 0
SELECT id, f FROM {t} ORDER BY f, id LIMIT 1000
SELECT id FROM {t} ORDER BY id LIMIT 1000, 10
SELECT id FROM {t} ORDER BY id LIMIT 300, 30
SELECT * FROM {t} WHERE a > 0 ORDER BY a DESC, id LIMIT 3
SELECT id, c FROM {t} WHERE c IS NOT NULL ORDER BY c DESC, id LIMIT 4
SELECT id, dt FROM {t} ORDER BY dt DESC, id DESC LIMIT 25
SELECT a FROM {t} ORDER BY b, id LIMIT 9
# One subtable of dr (several of dh) with LIMIT n OFFSET m: prepared, the
# restored statement has LIMIT m,n, placeholders swapped.
SELECT id, a FROM {t} WHERE id BETWEEN 300 AND 399 ORDER BY a, id LIMIT 5 OFFSET 10
SELECT id FROM {t} WHERE id IN (301, 302, 303, 304) ORDER BY id LIMIT 2 OFFSET 1
# LIMIT without a total order: any rows, but the right number.
SELECT id FROM {t} LIMIT 10
SELECT id, a FROM {t} LIMIT 3, 4
SELECT * FROM {t} WHERE b = 2 LIMIT 5
SELECT id FROM {t} ORDER BY b LIMIT 10
SELECT s FROM {t} ORDER BY s LIMIT 8

# Aggregates without GROUP BY, over all rows and over none.
SELECT COUNT(*) FROM {t}
SELECT count(*) FROM {t}
SELECT Count( * ) FROM {t}
SELECT COUNT(1) FROM {t}
SELECT COUNT(a), COUNT(c), COUNT(d), COUNT(f), COUNT(s), COUNT(sb), COUNT(dt), COUNT(ts) FROM {t}
SELECT SUM(a), SUM(b), SUM(c), SUM(d), SUM(f) FROM {t}
SELECT MIN(a), MAX(a), MIN(c), MAX(c), MIN(d), MAX(d), MIN(f), MAX(f) FROM {t}
SELECT MIN(s), MAX(s), MIN(sb), MAX(sb) FROM {t}
SELECT MIN(dt), MAX(dt), MIN(ts), MAX(ts) FROM {t}
SELECT AVG(a), AVG(b), AVG(c), AVG(d), AVG(f) FROM {t}
SELECT AVG(id), SUM(id), MIN(id), MAX(id) FROM {t}
SELECT COUNT(*) AS n, SUM(a) AS total, AVG(a) AS mean FROM {t}
SELECT sum(a + b), avg(d * 2), max(concat(s, sb)), min(a % 3) FROM {t}
SELECT COUNT(*), SUM(a), AVG(a), MIN(s), MAX(sb) FROM {t} WHERE a > 1000
SELECT COUNT(*), SUM(f), AVG(d) FROM {t} WHERE 1 = 0
SELECT COUNT(*), MAX(id) FROM {t} WHERE id IN (1, 2, 3, 4, 5, 6, 7, 8)
SELECT SUM(c) FROM {t} WHERE c > 0
SELECT SUM(c), AVG(c) FROM {t} WHERE c < 0
SELECT AVG(a) FROM {t} WHERE b = 1
SELECT AVG(f), SUM(f) FROM {t} WHERE f > 100
SELECT SUM(d), AVG(d) FROM {t} WHERE d < 0
SELECT COUNT(*) FROM {t} WHERE s = 'apple'
SELECT COUNT(*) FROM {t} WHERE sb = 'apple'
SELECT MAX( s ), MIN( sb ) FROM {t} WHERE id < 400
SELECT SUM(`a`), MAX(`s`), Avg(A) FROM {t}
SELECT COUNT(*) /* rows */, SUM(a) FROM {t}
SELECT /* lead */ COUNT(*), SUM(a) /* trail */ , MAX(b)/**/ FROM {t}
SELECT COUNT(*) AS `n`, AVG(f) AS `mean f` FROM {t}
SELECT COUNT(a) FROM {t} WHERE a IS NULL
SELECT COUNT(*) FROM {t} ORDER BY 1
SELECT COUNT(*), SUM(a) FROM {t} LIMIT 1
SELECT COUNT(*) FROM {t} LIMIT 0

# GROUP BY: columns, expressions, NULL groups, collations.
SELECT b, COUNT(*) FROM {t} GROUP BY b
[ordered] SELECT b, COUNT(*) FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT b, COUNT(*), SUM(a), MIN(a), MAX(a), AVG(a) FROM {t} GROUP BY b ORDER BY b DESC
[ordered] SELECT a, COUNT(*) FROM {t} GROUP BY a ORDER BY a
[ordered] SELECT a, COUNT(*) FROM {t} GROUP BY a ORDER BY a DESC
[ordered] SELECT s, COUNT(*) FROM {t} GROUP BY s ORDER BY s
[ordered] SELECT s, COUNT(*), MIN(id), MAX(id) FROM {t} GROUP BY s ORDER BY s DESC
[ordered] SELECT sb, COUNT(*) FROM {t} GROUP BY sb ORDER BY sb
[ordered] SELECT sb, COUNT(*), MIN(s), MAX(s) FROM {t} GROUP BY sb ORDER BY sb DESC
[ordered] SELECT dt, COUNT(*), MIN(ts), MAX(ts) FROM {t} GROUP BY dt ORDER BY dt
[ordered] SELECT d, COUNT(*) FROM {t} GROUP BY d ORDER BY d
[ordered] SELECT b, a, COUNT(*) FROM {t} GROUP BY b, a ORDER BY b, a
[ordered] SELECT b, s, COUNT(*) FROM {t} GROUP BY b, s ORDER BY s DESC, b
[ordered] SELECT a % 3, COUNT(*) FROM {t} GROUP BY a % 3 ORDER BY a % 3
[ordered] SELECT a % 3 AS m, SUM(b) FROM {t} GROUP BY m ORDER BY m DESC
[ordered] SELECT YEAR(dt), COUNT(*), AVG(f) FROM {t} GROUP BY YEAR(dt) ORDER BY 1
[ordered] SELECT LOWER(sb) AS l, COUNT(*) FROM {t} GROUP BY l ORDER BY l
[ordered] SELECT IFNULL(a, -1), COUNT(*) FROM {t} GROUP BY IFNULL(a, -1) ORDER BY IFNULL(a, -1)
[ordered] SELECT b, COUNT(*) FROM {t} GROUP BY 1 ORDER BY 1
[ordered] SELECT b AS g, COUNT(*) FROM {t} GROUP BY g ORDER BY g
[ordered] SELECT id % 5, COUNT(*), SUM(id) FROM {t} GROUP BY id % 5 ORDER BY id % 5
[ordered] SELECT b, SUM(c), AVG(c) FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT b, SUM(d), AVG(d), MIN(d), MAX(d) FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT b, SUM(f), AVG(f), MIN(f), MAX(f) FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT b, COUNT(a), COUNT(s), COUNT(*) FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT b, MIN(s), MAX(s), MIN(sb), MAX(sb) FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT b, MIN(dt), MAX(ts) FROM {t} GROUP BY b ORDER BY b
SELECT COUNT(*) FROM {t} GROUP BY b
SELECT COUNT(*), SUM(a) FROM {t} GROUP BY s
[ordered] SELECT COUNT(*) FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT SUM(a) FROM {t} GROUP BY b ORDER BY b DESC
# Sorted by aggregates: a total order once the keys follow.
[ordered] SELECT b, COUNT(*) FROM {t} GROUP BY b ORDER BY COUNT(*), b
[ordered] SELECT b, COUNT(*) AS n FROM {t} GROUP BY b ORDER BY n DESC, b
[ordered] SELECT s, SUM(a) FROM {t} GROUP BY s ORDER BY SUM(a) DESC, s
[ordered] SELECT a, AVG(d) FROM {t} GROUP BY a ORDER BY AVG(d), a
[ordered] SELECT b, MAX(s) FROM {t} GROUP BY b ORDER BY MAX(s), b
[ordered] SELECT b, SUM(a) FROM {t} GROUP BY b ORDER BY MAX(id), b
[ordered] SELECT b FROM {t} GROUP BY b ORDER BY COUNT(*) DESC, b
SELECT b, COUNT(*) FROM {t} GROUP BY b ORDER BY SUM(a)
SELECT b, COUNT(*) FROM {t} GROUP BY b ORDER BY NULL
# Grouped with LIMIT.
[ordered] SELECT b, COUNT(*) FROM {t} GROUP BY b ORDER BY b LIMIT 3
[ordered] SELECT a, COUNT(*) FROM {t} GROUP BY a ORDER BY a DESC LIMIT 5, 5
[ordered] SELECT s, COUNT(*) FROM {t} GROUP BY s ORDER BY s LIMIT 10
[ordered] SELECT s, COUNT(*) FROM {t} GROUP BY s ORDER BY COUNT(*) DESC, s LIMIT 4
SELECT b, COUNT(*) FROM {t} GROUP BY b LIMIT 2
# Grouped over nothing: no rows.
SELECT b, COUNT(*) FROM {t} WHERE a > 1000 GROUP BY b
SELECT b, SUM(a), AVG(a) FROM {t} WHERE id < 0 GROUP BY b
# Grouped on one subtable.
SELECT b, COUNT(*) FROM {t} WHERE id = 17 GROUP BY b
[ordered] SELECT b, COUNT(*) FROM {t} WHERE id IN (1, 9, 17, 25) GROUP BY b ORDER BY b

# HAVING: on aggregates selected or not, on keys, on aliases, three-valued.
[ordered] SELECT b, COUNT(*) FROM {t} GROUP BY b HAVING COUNT(*) > 50 ORDER BY b
[ordered] SELECT b, COUNT(*) AS n FROM {t} GROUP BY b HAVING n > 50 ORDER BY b
[ordered] SELECT b FROM {t} GROUP BY b HAVING SUM(a) > 0 ORDER BY b
[ordered] SELECT a, COUNT(*) FROM {t} GROUP BY a HAVING COUNT(*) >= 8 ORDER BY a
[ordered] SELECT s, COUNT(*) FROM {t} GROUP BY s HAVING COUNT(*) > 6 ORDER BY s
[ordered] SELECT s, COUNT(*) FROM {t} GROUP BY s HAVING s > 'm' ORDER BY s
[ordered] SELECT sb, COUNT(*) FROM {t} GROUP BY sb HAVING sb < 'a' ORDER BY sb
[ordered] SELECT s FROM {t} GROUP BY s HAVING s = 'APPLE' ORDER BY s
[ordered] SELECT b, MAX(s) FROM {t} GROUP BY b HAVING MAX(s) > 'Z' ORDER BY b
[ordered] SELECT b, AVG(a) FROM {t} GROUP BY b HAVING AVG(a) > 0.5 ORDER BY b
[ordered] SELECT b, AVG(d) FROM {t} GROUP BY b HAVING AVG(d) < 0 OR AVG(d) IS NULL ORDER BY b
[ordered] SELECT a, SUM(f) FROM {t} GROUP BY a HAVING SUM(f) IS NULL ORDER BY a
[ordered] SELECT a, MIN(d) FROM {t} GROUP BY a HAVING MIN(d) IS NOT NULL AND COUNT(*) > 3 ORDER BY a
[ordered] SELECT b, SUM(a) FROM {t} GROUP BY b HAVING NOT (SUM(a) < 0) ORDER BY b
[ordered] SELECT b, MAX(a) - MIN(a) AS spread FROM {t} GROUP BY b ORDER BY b
[ordered] SELECT b FROM {t} GROUP BY b HAVING MAX(a) - MIN(a) >= 30 ORDER BY b
[ordered] SELECT b FROM {t} GROUP BY b HAVING SUM(a) + 1 > COUNT(*) ORDER BY b
[ordered] SELECT b FROM {t} GROUP BY b HAVING COUNT(s) * 2 > COUNT(*) ORDER BY b
[ordered] SELECT b FROM {t} GROUP BY b HAVING SUM(d) / COUNT(d) > 0 ORDER BY b
[ordered] SELECT a, COUNT(*) FROM {t} GROUP BY a HAVING a > 0 AND COUNT(*) > 5 ORDER BY a
[ordered] SELECT a, COUNT(*) FROM {t} GROUP BY a HAVING a IS NULL ORDER BY a
[ordered] SELECT a, COUNT(*) FROM {t} GROUP BY a HAVING a <=> NULL ORDER BY a
[ordered] SELECT dt, COUNT(*) FROM {t} GROUP BY dt HAVING MAX(ts) >= '2022-06-01' ORDER BY dt
[ordered] SELECT dt, COUNT(*) FROM {t} GROUP BY dt HAVING dt < '2021-06-01' ORDER BY dt DESC
[ordered] SELECT b, COUNT(*) FROM {t} GROUP BY b HAVING COUNT(*) > 1000 ORDER BY b
SELECT COUNT(*) FROM {t} HAVING COUNT(*) > 0
SELECT COUNT(*), SUM(a) FROM {t} HAVING SUM(a) < -100000

# DISTINCT.
SELECT DISTINCT b FROM {t}
SELECT DISTINCT a FROM {t}
SELECT DISTINCT s FROM {t}
SELECT DISTINCT sb FROM {t}
SELECT DISTINCT d FROM {t}
SELECT DISTINCT f FROM {t}
SELECT DISTINCT dt FROM {t}
SELECT DISTINCT b, a FROM {t}
SELECT DISTINCT s, sb FROM {t}
SELECT DISTINCT a % 3, b FROM {t}
SELECT DISTINCT LOWER(s) FROM {t}
[ordered] SELECT DISTINCT b FROM {t} ORDER BY b
[ordered] SELECT DISTINCT b FROM {t} ORDER BY b DESC LIMIT 3
[ordered] SELECT DISTINCT a FROM {t} ORDER BY a LIMIT 5, 5
[ordered] SELECT DISTINCT s FROM {t} ORDER BY s
[ordered] SELECT DISTINCT s FROM {t} ORDER BY s DESC LIMIT 6
[ordered] SELECT DISTINCT sb FROM {t} ORDER BY sb
[ordered] SELECT DISTINCT d FROM {t} ORDER BY d DESC LIMIT 10
[ordered] SELECT DISTINCT b, s FROM {t} ORDER BY s, b
[ordered] SELECT DISTINCT dt FROM {t} ORDER BY dt LIMIT 4
SELECT DISTINCT b FROM {t} WHERE a > 1000
SELECT DISTINCT b FROM {t} LIMIT 3
SELECT DISTINCT s FROM {t} WHERE id IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
SELECT DISTINCT COUNT(*) FROM {t} GROUP BY b

# Statements the proxy refuses across shards on purpose (error 1235).
SELECT COUNT(DISTINCT b) FROM {t}
SELECT SUM(DISTINCT a) FROM {t}
SELECT b, COUNT(DISTINCT s) FROM {t} GROUP BY b
SELECT b, COUNT(*) FROM {t} GROUP BY b WITH ROLLUP
SELECT b, GROUP_CONCAT(a) FROM {t} GROUP BY b
SELECT STDDEV(a) FROM {t}
SELECT SQL_CALC_FOUND_ROWS id FROM {t} ORDER BY id LIMIT 5
SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM {t}
SELECT 1 + SUM(a) FROM {t}
SELECT SUM(a) / COUNT(*) FROM {t}
SELECT ROUND(AVG(a)) FROM {t}
SELECT *, COUNT(*) FROM {t}
SELECT id FROM {t} HAVING id > 5
SELECT b FROM {t} GROUP BY b HAVING SUM(a) % 2 = 0
SELECT b FROM {t} GROUP BY b HAVING MAX(s) LIKE 'a%'
SELECT b FROM {t} GROUP BY b HAVING COUNT(*) IN (50, 51, 52)
SELECT * FROM {t} ORDER BY 2, 1
[ordered] SELECT DISTINCT s FROM {t} WHERE NOT (s IS NULL) ORDER BY s
[ordered] SELECT DISTINCT s FROM {t} WHERE s IS NOT NULL ORDER BY s
