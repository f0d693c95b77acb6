package server_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/internal/mariadbtest"
)

// parity runs the same client code against MariaDB directly and through
// the proxy, each in its own database on the same server, and compares what
// the driver returned.
type parity struct {
	s *mariadbtest.Server
	p *proxy
}

func newParity(t *testing.T) *parity {
	t.Helper()
	s := backends(t)[0]
	e := &parity{s: s, p: startProxy(t, newConfig(t, s))}
	dbSetup(t, s, "par_direct", "par_proxy")
	return e
}

// compare runs f with a fresh handle on each side (DSN parameters params)
// and fails the test if the answers differ.
func (e *parity) compare(t *testing.T, params string, f func(t *testing.T, db *sql.DB) any) {
	t.Helper()
	direct := f(t, openDB(t, directDSN(e.s, "par_direct", params)))
	proxied := f(t, openDB(t, e.p.dsn("par_proxy", params)))
	if reflect.DeepEqual(direct, proxied) {
		return
	}
	d, dok := direct.([]string)
	p, pok := proxied.([]string)
	if !dok || !pok {
		t.Errorf("results differ (params %q)\ndirect: %s\nproxy:  %s", params, show(direct), show(proxied))
		return
	}
	if len(d) != len(p) {
		t.Errorf("results differ (params %q): direct has %d rows, proxy %d", params, len(d), len(p))
	}
	for i := range min(len(d), len(p)) {
		if d[i] != p[i] {
			t.Errorf("results differ (params %q) at row %d\ndirect: %s\nproxy:  %s", params, i, d[i], p[i])
		}
	}
}

func show(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 4000 {
		s = s[:4000] + "..."
	}
	return s
}

