package engine

import (
	"bytes"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

func TestCompareValues(t *testing.T) {
	tests := []struct {
		k    cmpKind
		a, b string
		want int
	}{
		{cmpSigned, "-5", "3", -1},
		{cmpSigned, "10", "9", 1},
		{cmpUnsigned, "18446744073709551615", "1", 1},
		{cmpDecimal, "-0.50", "0.0", -1},
		{cmpDecimal, "0.00", "-0.0", 0},
		{cmpDecimal, "12.5", "12.50", 0},
		{cmpDecimal, "99.999", "100", -1},
		{cmpDecimal, "-10.1", "-10.01", -1},
		{cmpDecimal, "123456789012345678901234567890.1", "123456789012345678901234567890.01", 1},
		{cmpFloat, "1e10", "9.5e9", 1},
		{cmpTemporal, "2024-01-02 00:00:00", "2023-12-31 23:59:59", 1},
		{cmpTime, "-01:00:00", "00:30:00", -1},
		{cmpTime, "100:00:00", "99:59:59", 1},
		{cmpBinary, "a", "B", 1},
		{cmpBinPad, "ab  ", "ab", 0},
		{cmpGeneralCI, "abc", "ABC", 0},
		{cmpGeneralCI, "élan", "Elan", 0},
		{cmpGeneralCI, "b", "A", 1},
		{cmpGeneralCI, "x ", "X", 0},
		// Outside the BMP every character weighs as U+FFFD in general_ci.
		{cmpGeneralCI, "😀", "😎", 0},
		{cmpGeneralCI, "a😀", "A😎", 0},
		{cmpGeneralCI, "😀", "日", 1},
		// PAD SPACE: the longer value's rest compares against spaces, so a
		// trailing tab sorts before the end (STRCMP on MariaDB 10.11).
		{cmpGeneralCI, "a", "a\t", 1},
		{cmpGeneralCI, "a\t", "a", -1},
		{cmpGeneralCI, "a", "a\n  ", 1},
		{cmpGeneralCI, "ab", "a", 1},
		{cmpGeneralCI, "é", "E", 0},
		{cmpGeneralCI, "ß", "s", 0},
		{cmpGeneralCI, "Straße", "STRASE", 0},
		{cmpUnicodeCI, "Ärger", "arger", 0},
		{cmpUnicodeCI, "zebra", "Äpfel", 1},
	}
	for _, tt := range tests {
		if got := compareValues(tt.k, []byte(tt.a), []byte(tt.b)); sign(got) != tt.want {
			t.Errorf("compareValues(%d, %q, %q) = %d, want %d", tt.k, tt.a, tt.b, got, tt.want)
		}
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func TestColumnCmp(t *testing.T) {
	tests := []struct {
		c    mysql.Column
		want cmpKind
	}{
		{mysql.Column{Type: mysql.TypeVarString, Charset: 45}, cmpGeneralCI},
		// MariaDB names the connection's collation for every string
		// column; BINARY_FLAG marks the *_bin ones.
		{mysql.Column{Type: mysql.TypeVarString, Charset: 45, Flags: mysql.FlagBinary}, cmpBinPad},
		{mysql.Column{Type: mysql.TypeString, Charset: 45, Flags: mysql.FlagBinary | mysql.FlagNotNull}, cmpBinPad},
		{mysql.Column{Type: mysql.TypeVarString, Charset: 63, Flags: mysql.FlagBinary}, cmpBinary},
		{mysql.Column{Type: mysql.TypeLongLong, Charset: 63, Flags: mysql.FlagBinary}, cmpSigned},
		{mysql.Column{Type: mysql.TypeVarString, Charset: 224}, cmpUnicodeCI},
	}
	for _, tt := range tests {
		if got := columnCmp(&tt.c); got != tt.want {
			t.Errorf("columnCmp(type %#x charset %d flags %#x) = %d, want %d", tt.c.Type, tt.c.Charset, tt.c.Flags, got, tt.want)
		}
	}
}

// TestFormatDouble checks DOUBLE text against what MariaDB 10.11 sends.
func TestFormatDouble(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{-0.5, "-0.5"},
		{100, "100"},
		{1500000, "1500000"},
		{1234567.5, "1234567.5"},
		{1e14, "100000000000000"},
		{999999999999999, "999999999999999"},
		{123456789012345.67, "123456789012345.67"},
		{1e15, "1e15"},
		{-1.5e15, "-1.5e15"},
		{1.2345678901234568e17, "1.2345678901234568e17"},
		{1e100, "1e100"},
		{0.001, "0.001"},
		{0.0001, "0.0001"},
		{1.5e-7, "0.00000015"},
		{1.2345678901234567e-15, "0.0000000000000012345678901234568"},
		{1e-15, "0.000000000000001"},
		{1e-16, "1e-16"},
		{5e-324, "5e-324"},
		{0.30000000000000004, "0.30000000000000004"},
	}
	for _, tt := range tests {
		if got := string(formatDouble(tt.f)); got != tt.want {
			t.Errorf("formatDouble(%v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}

// TestHavingCompare checks MySQL's comparison rules for HAVING: numbers
// against strings as numbers, strings under the column's collation, dates
// against datetimes as points in time.
func TestHavingCompare(t *testing.T) {
	col := func(k cmpKind, v string) exprValue { return exprValue{text: []byte(v), kind: k} }
	str := func(v string) exprValue { return exprValue{text: []byte(v), kind: cmpGeneralCI, lit: true} }
	num := func(v string) exprValue { return exprValue{num: textNumber([]byte(v))} }
	tests := []struct {
		a, b exprValue
		want int
	}{
		{col(cmpBinPad, ""), str("-1"), -1},           // as text (as numbers, 0 > -1)
		{col(cmpBinPad, "apple"), str("Apple"), 1},    // the column's binary collation
		{col(cmpGeneralCI, "apple"), str("APPLE"), 0}, // the column's case-insensitive collation
		{col(cmpDecimal, "10.50"), str("10.5abc"), 0}, // a number against a string: as numbers
		{col(cmpSigned, "9"), str("10"), -1},
		{col(cmpGeneralCI, "12abc"), num("12"), 0},
		{col(cmpTemporal, "2024-01-01 00:00:00"), str("2024-01-01"), 0},
		{col(cmpTemporal, "2024-01-01"), str("2024-01-01 00:00:01"), -1},
		{str("b"), col(cmpBinPad, "B"), 1},
	}
	for _, tt := range tests {
		if got := sign(compareExpr(tt.a, tt.b)); got != tt.want {
			t.Errorf("compareExpr(%q, %q) = %d, want %d", tt.a.text, tt.b.text, got, tt.want)
		}
	}
	// MIN/MAX keep an empty string, which is not NULL.
	g := &grouper{m: &resolved{Merge: router.Merge{Aggs: []router.Agg{{Col: 0, Func: router.AggMin}}}},
		cols: newColumns([]*mysql.Column{{Type: mysql.TypeVarString, Charset: 45}})}
	gs := g.newGroup([][]byte{nil})
	if err := g.fold(gs, [][]byte{{}}); err != nil {
		t.Fatal(err)
	}
	if gs.row[0] == nil {
		t.Errorf("MIN over '' is NULL, want ''")
	}
}

// TestParseRatBounded: a constant like 1e999999999 (in a HAVING clause the
// proxy evaluates) is not computed: big.Rat would build a billion-digit
// number for minutes.
func TestParseRatBounded(t *testing.T) {
	for _, s := range []string{"1e999999999", "1E-999999999", "5e401", strings.Repeat("9", 2000)} {
		if _, ok := parseRat(s); ok {
			t.Errorf("parseRat(%.20q) accepted", s)
		}
		// As MariaDB converts a string to DECIMAL: clamped to 81 nines,
		// or 0 below its smallest fraction.
		want := clampDecimal(false)
		if s[1] == 'E' {
			want = new(big.Rat)
		}
		if r := textNumber([]byte(s)); r.Cmp(want) != 0 {
			t.Errorf("textNumber(%.20q) = %v, want %v", s, r, want)
		}
	}
	for _, s := range []string{"1e308", "-2.5E-300", "12345678901234567890.123", "0.5"} {
		if _, ok := parseRat(s); !ok {
			t.Errorf("parseRat(%q) refused", s)
		}
	}
}

// TestGeneralCompareMatchesKeys checks the allocation-free comparison
// against the sort key the grouping uses, on random mixed-script values
// (no characters below the space, where only the comparison pads).
func TestGeneralCompareMatchesKeys(t *testing.T) {
	alphabet := []rune("aAbBzZ éÉèßsS日本😀😎_-09ÆæøØ")
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() []byte {
		r := make([]rune, rng.IntN(6))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return []byte(string(r))
	}
	for range 20000 {
		a, b := gen(), gen()
		want := sign(bytes.Compare(generalCIKey(a), generalCIKey(b)))
		if got := sign(generalCompare(a, b)); got != want {
			t.Fatalf("generalCompare(%q, %q) = %d, keys say %d", a, b, got, want)
		}
	}
}
