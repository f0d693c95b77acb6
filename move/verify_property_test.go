package move_test

import (
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/mysql"
)

// verifyRounds is how many random schemas TestVerifyProperty tries: a few
// in make test, many under make fuzz (-verify.rounds).
var verifyRounds = flag.Int("verify.rounds", 10, "random schemas for TestVerifyProperty")

// propNames are column names a verify query could confuse with its own:
// SQL keywords, function names, the verify's own derived names, names
// that need quoting.
var propNames = []string{"b", "h", "x", "n", "N", "sg_bucket", "sg_hash", "sg_rows", "select", "from", "where", "group", "by",
	"order", "count", "sum", "md5", "crc32", "concat", "ifnull", "length", "cast", "binary", "key", "primary", "null", "1",
	"a b", "a`b", "bit_xor", "conv", "left", "right", "unsigned", "id", "value", "rows", "div", "in"}

type propType struct {
	def string
	gen func(r *rand.Rand) string
}

func propText(r *rand.Rand, n int) string {
	alphabet := []string{"a", "A", "b", "B", " ", "\\", "'", "%", "é", "É", "ß", "中", "0", "9", "😀"}
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	s := b.String()
	if r.IntN(4) == 0 {
		s += "  " // trailing spaces: equal to s under PAD SPACE collations
	}
	return mysql.QuoteString(s, "utf8mb4")
}

func propBytes(r *rand.Rand, n int) string {
	b := make([]byte, r.IntN(n+1))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return "X'" + hex.EncodeToString(b) + "'"
}

var propTypes = []propType{
	{"INT", func(r *rand.Rand) string { return fmt.Sprint(r.Int32() - 1<<30) }},
	{"BIGINT UNSIGNED", func(r *rand.Rand) string { return fmt.Sprint(r.Uint64()) }},
	{"TINYINT", func(r *rand.Rand) string { return fmt.Sprint(r.IntN(256) - 128) }},
	{"DECIMAL(20,6)", func(r *rand.Rand) string { return fmt.Sprintf("%d.%06d", r.IntN(2e9)-1e9, r.IntN(1e6)) }},
	{"FLOAT", func(r *rand.Rand) string { return fmt.Sprint(r.Float32()*2e6 - 1e6) }},
	{"DOUBLE", func(r *rand.Rand) string { return fmt.Sprint(r.NormFloat64() * 1e10) }},
	{"BIT(10)", func(r *rand.Rand) string { return fmt.Sprint(r.IntN(1024)) }},
	{"YEAR", func(r *rand.Rand) string { return fmt.Sprint(1901 + r.IntN(255)) }},
	{"DATE", func(r *rand.Rand) string {
		return fmt.Sprintf("'%04d-%02d-%02d'", 1000+r.IntN(9000), 1+r.IntN(12), 1+r.IntN(28))
	}},
	{"TIME(3)", func(r *rand.Rand) string {
		return fmt.Sprintf("'%d:%02d:%02d.%03d'", r.IntN(1600)-800, r.IntN(60), r.IntN(60), r.IntN(1000))
	}},
	{"DATETIME(6)", func(r *rand.Rand) string {
		return fmt.Sprintf("'%04d-%02d-%02d %02d:%02d:%02d.%06d'", 1000+r.IntN(9000), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e6))
	}},
	{"TIMESTAMP(2) NULL", func(r *rand.Rand) string {
		return fmt.Sprintf("FROM_UNIXTIME(%d.%02d)", 1+r.IntN(2e9), r.IntN(100))
	}},
	{"CHAR(6) COLLATE utf8mb4_general_ci", func(r *rand.Rand) string { return propText(r, 4) }},
	{"VARCHAR(30) COLLATE utf8mb4_bin", func(r *rand.Rand) string { return propText(r, 20) }},
	{"VARCHAR(30) COLLATE utf8mb4_uca1400_ai_ci", func(r *rand.Rand) string { return propText(r, 20) }},
	{"VARCHAR(30) COLLATE utf8mb4_nopad_bin", func(r *rand.Rand) string { return propText(r, 20) }},
	{"VARCHAR(30) CHARACTER SET latin1", func(r *rand.Rand) string { return "_latin1 " + propBytes(r, 20) }},
	{"TEXT CHARACTER SET gbk", func(r *rand.Rand) string {
		return mysql.QuoteString(strings.Repeat("中文", r.IntN(4))+"x", "utf8mb4")
	}},
	{"TEXT", func(r *rand.Rand) string { return propText(r, 40) }},
	{"BINARY(4)", func(r *rand.Rand) string { return propBytes(r, 4) }},
	{"VARBINARY(30)", func(r *rand.Rand) string { return propBytes(r, 30) }},
	{"BLOB", func(r *rand.Rand) string { return propBytes(r, 300) }},
	{"JSON", func(r *rand.Rand) string { return fmt.Sprintf(`'{"k": %d, "s": "a\\u00e9"}'`, r.IntN(100)) }},
	{"ENUM('a','b','c d','')", func(r *rand.Rand) string { return []string{"'a'", "'b'", "'c d'", "''"}[r.IntN(4)] }},
	{"SET('x','y','z')", func(r *rand.Rand) string { return []string{"''", "'x'", "'x,z'", "'y'"}[r.IntN(4)] }},
	{"GEOMETRY", func(r *rand.Rand) string {
		return fmt.Sprintf("ST_GeomFromText('POINT(%d %d)')", r.IntN(100), r.IntN(100))
	}},
	{"INET6", func(r *rand.Rand) string { return fmt.Sprintf("'2001:db8::%x'", r.IntN(65536)) }},
	{"UUID", func(r *rand.Rand) string {
		return fmt.Sprintf("'%08x-%04x-%d%03x-a%03x-%012x'", r.Uint32(), r.IntN(65536), 1+3*r.IntN(2), r.IntN(4096), r.IntN(4096), r.Uint64()>>16)
	}},
}

