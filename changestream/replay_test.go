package changestream

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// replayCol is one column of the replay test's table: its definition and
// a generator of SQL literals for it (NULL included).
type replayCol struct {
	name, def string
	gen       func(r *rand.Rand) string
}

func hexLit(b []byte) string { return "X'" + hex.EncodeToString(b) + "'" }

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// everyByte is 0..255, then 255..0.
func everyByte() []byte {
	b := make([]byte, 512)
	for i := range 256 {
		b[i], b[511-i] = byte(i), byte(i)
	}
	return b
}

func pick(r *rand.Rand, vals ...string) string { return vals[r.IntN(len(vals))] }

func randRunes(r *rand.Rand, n int, ranges ...[2]rune) string {
	var b strings.Builder
	for range n {
		rg := ranges[r.IntN(len(ranges))]
		b.WriteRune(rg[0] + rune(r.IntN(int(rg[1]-rg[0]+1))))
	}
	return b.String()
}

func replayCols() []replayCol {
	num := func(vals ...string) func(*rand.Rand) string {
		return func(r *rand.Rand) string { return pick(r, vals...) }
	}
	decimal := func(intDigits, scale int) func(*rand.Rand) string {
		return func(r *rand.Rand) string {
			var b strings.Builder
			if r.IntN(2) == 0 {
				b.WriteByte('-')
			}
			for range 1 + r.IntN(intDigits) {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
			if scale > 0 {
				b.WriteByte('.')
				for range scale {
					b.WriteByte(byte('0' + r.IntN(10)))
				}
			}
			return b.String()
		}
	}
	utf8Text := func(n int) func(*rand.Rand) string {
		return func(r *rand.Rand) string {
			return mysql.QuoteString(randRunes(r, r.IntN(n+1), [2]rune{0x20, 0x7e}, [2]rune{0xa0, 0x24f}, [2]rune{0x4e00, 0x4f00}, [2]rune{0x1f600, 0x1f64f}), "utf8mb4")
		}
	}
	return []replayCol{
		{"ti", "TINYINT", num("-128", "127", "0", "-1")},
		{"tiu", "TINYINT UNSIGNED", num("0", "255", "128")},
		{"si", "SMALLINT", num("-32768", "32767", "7")},
		{"siu", "SMALLINT UNSIGNED", num("0", "65535", "32768")},
		{"mi", "MEDIUMINT", num("-8388608", "8388607", "-5")},
		{"miu", "MEDIUMINT UNSIGNED", num("0", "16777215", "8388608")},
		{"i", "INT", num("-2147483648", "2147483647", "42")},
		{"iu", "INT UNSIGNED", num("0", "4294967295", "2147483648")},
		{"bi", "BIGINT", num("-9223372036854775808", "9223372036854775807", "-3")},
		{"biu", "BIGINT UNSIGNED", num("0", "18446744073709551615", "9223372036854775808", "9223372036854775807")},
		{"f", "FLOAT", num("1.5", "-3.4028234e38", "1.17549435e-38", "0.1", "123456.7", "-0")},
		{"d", "DOUBLE", num("0.1", "1.7976931348623157e308", "-2.2250738585072014e-308", "4.9e-324", "3.141592653589793", "1e21")},
		{"dec1", "DECIMAL(30,10)", decimal(20, 10)},
		{"dec2", "DECIMAL(65,30)", decimal(35, 30)},
		{"dec3", "DECIMAL(5,0)", decimal(5, 0)},
		{"dec4", "DECIMAL(10,4) UNSIGNED", func(r *rand.Rand) string { return strings.TrimPrefix(decimal(6, 4)(r), "-") }},
		{"b1", "BIT(1)", num("b'0'", "b'1'")},
		{"b13", "BIT(13)", num("b'1010101010101'", "0", "8191")},
		{"b64", "BIT(64)", func(r *rand.Rand) string { return fmt.Sprint(r.Uint64()) }},
		{"y", "YEAR", num("1901", "2155", "0", "2026")},
		{"dt", "DATE", num("'1000-01-01'", "'9999-12-31'", "'0000-00-00'", "'2024-02-29'")},
		{"tm0", "TIME", num("'-838:59:59'", "'838:59:59'", "'00:00:00'", "'-00:00:01'", "'12:34:56'")},
		{"tm2", "TIME(2)", num("'-00:00:00.01'", "'-00:00:01.5'", "'838:59:59.99'", "'00:00:00.10'")},
		{"tm3", "TIME(3)", num("'-838:59:59.000'", "'-00:00:00.001'", "'01:02:03.456'", "'-12:00:00.999'")},
		{"tm6", "TIME(6)", num("'838:59:59.999999'", "'-838:59:59.999999'", "'-00:00:00.000001'", "'00:00:00.5'")},
		{"dtt0", "DATETIME", num("'1000-01-01 00:00:00'", "'9999-12-31 23:59:59'", "'0000-00-00 00:00:00'")},
		{"dtt6", "DATETIME(6)", num("'2024-02-29 23:59:59.999999'", "'1000-01-01 00:00:00.000001'", "'2026-11-27 08:00:00.5'")},
		{"ts6", "TIMESTAMP(6) NULL", num("'1970-01-01 00:00:01.000001'", "'2038-01-19 03:14:07.999999'", "'2026-06-01 12:00:00.25'")},
		{"ch", "CHAR(10)", utf8Text(10)},
		{"vc", "VARCHAR(300)", utf8Text(300)},
		{"tx", "TEXT", utf8Text(1000)},
		{"uca", "VARCHAR(20) COLLATE utf8mb4_uca1400_ai_ci", utf8Text(20)},
		{"bn", "BINARY(8)", func(r *rand.Rand) string {
			return pick(r, hexLit([]byte{0, 0xff, 0x80, 0, 0x7f, 0, 0, 0}), hexLit(randBytes(r, r.IntN(9))), "X''", hexLit([]byte{0, 0, 0, 0, 0, 0, 0, 0}))
		}},
		{"vb", "VARBINARY(600)", func(r *rand.Rand) string { return pick(r, hexLit(everyByte()), hexLit(randBytes(r, r.IntN(600)))) }},
		{"tb", "TINYBLOB", func(r *rand.Rand) string { return hexLit(randBytes(r, r.IntN(256))) }},
		{"bl", "BLOB", func(r *rand.Rand) string {
			return pick(r, hexLit(everyByte()), hexLit(randBytes(r, r.IntN(3000))), hexLit([]byte{0xfe, 0}))
		}},
		{"mb", "MEDIUMBLOB", func(r *rand.Rand) string { return hexLit(randBytes(r, r.IntN(70000))) }},
		{"lb", "LONGBLOB", func(r *rand.Rand) string { return hexLit(append(everyByte(), randBytes(r, r.IntN(100))...)) }},
		{"l1", "VARCHAR(600) CHARACTER SET latin1", func(r *rand.Rand) string {
			return "_latin1 " + pick(r, hexLit(everyByte()), hexLit(randBytes(r, r.IntN(600))))
		}},
		{"l1c", "CHAR(8) CHARACTER SET latin1", func(r *rand.Rand) string { return "_latin1 " + hexLit(randBytes(r, r.IntN(9))) }},
		{"l1t", "TEXT CHARACTER SET latin1", func(r *rand.Rand) string { return "_latin1 " + hexLit(randBytes(r, r.IntN(2000))) }},
		{"g", "VARCHAR(100) CHARACTER SET gbk", func(r *rand.Rand) string {
			return mysql.QuoteString(randRunes(r, r.IntN(100), [2]rune{0x20, 0x7e}, [2]rune{0x4e00, 0x9fa5}, [2]rune{0x3001, 0x3002}), "utf8mb4")
		}},
		{"gt", "TEXT CHARACTER SET gbk", func(r *rand.Rand) string {
			return mysql.QuoteString(randRunes(r, r.IntN(500), [2]rune{0x4e00, 0x9fa5}, [2]rune{0xff01, 0xff5e}), "utf8mb4")
		}},
		{"cp", "VARCHAR(50) CHARACTER SET cp1251", func(r *rand.Rand) string {
			return mysql.QuoteString(randRunes(r, r.IntN(50), [2]rune{0x410, 0x44f}), "utf8mb4")
		}},
		{"u2", "VARCHAR(50) CHARACTER SET ucs2", func(r *rand.Rand) string {
			return mysql.QuoteString(randRunes(r, r.IntN(50), [2]rune{0x20, 0xd7ff}), "utf8mb4")
		}},
		{"sj", "VARCHAR(50) CHARACTER SET sjis", func(r *rand.Rand) string {
			return mysql.QuoteString(randRunes(r, r.IntN(50), [2]rune{0x3041, 0x3093}), "utf8mb4")
		}},
		{"j", "JSON", num(`'{"k": "v\\u00e9", "n": [1, 2.5, null, true], "s": "\\"q\\\\"}'`, `'[]'`, `'"\\u0000x"'`, `'{"emoji": "😀"}'`)},
		{"e", "ENUM('a','b c','ü','x,y')", num("'a'", "'b c'", "'ü'", "'x,y'", "2")},
		{"s", "SET('x','y','ö','')", num("''", "'x'", "'x,ö'", "'y,ö,x'", "7")},
		{"geo", "GEOMETRY", num("ST_GeomFromText('POINT(1.5 -2.25)')", "ST_GeomFromText('LINESTRING(0 0,1 1,2 5)', 4326)",
			"ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0),(1 1,2 1,2 2,1 1))')")},
		{"pt", "POINT", num("POINT(0, 0)", "POINT(-180, 90.000001)")},
		{"ip", "INET6", num("'::1'", "'2001:db8::ff00:42:8329'", "'::ffff:192.0.2.1'")},
		{"uu", "UUID", func(r *rand.Rand) string {
			b := randBytes(r, 16)
			// Version 4, or 1 (time-based, which MariaDB stores swapped).
			b[6], b[8] = b[6]&0x0f|byte(pick(r, "\x10", "\x40")[0]), b[8]&0x3f|0x80
			return "'" + hex.EncodeToString(b) + "'"
		}},
	}
}

// TestReplay: a consumer reads the JSON lines of a stream over a table
// with every MariaDB type while four writers change it, replays each
// change on another server from its JSON alone (base64 values by the
// change's types, everything else as a literal), and the replayed table
// equals the source row by row, byte for byte.
func TestReplay(t *testing.T) {
	src := db(t)
	if replica == nil {
		t.Skip("needs two servers")
	}
	dst, err := sql.Open("mysql", replica.DSN("")+"&time_zone=%27%2B00%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	cols := replayCols()
	var def strings.Builder
	def.WriteString("CREATE TABLE rp.every (id INT PRIMARY KEY")
	for _, c := range cols {
		fmt.Fprintf(&def, ", %s %s", mysql.QuoteIdent(c.name), c.def)
	}
	def.WriteString(")")
	for _, d := range []*sql.DB{src, dst} {
		exec(t, d, "DROP DATABASE IF EXISTS rp", "CREATE DATABASE rp", def.String(),
			"CREATE TABLE rp.bkey (k VARBINARY(16) PRIMARY KEY, l VARCHAR(10) CHARACTER SET latin1, v INT)")
	}
	from := pos(t, src)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := &config.Config{}
	changes, errc, err := Subscribe(ctx, []Source{{Node: "n1", Addr: server.Addr, User: server.User, Password: server.Password}}, Names(cfg),
		Options{Tables: []string{"rp.every", "rp.bkey"}, From: map[string]string{"n1": from}, Encode: true, Marks: true})
	if err != nil {
		t.Fatal(err)
	}

	// Four writers: inserts, updates of random columns, deletes, in
	// transactions of one to three statements.
	const writers, rounds = 4, 60
	var wg sync.WaitGroup
	werr := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 33))
			conn, err := src.Conn(ctx)
			if err != nil {
				werr <- err
				return
			}
			defer conn.Close()
			row := func(id int) string {
				var b strings.Builder
				fmt.Fprintf(&b, "INSERT INTO rp.every (id")
				for _, c := range cols {
					b.WriteString(", " + mysql.QuoteIdent(c.name))
				}
				fmt.Fprintf(&b, ") VALUES (%d", id)
				for _, c := range cols {
					if r.IntN(6) == 0 {
						b.WriteString(", NULL")
					} else {
						b.WriteString(", " + c.gen(r))
					}
				}
				return b.String() + ")"
			}
			var live []int
			for i := range rounds {
				var stmts []string
				for range 1 + r.IntN(3) {
					switch k := r.IntN(10); {
					case k < 5 || len(live) == 0:
						id := w*100000 + i*10 + len(stmts)
						live = append(live, id)
						stmts = append(stmts, row(id))
						key := randBytes(r, 1+r.IntN(16))
						stmts = append(stmts, fmt.Sprintf("INSERT INTO rp.bkey VALUES (%s, _latin1 %s, %d)", hexLit(key), hexLit(randBytes(r, r.IntN(10))), id))
					case k < 8:
						id := live[r.IntN(len(live))]
						c := cols[r.IntN(len(cols))]
						stmts = append(stmts, fmt.Sprintf("UPDATE rp.every SET %s = %s WHERE id = %d", mysql.QuoteIdent(c.name), c.gen(r), id),
							fmt.Sprintf("UPDATE rp.bkey SET k = %s, l = _latin1 %s WHERE v = %d", hexLit(randBytes(r, 1+r.IntN(16))), hexLit(randBytes(r, r.IntN(10))), id))
					default:
						j := r.IntN(len(live))
						stmts = append(stmts, fmt.Sprintf("DELETE FROM rp.every WHERE id = %d", live[j]), fmt.Sprintf("DELETE FROM rp.bkey WHERE v = %d", live[j]))
						live = append(live[:j], live[j+1:]...)
					}
				}
				if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
					werr <- err
					return
				}
				for _, q := range stmts {
					if _, err := conn.ExecContext(ctx, q); err != nil {
						conn.ExecContext(ctx, "ROLLBACK")
						if strings.Contains(err.Error(), "Duplicate entry") || strings.Contains(err.Error(), "Deadlock") {
							break // a random binary key met another, or writers met: skip the transaction
						}
						werr <- fmt.Errorf("%.300s: %w", q, err)
						return
					}
				}
				if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
					werr <- err
					return
				}
			}
		}()
	}
	// The consumer: everything it knows comes from the JSON lines.
	done := make(chan struct{})
	var until gmysql.GTIDSet
	var untilMu sync.Mutex
	go func() {
		wg.Wait()
		close(werr)
		var p string
		if err := src.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			p = "0-0-999999999" // never reached: the test times out and says so
		}
		untilMu.Lock()
		until, _ = gmysql.ParseMariadbGTIDSet(p)
		untilMu.Unlock()
		close(done)
	}()
	applied := 0
	for ch := range changes {
		if ch.Op == "mark" {
			select {
			case <-done:
				untilMu.Lock()
				at, _ := gmysql.ParseMariadbGTIDSet(ch.Pos)
				reached := at.Contain(until)
				untilMu.Unlock()
				if reached {
					cancel()
				}
			default:
			}
			continue
		}
		if err := replayLine(dst, ch.JSON); err != nil {
			t.Fatalf("replaying %.400s: %v", ch.JSON, err)
		}
		applied++
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for err := range werr {
		t.Fatal(err)
	}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatal("the stream did not reach the writers' end in time")
	}
	t.Logf("%d changes replayed", applied)
	if applied < writers*rounds {
		t.Fatalf("only %d changes", applied)
	}
	for _, q := range []string{"SELECT * FROM rp.every ORDER BY id", "SELECT * FROM rp.bkey ORDER BY k"} {
		a, b := dump(t, src, q), dump(t, dst, q)
		if len(a) != len(b) {
			t.Errorf("%s: %d rows at the source, %d replayed", q, len(a), len(b))
		}
		for i := 0; i < min(len(a), len(b)); i++ {
			if a[i] != b[i] {
				t.Errorf("%s: row %d differs:\nsource   %s\nreplayed %s", q, i, a[i], b[i])
				break
			}
		}
	}
}