// anyRows runs a query and returns each row as the driver's values
// rendered with their Go types, so that type differences show too.
func anyRows(t *testing.T, db querier, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var b strings.Builder
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(renderValue(v))
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func renderValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case []byte:
		if len(x) > 64 {
			return fmt.Sprintf("[]byte(len %d sha256 %x)", len(x), sha256.Sum256(x))
		}
		return fmt.Sprintf("[]byte(%q)", x)
	case time.Time:
		return "time.Time(" + x.Format(time.RFC3339Nano) + " " + x.Location().String() + ")"
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

// columnTypes describes the result's column metadata as the driver sees it.
func columnTypes(t *testing.T, db querier, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cts {
		nullable, _ := c.Nullable()
		prec, scale, _ := c.DecimalSize()
		length, _ := c.Length()
		out = append(out, fmt.Sprintf("%s %s null=%v dec=%d,%d len=%d scan=%v", c.Name(), c.DatabaseTypeName(), nullable, prec, scale, length, c.ScanType()))
	}
	for rows.Next() {
	}
	return out
}

func TestParityCollations(t *testing.T) {
	e := newParity(t)
	for _, params := range []string{
		"collation=utf8mb4_unicode_ci",
		"collation=utf8mb4_bin",
		"collation=latin1_swedish_ci",
		"charset=latin1",
		"charset=utf8mb4&collation=utf8mb4_unicode_ci",
	} {
		t.Run(params, func(t *testing.T) {
			e.compare(t, params, func(t *testing.T, db *sql.DB) any {
				c := conn(t, db)
				var out []string
				out = append(out, anyRows(t, c, "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection")...)
				mustExec(t, c, "DROP TABLE IF EXISTS coll",
					"CREATE TABLE coll (id INT PRIMARY KEY, s VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci)",
					"INSERT INTO coll VALUES (1, 'héllo wörld'), (2, 'ASCII')")
				if _, err := c.ExecContext(t.Context(), "INSERT INTO coll VALUES (3, ?)", "prepared ünïcödé €"); err != nil {
					t.Fatal(err)
				}
				out = append(out, anyRows(t, c, "SELECT id, s, HEX(s), CHAR_LENGTH(s) FROM coll ORDER BY id")...)
				out = append(out, anyRows(t, c, "SELECT id, s FROM coll WHERE id > ? ORDER BY id", 0)...)
				out = append(out, anyRows(t, c, "SELECT 'a' = 'A', 'e' = 'é', 'ß' = 'ss', HEX('é'), COLLATION('x')")...)
				return out
			})
		})
	}
}

func TestParityTimeZones(t *testing.T) {
	e := newParity(t)
	for _, params := range []string{
		"parseTime=true&loc=UTC",
		"parseTime=true&loc=Asia%2FTokyo",
		"parseTime=true&loc=Asia%2FTokyo&time_zone=%27%2B09%3A00%27",
		"parseTime=true&loc=America%2FNew_York&time_zone=%27-05%3A00%27",
		"parseTime=false&time_zone=%27%2B05%3A30%27",
	} {
		t.Run(params, func(t *testing.T) {
			e.compare(t, params, func(t *testing.T, db *sql.DB) any {
				c := conn(t, db)
				var out []string
				out = append(out, anyRows(t, c, "SELECT @@time_zone")...)
				mustExec(t, c, "DROP TABLE IF EXISTS tz",
					"CREATE TABLE tz (id INT PRIMARY KEY, ts TIMESTAMP(6) NULL, dt DATETIME(6))",
					"INSERT INTO tz VALUES (1, '2024-01-02 03:04:05.5', '2024-01-02 03:04:05.5')")
				when := time.Date(2024, 3, 10, 1, 2, 3, 456789000, time.UTC)
				if _, err := c.ExecContext(t.Context(), "INSERT INTO tz VALUES (2, ?, ?)", when, when.In(time.FixedZone("x", 3600))); err != nil {
					t.Fatal(err)
				}
				out = append(out, anyRows(t, c, "SELECT id, ts, dt, UNIX_TIMESTAMP(ts) FROM tz ORDER BY id")...)
				out = append(out, anyRows(t, c, "SELECT id, ts, dt, UNIX_TIMESTAMP(ts) FROM tz WHERE id > ? ORDER BY id", 0)...)
				out = append(out, anyRows(t, c, "SELECT CONVERT_TZ('2024-06-01 12:00:00', @@time_zone, '+00:00')")...)
				return out
			})
		})
	}
}

func TestParityParseTime(t *testing.T) {
	e := newParity(t)
	for _, params := range []string{"parseTime=true", "parseTime=false"} {
		t.Run(params, func(t *testing.T) {
			e.compare(t, params, func(t *testing.T, db *sql.DB) any {
				mustExec(t, db, "DROP TABLE IF EXISTS dtt",
					"CREATE TABLE dtt (id INT PRIMARY KEY, d DATE, dt DATETIME(6), dt0 DATETIME, tm TIME, tm6 TIME(6), ts TIMESTAMP NULL, zd DATE, zdt DATETIME)",
					"INSERT INTO dtt VALUES (1, '2024-02-29', '2024-02-29 13:14:15.123456', '1999-12-31 23:59:59', '-838:59:59', '12:34:56.000789', '2030-01-01 00:00:00', '0000-00-00', '0000-00-00 00:00:00')",
					"INSERT INTO dtt VALUES (2, '1000-01-01', '9999-12-31 23:59:59.999999', '2000-01-01', '00:00:00', '838:59:59', '1970-01-02 00:00:00', '2024-00-00', NULL)",
					"INSERT INTO dtt (id) VALUES (3)")
				var out []string
				out = append(out, anyRows(t, db, "SELECT * FROM dtt ORDER BY id")...)
				out = append(out, anyRows(t, db, "SELECT * FROM dtt WHERE id > ? ORDER BY id", 0)...)
				when := time.Date(2021, 7, 8, 9, 10, 11, 120000000, time.UTC)
				if _, err := db.Exec("INSERT INTO dtt (id, d, dt, dt0, ts) VALUES (4, ?, ?, ?, ?)", when, when, when, when); err != nil {
					t.Fatal(err)
				}
				out = append(out, anyRows(t, db, "SELECT id, d, dt, dt0, ts FROM dtt WHERE id = ?", 4)...)
				out = append(out, columnTypes(t, db, "SELECT * FROM dtt WHERE id = ?", 1)...)
				return out
			})
		})
	}
}

// TestParityLargePackets moves a 20 MB LONGBLOB in both directions: as
// COM_STMT_SEND_LONG_DATA chunks and as one COM_QUERY larger than 16 MB
// (split into several packets), read back with the text and the binary
// protocol (a row larger than 16 MB is itself split).
func TestParityLargePackets(t *testing.T) {
	s := backends(t)[0]
	direct := openDB(t, directDSN(s, "", ""))
	// Connections opened from now on (the proxy's pool included) get the
	// larger limit.
	mustExec(t, direct, "SET GLOBAL max_allowed_packet = 67108864")
	cfg := newConfig(t, s)
	cfg.MaxAllowedPacket = 64 << 20 // as the server's, set above
	e := &parity{s: s, p: startProxy(t, cfg)}
	dbSetup(t, s, "par_direct", "par_proxy")

	blob := make([]byte, 20<<20)
	for i := range blob {
		blob[i] = byte(i*7 + i>>9)
	}
	want := fmt.Sprintf("%x", sha256.Sum256(blob))
	for _, params := range []string{"interpolateParams=false", "interpolateParams=true"} {
		t.Run(params, func(t *testing.T) {
			e.compare(t, params, func(t *testing.T, db *sql.DB) any {
				mustExec(t, db, "DROP TABLE IF EXISTS big", "CREATE TABLE big (id INT PRIMARY KEY, b LONGBLOB)")
				if _, err := db.Exec("INSERT INTO big VALUES (1, ?)", blob); err != nil {
					t.Fatalf("insert 20 MB: %v", err)
				}
				var out []string
				out = append(out, anyRows(t, db, "SELECT LENGTH(b), SHA2(b, 256) FROM big")...)
				for _, q := range []struct {
					sql  string
					args []any
				}{{"SELECT b, 'after' FROM big", nil}, {"SELECT b, 'after' FROM big WHERE id = ?", []any{1}}} {
					var got []byte
					var after string
					if err := db.QueryRow(q.sql, q.args...).Scan(&got, &after); err != nil {
						t.Fatalf("%s: %v", q.sql, err)
					}
					if sum := fmt.Sprintf("%x", sha256.Sum256(got)); sum != want || after != "after" {
						t.Errorf("%s: read back %d bytes, sha256 %s, then %q; want %d bytes %s", q.sql, len(got), sum, after, len(blob), want)
					}
				}
				if got := queryValue(t, db, "SELECT 1"); got != "1" {
					t.Errorf("after the large rows: %s", got)
				}
				mustExec(t, db, "DROP TABLE big")
				return out
			})
		})
	}
}

func TestParityStoredProcedure(t *testing.T) {
	e := newParity(t)
	for _, params := range []string{"", "multiStatements=true"} {
		t.Run("params="+params, func(t *testing.T) {
			e.compare(t, params, func(t *testing.T, db *sql.DB) any {
				mustExec(t, db, "DROP PROCEDURE IF EXISTS twosets", "DROP PROCEDURE IF EXISTS fails",
					`CREATE PROCEDURE twosets(IN n INT)
					BEGIN
						SELECT n AS a;
						SELECT 'x' AS b, n * 2 AS c UNION ALL SELECT 'y', n * 3;
					END`,
					`CREATE PROCEDURE fails()
					BEGIN
						SELECT 1 AS first;
						SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom';
					END`)
				var out []string
				for _, q := range []struct {
					sql  string
					args []any
				}{{"CALL twosets(5)", nil}, {"CALL twosets(?)", []any{7}}, {"CALL fails()", nil}, {"CALL fails()", []any{}}} {
					sets, err := resultSets(db, q.sql, q.args...)
					out = append(out, fmt.Sprintf("%s %v: %v err=%v", q.sql, q.args, sets, err))
				}
				out = append(out, queryValue(t, db, "SELECT 'usable'"))
				return out
			})
		})
	}
}

func TestParityContextCancel(t *testing.T) {
	e := newParity(t)
	e.compare(t, "", func(t *testing.T, db *sql.DB) any {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		rows, err := db.QueryContext(ctx, "SELECT SLEEP(5)")
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("cancelled query returned after %v", d)
		}
		out := []string{fmt.Sprintf("deadline=%v", errors.Is(err, context.DeadlineExceeded))}
		for range 3 {
			out = append(out, queryValue(t, db, "SELECT 'next'"))
		}
		return out
	})
}