// TestVerifyProperty: over random tables (column names taken from SQL
// keywords and the verify's own names, every kind of type, NULLs,
// collations that call different strings equal, an integer key or a
// composite one), the verify reports a copy equal, and reports any one
// changed byte (or NULL for a value, or a value for a NULL) in any column.
// go test ./move -run TestVerifyProperty -verify.rounds=200 runs longer
// (make fuzz).
func TestVerifyProperty(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	src, dst := cluster.Servers[0], cluster.Servers[1]
	sdb, ddb := open(t, src, ""), open(t, dst, "")
	for _, d := range []*sql.DB{sdb, ddb} {
		exec(t, d, "DROP DATABASE IF EXISTS vp", "CREATE DATABASE vp")
	}
	var detected, skipped int
	for round := range *verifyRounds {
		r := rand.New(rand.NewPCG(uint64(round), 33))
		d, s := propRound(t, r, src, dst, sdb, ddb)
		detected += d
		skipped += s
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
	t.Logf("%d rounds: %d single-byte changes reported, %d changes skipped (refused by the server or no change to the stored value)",
		*verifyRounds, detected, skipped)
	if detected < *verifyRounds*5 {
		t.Errorf("only %d changes tried", detected)
	}
}

// propRound creates one random table on both servers, copies its rows and
// checks the verify; it returns the changes detected and skipped.
func propRound(t *testing.T, r *rand.Rand, src, dst *mariadbtest.Server, sdb, ddb *sql.DB) (detected, skipped int) {
	t.Helper()
	used := map[string]bool{}
	name := func() string {
		for {
			n := propNames[r.IntN(len(propNames))]
			if r.IntN(3) == 0 {
				n = fmt.Sprintf("%s%d", n, r.IntN(10))
			}
			if !used[strings.ToLower(n)] {
				used[strings.ToLower(n)] = true
				return n
			}
		}
	}
	type col struct {
		name string
		typ  propType
		pk   bool
	}
	var cols []col
	intKey := r.IntN(2) == 0
	if intKey {
		cols = append(cols, col{name(), propTypes[0], true})
	} else {
		cols = append(cols, col{name(), propType{"VARCHAR(10) COLLATE utf8mb4_general_ci", func(r *rand.Rand) string { return propText(r, 3) }}, true},
			col{name(), propType{"INT", func(r *rand.Rand) string { return fmt.Sprint(r.IntN(50)) }}, true})
	}
	for range 2 + r.IntN(7) {
		cols = append(cols, col{name(), propTypes[r.IntN(len(propTypes))], false})
	}
	var def, pk strings.Builder
	def.WriteString("CREATE TABLE vp.t (")
	for i, c := range cols {
		if i > 0 {
			def.WriteString(", ")
		}
		fmt.Fprintf(&def, "%s %s", mysql.QuoteIdent(c.name), c.typ.def)
		if c.pk {
			if pk.Len() > 0 {
				pk.WriteString(", ")
			}
			pk.WriteString(mysql.QuoteIdent(c.name))
			def.WriteString(" NOT NULL")
		}
	}
	fmt.Fprintf(&def, ", PRIMARY KEY (%s))", pk.String())
	for _, d := range []*sql.DB{sdb, ddb} {
		exec(t, d, "DROP TABLE IF EXISTS vp.t", def.String())
	}
	t.Logf("%s", def.String())
	for range 20 + r.IntN(30) {
		var vals []string
		for _, c := range cols {
			if !c.pk && r.IntN(5) == 0 {
				vals = append(vals, "NULL")
			} else {
				vals = append(vals, c.typ.gen(r))
			}
		}
		// A random key can repeat (or equal another under the key's
		// collation): IGNORE keeps the first.
		exec(t, sdb, "INSERT IGNORE INTO vp.t VALUES ("+strings.Join(vals, ", ")+")")
	}
	a := move.Endpoint{Addr: src.Addr, User: src.User, Password: src.Password}
	b := move.Endpoint{Addr: dst.Addr, User: dst.User, Password: dst.Password}
	// The copy's two ways of writing: LOAD DATA LOCAL, and REPLACE where
	// the server refuses it.
	move.Replace = r.IntN(4) == 0
	defer func() { move.Replace = false }()
	if err := move.CopyRows(a, b, "vp", "t", "vp", "t", ""); err != nil {
		t.Fatal(err)
	}
	width := int64(1 << 20)
	compare := func() []int64 {
		diff, _, err := move.CompareTables(a, b, "vp", "t", "vp", "t", width)
		if err != nil {
			t.Fatal(err)
		}
		return diff
	}
	if diff := compare(); len(diff) > 0 {
		t.Errorf("a copy verifies with %d differing ranges: %v", len(diff), diff)
		return
	}
	// The rows, by their key's stored bytes.
	var keyCols []string
	for _, c := range cols {
		if c.pk {
			keyCols = append(keyCols, "HEX(CAST("+mysql.QuoteIdent(c.name)+" AS BINARY))")
		}
	}
	rows, err := ddb.Query("SELECT " + strings.Join(keyCols, ", ") + " FROM vp.t")
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]string
	for rows.Next() {
		k := make([]string, len(keyCols))
		ptrs := make([]any, len(k))
		for i := range k {
			ptrs[i] = &k[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	rows.Close()
	where := func(k []string) string {
		var w []string
		for i, kc := range keyCols {
			w = append(w, kc+" = '"+k[i]+"'")
		}
		return strings.Join(w, " AND ")
	}
	for range 10 {
		k := keys[r.IntN(len(keys))]
		c := cols[r.IntN(len(cols))]
		q := mysql.QuoteIdent(c.name)
		var isNull bool
		var before sql.NullString
		if err := ddb.QueryRow("SELECT "+q+" IS NULL, HEX(CAST("+q+" AS BINARY)) FROM vp.t WHERE "+where(k)).Scan(&isNull, &before); err != nil {
			t.Fatal(err)
		}
		old, _ := hex.DecodeString(before.String)
		next := mutate(r, old, isNull, c.pk, strings.Contains(c.typ.def, "BINARY") || strings.Contains(c.typ.def, "BLOB"))
		// IGNORE: a value the column cannot hold is adjusted, which is a
		// change too. Rows affected counts rows whose stored bytes changed.
		res, err := ddb.Exec("UPDATE IGNORE vp.t SET " + q + " = " + next + " WHERE " + where(k))
		if err != nil {
			skipped++
			continue
		}
		if n, _ := res.RowsAffected(); n == 0 {
			skipped++ // the stored row is the same (a duplicate key, or the same value)
			continue
		}
		if diff := compare(); len(diff) == 0 {
			t.Errorf("column %s %s: %s (NULL: %v) set to %s; the verify reports no difference", c.name, c.typ.def, before.String, isNull, next)
		}
		detected++
		// Back to the source's rows.
		exec(t, ddb, "DELETE FROM vp.t")
		if err := move.CopyRows(a, b, "vp", "t", "vp", "t", ""); err != nil {
			t.Fatal(err)
		}
	}
	if diff := compare(); len(diff) > 0 {
		t.Errorf("copied again: %d differing ranges", len(diff))
	}
	return detected, skipped
}

// mutate returns a SQL literal for a value one byte away from old: NULL
// becomes ” (or 0), a value sometimes NULL, otherwise one byte changes
// (a digit to another digit, a letter's case, a space added, any bit of a
// binary string).
func mutate(r *rand.Rand, old []byte, isNull, pk, binary bool) string {
	if isNull {
		return []string{"''", "0", "X'00'"}[r.IntN(3)]
	}
	if !pk && r.IntN(6) == 0 {
		return "NULL"
	}
	b := append([]byte{}, old...)
	switch {
	case len(b) == 0:
		b = []byte{"a0 "[r.IntN(3)]}
	case r.IntN(8) == 0 && !binary:
		b = append(b, ' ')
	default:
		i := r.IntN(len(b))
		switch c := b[i]; {
		case binary:
			b[i] ^= 1 << r.IntN(8)
		case c >= '0' && c <= '9':
			b[i] = '0' + (c-'0'+1+byte(r.IntN(9)))%10
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			b[i] ^= 0x20
		default:
			b[i] ^= 1 << r.IntN(8)
		}
	}
	return "_binary X'" + hex.EncodeToString(b) + "'"
}

// TestVerifyColumnNamedB is issue 33's repro: a column named b (the
// verify's old alias) and keys in two ranges; the import verifies equal.
func TestVerifyColumnNamedB(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	src, dst := cluster.Servers[0], cluster.Servers[1]
	exec(t, open(t, src, ""), "DROP DATABASE IF EXISTS shop", "CREATE DATABASE shop",
		"CREATE TABLE shop.x (id INT PRIMARY KEY, b INT)", "INSERT INTO shop.x VALUES (1,5),(2000,5)")
	exec(t, open(t, dst, ""), "DROP DATABASE IF EXISTS app", "DROP DATABASE IF EXISTS b_sidecar", "CREATE DATABASE app")
	store := move.NewStore(move.Endpoint{Addr: dst.Addr, User: dst.User, Password: dst.Password}, "b_sidecar")
	m := move.NewManager(store, env{dst}, zaptest.NewLogger(t), "test")
	defer m.Close()
	rule := config.ShardRule{DB: "app", Table: "x", Key: "id", Type: "hash", Nodes: []string{"n1", "n2"}, Locations: []int{1, 1}}
	_, err := m.Start(move.Spec{Name: "b", Kind: move.KindImport, DB: "app", Table: "x", From: rule, To: rule,
		Source: &move.Endpoint{Addr: src.Addr, User: src.User, Password: src.Password}, SourceDB: "shop", SourceTable: "x"})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, m, "b", move.PhaseReady)
	if err := m.Command("b", move.CmdVerify); err != nil {
		t.Fatal(err)
	}
	st := wait(t, m, "b", move.PhaseReady)
	if len(st.State.Diffs) > 0 || st.State.VerifyRows != 2 {
		t.Fatalf("verify: %d rows, differences %+v", st.State.VerifyRows, st.State.Diffs)
	}
}

// TestImportWithoutLocalInfile: a target server that refuses LOAD DATA
// LOCAL (local_infile OFF) gets the copy as REPLACE statements, every
// value intact.
func TestImportWithoutLocalInfile(t *testing.T) {
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	src, dst := cluster.Servers[0], cluster.Servers[1]
	sdb, ddb := open(t, src, ""), open(t, dst, "")
	exec(t, sdb, "DROP DATABASE IF EXISTS nl_src", "CREATE DATABASE nl_src")
	exec(t, ddb, "DROP DATABASE IF EXISTS nl_dst", "DROP DATABASE IF EXISTS nl_sidecar", "CREATE DATABASE nl_dst", "SET GLOBAL local_infile = 0")
	t.Cleanup(func() { ddb.Exec("SET GLOBAL local_infile = 1") })
	s := open(t, src, "nl_src")
	exec(t, s, "SET time_zone = '+00:00'", typed)
	for i := 0; i < 10; i++ {
		insert(t, s, i*3, i*3+1, i*3+2)
	}
	store := move.NewStore(move.Endpoint{Addr: dst.Addr, User: dst.User, Password: dst.Password}, "nl_sidecar")
	m := move.NewManager(store, env{dst}, zaptest.NewLogger(t), "test")
	defer m.Close()
	rule := config.ShardRule{DB: "nl_dst", Table: "t", Key: "id", Type: "hash", Nodes: []string{"n1"}, Locations: []int{2}}
	if _, err := m.Start(move.Spec{Name: "nl", Kind: move.KindImport, DB: "nl_dst", Table: "t", From: rule, To: rule,
		Source: &move.Endpoint{Addr: src.Addr, User: src.User, Password: src.Password}, SourceDB: "nl_src", SourceTable: "t",
		Options: config.MoveOptions{BatchRows: 4}}); err != nil {
		t.Fatal(err)
	}
	st := wait(t, m, "nl", move.PhaseReady)
	if len(st.State.Diffs) > 0 || st.State.RowsCopied != 30 {
		t.Fatalf("copied %d rows, differences %+v", st.State.RowsCopied, st.State.Diffs)
	}
	want := dump(t, s, "t")
	got := dump(t, open(t, dst, "nl_dst"), "t_0000", "t_0001")
	if len(got) != len(want) {
		t.Fatalf("%d rows imported, the source has %d", len(got), len(want))
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("row %s:\n got %s\nwant %s", id, got[id], w)
		}
	}
}