// dump reads rows as text, each value hex-encoded (NULL as NULL), with
// TIMESTAMPs in UTC.
func dump(t *testing.T, d *sql.DB, q string) []string {
	t.Helper()
	conn, err := d.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "SET time_zone = '+00:00', character_set_results = binary"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(names))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			if v == nil {
				fmt.Fprintf(&b, "%s=NULL ", names[i])
			} else {
				fmt.Fprintf(&b, "%s=%x ", names[i], []byte(v))
			}
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// replayLine applies one JSON change to d the way an outside consumer
// would: strings of binary types (by the change's types) are base64,
// every other string is UTF-8 text, numbers are literals.
func replayLine(d *sql.DB, line []byte) error {
	var ch struct {
		Table         string
		Op            string
		Before, After map[string]any
		Types         map[string]string
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&ch); err != nil {
		return err
	}
	lit := func(col string, v any) (string, error) {
		switch x := v.(type) {
		case nil:
			return "NULL", nil
		case json.Number:
			return string(x), nil
		case string:
			if base64Type(ch.Types[col]) {
				b, err := base64.StdEncoding.DecodeString(x)
				if err != nil {
					return "", fmt.Errorf("column %s: %w", col, err)
				}
				return hexLit(b), nil
			}
			return mysql.QuoteString(x, "utf8mb4"), nil
		}
		return "", fmt.Errorf("column %s: unexpected JSON value %T", col, v)
	}
	img := ch.After
	if img == nil {
		img = ch.Before
	}
	names := make([]string, 0, len(img))
	for k := range img {
		names = append(names, k)
	}
	sort.Strings(names)
	key := "id"
	if ch.Table == "rp.bkey" {
		key = "k"
	}
	table := "rp." + strings.TrimPrefix(ch.Table, "rp.")
	var q string
	switch ch.Op {
	case "insert", "update":
		var cl, vl []string
		for _, n := range names {
			l, err := lit(n, ch.After[n])
			if err != nil {
				return err
			}
			cl, vl = append(cl, mysql.QuoteIdent(n)), append(vl, l)
		}
		q = "INSERT INTO " + table + " (" + strings.Join(cl, ",") + ") VALUES (" + strings.Join(vl, ",") + ")"
		if ch.Op == "update" {
			k, err := lit(key, ch.Before[key])
			if err != nil {
				return err
			}
			if _, err := d.Exec("DELETE FROM " + table + " WHERE " + key + " = " + k); err != nil {
				return err
			}
		}
	case "delete":
		k, err := lit(key, ch.Before[key])
		if err != nil {
			return err
		}
		q = "DELETE FROM " + table + " WHERE " + key + " = " + k
	default:
		return fmt.Errorf("op %q", ch.Op)
	}
	_, err := d.Exec(q)
	return err
}

// base64Type reports whether a change's type has base64 values (the table
// in docs/change-streams.md).
func base64Type(typ string) bool {
	name, _, _ := strings.Cut(typ, "(")
	switch name {
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry":
		return true
	}
	return false
}