func TestParityCompression(t *testing.T) {
	e := newParity(t)
	blob := []byte(strings.Repeat("compressible ", 200000))
	e.compare(t, "compress=true&multiStatements=true", func(t *testing.T, db *sql.DB) any {
		var out []string
		mustExec(t, db, "DROP TABLE IF EXISTS cz", "CREATE TABLE cz (id INT PRIMARY KEY, b LONGBLOB)")
		if _, err := db.Exec("INSERT INTO cz VALUES (1, ?)", blob); err != nil {
			t.Fatal(err)
		}
		out = append(out, anyRows(t, db, "SELECT id, b FROM cz")...)
		out = append(out, anyRows(t, db, "SELECT id, b FROM cz WHERE id = ?", 1)...)
		out = append(out, anyRows(t, db, "SELECT REPEAT('a', 70000), RANDOM_BYTES(0)")...)
		out = append(out, anyRows(t, db, "SELECT seq, MD5(seq) FROM seq_1_to_3000")...)
		out = append(out, anyRows(t, db, "SELECT ? + 1, ?", 41, "param")...)
		sets, err := resultSets(db, "SELECT 1; SELECT 2; SELECT * FROM no_such_db.nope; SELECT 4")
		out = append(out, fmt.Sprintf("%v %v", sets, err))
		_, err = db.Exec("SELEKT")
		out = append(out, fmt.Sprint(err))
		return out
	})
}

// TestParityPreparedTypes inserts every column type with placeholders
// (server-side prepared statements) and reads the rows back with the binary
// and the text protocol.
func TestParityPreparedTypes(t *testing.T) {
	e := newParity(t)
	const create = `CREATE TABLE types (
		id INT PRIMARY KEY,
		ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
		mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
		f FLOAT, d DOUBLE, dc DECIMAL(30,10), bt BIT(8),
		dt DATE, dtm DATETIME(6), ts TIMESTAMP NULL, tm TIME(3), y YEAR,
		c CHAR(10), vc VARCHAR(100), bn BINARY(4), vb VARBINARY(100),
		tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
		tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
		e ENUM('a','b','c'), st SET('x','y','z'), j JSON)`
	const insert = "INSERT INTO types VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	when := time.Date(2023, 11, 5, 6, 7, 8, 901234000, time.UTC)
	binary := []byte{0, 1, 0xfe, 0xff}
	rowsIn := [][]any{
		{1, int8(math.MinInt8), uint8(math.MaxUint8), int16(math.MinInt16), uint16(math.MaxUint16),
			-8388608, 16777215, int32(math.MinInt32), uint32(math.MaxUint32), int64(math.MinInt64), uint64(math.MaxUint64),
			float32(3.25), math.Pi, "12345678901234567890.0123456789", []byte{0xa5},
			when, when, when, "-838:59:59.999", 2155,
			"char", "varchar ✓", binary, binary,
			"tiny", "text", strings.Repeat("m", 70000), strings.Repeat("l", 1<<20),
			binary, []byte(strings.Repeat("\x00\xff", 1000)), []byte(strings.Repeat("b", 70000)), []byte(strings.Repeat("\xfe", 1<<20)),
			"b", "x,z", `{"k": [1, 2.5, "s", null, true]}`},
		{2, int8(math.MaxInt8), uint8(0), int16(math.MaxInt16), uint16(0),
			8388607, 0, int32(math.MaxInt32), uint32(0), int64(math.MaxInt64), uint64(1 << 63),
			float32(-1.5e-10), -1e300, "-0.0000000001", []byte{0},
			"1000-01-01", "9999-12-31 23:59:59.999999", "1970-01-02 00:00:00", "00:00:00", 1901,
			"", "", []byte{}, []byte{},
			"", "", "", "",
			[]byte{}, []byte{}, []byte{}, []byte{},
			"a", "", `[]`},
		{3, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
	for _, params := range []string{"parseTime=true", "parseTime=false&interpolateParams=false"} {
		t.Run(params, func(t *testing.T) {
			e.compare(t, params, func(t *testing.T, db *sql.DB) any {
				mustExec(t, db, "DROP TABLE IF EXISTS types", create)
				stmt, err := db.Prepare(insert)
				if err != nil {
					t.Fatal(err)
				}
				defer stmt.Close()
				for _, r := range rowsIn {
					if _, err := stmt.Exec(r...); err != nil {
						t.Fatalf("insert row %v: %v", r[0], err)
					}
				}
				var out []string
				out = append(out, anyRows(t, db, "SELECT * FROM types WHERE id > ? ORDER BY id", 0)...)
				out = append(out, anyRows(t, db, "SELECT * FROM types ORDER BY id")...)
				out = append(out, columnTypes(t, db, "SELECT * FROM types WHERE id = ?", 1)...)
				// Values that must survive exactly, whatever the comparison.
				var biu uint64
				var bi int64
				var dc string
				if err := db.QueryRow("SELECT biu, bi, dc FROM types WHERE id = ?", 1).Scan(&biu, &bi, &dc); err != nil {
					t.Fatal(err)
				}
				if biu != math.MaxUint64 || bi != math.MinInt64 || dc != "12345678901234567890.0123456789" {
					t.Errorf("read back biu=%d bi=%d dc=%s", biu, bi, dc)
				}
				// The same statement executed many times on one prepared
				// handle, and NULLs in every column.
				q, err := db.Prepare("SELECT COUNT(*) FROM types WHERE id = ? AND ti IS NULL AND j IS NULL AND lb IS NULL")
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				for i := range 20 {
					var n int
					if err := q.QueryRow(3).Scan(&n); err != nil || n != 1 {
						t.Fatalf("execution %d: %d %v", i, n, err)
					}
				}
				return out
			})
		})
	}
}

// TestParityLoadDataLocal streams a LOAD DATA LOCAL INFILE file (several
// MB, so many packets) from the client through the proxy.
func TestParityLoadDataLocal(t *testing.T) {
	e := newParity(t)
	var b strings.Builder
	for i := range 40000 {
		fmt.Fprintf(&b, "%d\tline %d %s\n", i, i, strings.Repeat("v", i%50))
	}
	data := b.String()
	gomysql.RegisterReaderHandler("parity_load", func() io.Reader { return strings.NewReader(data) })
	t.Cleanup(func() { gomysql.DeregisterReaderHandler("parity_load") })
	e.compare(t, "", func(t *testing.T, db *sql.DB) any {
		mustExec(t, db, "DROP TABLE IF EXISTS ld", "CREATE TABLE ld (id INT PRIMARY KEY, s VARCHAR(100))")
		res, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::parity_load' INTO TABLE ld")
		if err != nil {
			t.Fatalf("LOAD DATA LOCAL: %v", err)
		}
		n, _ := res.RowsAffected()
		out := []string{fmt.Sprintf("affected %d", n)}
		out = append(out, anyRows(t, db, "SELECT COUNT(*), SUM(id), MD5(GROUP_CONCAT(s ORDER BY id SEPARATOR '')) FROM ld")...)
		_, err = db.Exec("LOAD DATA LOCAL INFILE 'Reader::parity_load' INTO TABLE ld")
		out = append(out, fmt.Sprint(err))
		out = append(out, queryValue(t, db, "SELECT 'usable'"))
		return out
	})
}
