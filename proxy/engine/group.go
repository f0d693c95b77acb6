package engine

import (
	"bytes"
	"fmt"
	"math/big"
	"strconv"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// grouper combines rows by the GROUP BY keys, folding each target's
// partial aggregates (COUNT and SUM add up, AVG from its SUM and COUNT,
// MIN and MAX compare as the column does), then keeps the groups HAVING
// accepts. Groups are held in memory, charged to mem.
type grouper struct {
	cols *columns
	m    *resolved
	mem  *budget

	arena rowArena // the groups' first rows
	// Groups and their per-aggregate slices are carved out of blocks
	// allocated groupBlock groups at a time.
	states []groupState
	fast   []int64
	cnts   []uint64
	sums   []*big.Rat
	flts   []float64
	nulls  []bool
}

// groupBlock is how many groups one allocation serves.
const groupBlock = 128

// groupState is one group: its first row, with MIN/MAX updated in place,
// and the running sums of its other aggregates.
type groupState struct {
	row [][]byte // first row, updated in place for MIN/MAX
	// Per aggregate, an exact SUM is kept in fast (the value times
	// 10^decimals of its column) until a value does not fit or has another
	// scale; from then on in sums.
	fast []int64
	sums []*big.Rat
	flts []float64
	cnts []uint64 // AVG counts
	null []bool   // SUM/AVG still NULL
}

// run reads every row of in and returns the groups in the order they were
// first seen.
func (g *grouper) run(in rowIter) ([][][]byte, error) {
	groups := map[string]*groupState{}
	var order []*groupState
	var key []byte
	for {
		row, _, err := in.next()
		if err != nil {
			return nil, err
		}
		if row == nil {
			break
		}
		key = key[:0]
		for _, c := range g.m.GroupBy {
			key = sortKey(key, g.cols.kinds[c], row[c])
		}
		gs := groups[string(key)]
		if gs == nil {
			if err := g.mem.chargeRow(row); err != nil {
				return nil, err
			}
			gs = g.newGroup(g.arena.copy(row))
			groups[string(key)] = gs
			order = append(order, gs)
		}
		if err := g.fold(gs, row); err != nil {
			return nil, err
		}
	}
	if len(order) == 0 && len(g.m.GroupBy) == 0 {
		// Every target returns one row for aggregates without GROUP BY,
		// so this only happens without targets; answer like MySQL.
		return nil, nil
	}
	rows := make([][][]byte, 0, len(order))
	for _, gs := range order {
		r := g.finish(gs)
		if g.m.Having != nil {
			ok, err := g.cols.having(g.m.Having, r)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (g *grouper) newGroup(row [][]byte) *groupState {
	n := len(g.m.Aggs)
	if len(g.states) == 0 {
		g.states = make([]groupState, groupBlock)
		g.fast, g.cnts = make([]int64, groupBlock*n), make([]uint64, groupBlock*n)
		g.sums, g.flts, g.nulls = make([]*big.Rat, groupBlock*n), make([]float64, groupBlock*n), make([]bool, groupBlock*n)
	}
	gs := &g.states[0]
	g.states = g.states[1:]
	gs.row = row
	gs.fast, g.fast = g.fast[:n:n], g.fast[n:]
	gs.cnts, g.cnts = g.cnts[:n:n], g.cnts[n:]
	gs.sums, g.sums = g.sums[:n:n], g.sums[n:]
	gs.flts, g.flts = g.flts[:n:n], g.flts[n:]
	gs.null, g.nulls = g.nulls[:n:n], g.nulls[n:]
	for i := range gs.null {
		gs.null[i] = true
	}
	return gs
}

func isFloatCol(c *mysql.Column) bool {
	return c.Type == mysql.TypeDouble || c.Type == mysql.TypeFloat
}

// fold adds one target row's partial aggregates to a group.
func (g *grouper) fold(gs *groupState, r [][]byte) error {
	for i, a := range g.m.Aggs {
		v := r[a.Col]
		switch a.Func {
		case router.AggCount:
			gs.cnts[i] += parseCount(v)
		case router.AggSum, router.AggAvg:
			if a.Func == router.AggAvg {
				gs.cnts[i] += parseCount(r[a.CountCol])
			}
			if v == nil {
				continue
			}
			gs.null[i] = false
			col := g.cols.defs[a.Col]
			if isFloatCol(col) {
				f, _ := strconv.ParseFloat(string(v), 64)
				gs.flts[i] += f
				continue
			}
			if gs.sums[i] == nil {
				if m, ok := parseScaled(v, int(col.Decimals)); ok {
					if sum, ok := addInt64(gs.fast[i], m); ok {
						gs.fast[i] = sum
						continue
					}
				}
				// Past int64, or another scale: exact from here on.
				gs.sums[i] = scaledRat(gs.fast[i], int(col.Decimals))
			}
			x, ok := parseRat(string(v))
			if !ok {
				return fmt.Errorf("aggregate value %q is not a number", v)
			}
			gs.sums[i].Add(gs.sums[i], x)
		case router.AggMin, router.AggMax:
			cur := gs.row[a.Col]
			if v == nil {
				continue
			}
			if cur == nil {
				gs.row[a.Col] = cloneValue(v)
				continue
			}
			c := compareValues(g.cols.kinds[a.Col], v, cur)
			if (a.Func == router.AggMin && c < 0) || (a.Func == router.AggMax && c > 0) {
				gs.row[a.Col] = cloneValue(v)
			}
		}
	}
	return nil
}

// cloneValue copies a non-NULL value; an empty string stays non-nil, since
// nil is NULL.
func cloneValue(v []byte) []byte {
	return append(make([]byte, 0, len(v)), v...)
}

// finish writes a group's aggregates into its row.
func (g *grouper) finish(gs *groupState) [][]byte {
	r := gs.row
	for i, a := range g.m.Aggs {
		col := g.cols.defs[a.Col]
		switch a.Func {
		case router.AggCount:
			r[a.Col] = strconv.AppendUint(nil, gs.cnts[i], 10)
		case router.AggSum:
			switch {
			case gs.null[i]:
				r[a.Col] = nil
			case isFloatCol(col):
				r[a.Col] = formatDouble(gs.flts[i])
			case gs.sums[i] == nil:
				r[a.Col] = appendScaled(nil, gs.fast[i], int(col.Decimals))
			default:
				r[a.Col] = []byte(gs.sums[i].FloatString(int(col.Decimals)))
			}
		case router.AggAvg:
			switch {
			case gs.null[i] || gs.cnts[i] == 0:
				r[a.Col] = nil
			case isFloatCol(col):
				r[a.Col] = formatDouble(gs.flts[i] / float64(gs.cnts[i]))
			default:
				sum := gs.sums[i]
				if sum == nil {
					sum = scaledRat(gs.fast[i], int(col.Decimals))
				}
				q := new(big.Rat).Quo(sum, new(big.Rat).SetUint64(gs.cnts[i]))
				r[a.Col] = []byte(q.FloatString(avgDecimals(col, g.cols.divPrec)))
			}
		}
	}
	return r
}

// avgColumn is the definition MariaDB gives AVG of a column from the
// definition of the SUM the targets returned: DECIMAL with avgDecimals,
// and the argument's precision (the SUM's less the 22 digits SUM adds)
// plus div_precision_increment, at most 65.
func avgColumn(c *mysql.Column, divPrec int) *mysql.Column {
	col := *c
	col.Type = mysql.TypeNewDecimal
	sign := 1
	if col.Flags&mysql.FlagUnsigned != 0 {
		sign = 0
	}
	point := func(decimals int) int { return min(decimals, 1) }
	prec := int(col.Length) - sign - point(int(col.Decimals))
	prec = min(max(prec-sumDigits, 1)+divPrec, maxDecimalPrecision)
	d := avgDecimals(&col, divPrec)
	col.Length = uint32(prec + sign + point(d))
	col.Decimals = byte(d)
	return &col
}

// sumDigits are the digits SUM adds to its argument's precision
// (DECIMAL_LONGLONG_DIGITS); maxDecimalPrecision is DECIMAL's most.
const (
	sumDigits           = 22
	maxDecimalPrecision = 65
)

// avgDecimals is the scale MySQL gives AVG of a column whose SUM has the
// column's decimals: div_precision_increment more, at most 30.
func avgDecimals(c *mysql.Column, divPrec int) int {
	return min(int(c.Decimals)+divPrec, 30)
}

// formatDouble prints a DOUBLE as MariaDB's text protocol does: the
// shortest digits that read back as the same value, in positional notation
// for decimal exponents -15 to 14 and in scientific notation without '+'
// otherwise (1e15, 1.5e-16).
func formatDouble(f float64) []byte {
	if f == 0 {
		return []byte("0") // also -0
	}
	e := strconv.AppendFloat(nil, f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	i := bytes.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(string(e[i+1:]))
	digits := make([]byte, 0, i)
	for _, c := range e[:i] {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	var b []byte
	if neg {
		b = append(b, '-')
	}
	switch {
	case exp < -15 || exp >= 15:
		b = append(b, e[:i]...)
		b = append(b, 'e')
		b = strconv.AppendInt(b, int64(exp), 10)
	case exp < 0:
		b = append(b, "0."...)
		for range -exp - 1 {
			b = append(b, '0')
		}
		b = append(b, digits...)
	case exp+1 >= len(digits):
		b = append(b, digits...)
		for range exp + 1 - len(digits) {
			b = append(b, '0')
		}
	default:
		b = append(b, digits[:exp+1]...)
		b = append(b, '.')
		b = append(b, digits[exp+1:]...)
	}
	return b
}

// parseCount reads a COUNT value (decimal digits) without allocating.
func parseCount(v []byte) uint64 {
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return n
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// parseScaled reads a decimal text value with exactly dec fraction digits
// (as the server writes a DECIMAL(n, dec) or integer SUM) as the integer
// value*10^dec; ok is false for any other text or past int64.
func parseScaled(v []byte, dec int) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var m int64
	frac := -1
	for _, c := range v {
		switch {
		case c == '.' && frac < 0:
			frac = 0
		case c >= '0' && c <= '9':
			m = m*10 + int64(c-'0')
			if frac >= 0 {
				frac++
			}
		default:
			return 0, false
		}
	}
	if frac < 0 {
		frac = 0
	}
	if frac != dec {
		return 0, false
	}
	if neg {
		m = -m
	}
	return m, true
}

// addInt64 adds without overflowing; ok is false when it would.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	if (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0) {
		return 0, false
	}
	return s, true
}

// scaledRat is m/10^dec.
func scaledRat(m int64, dec int) *big.Rat {
	d := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dec)), nil)
	return new(big.Rat).SetFrac(big.NewInt(m), d)
}

// appendScaled writes m/10^dec with dec fraction digits.
func appendScaled(b []byte, m int64, dec int) []byte {
	neg := m < 0
	u := uint64(m)
	if neg {
		u = uint64(-m)
	}
	digits := strconv.AppendUint(nil, u, 10)
	for len(digits) <= dec {
		digits = append([]byte{'0'}, digits...)
	}
	if neg {
		b = append(b, '-')
	}
	b = append(b, digits[:len(digits)-dec]...)
	if dec > 0 {
		b = append(b, '.')
		b = append(b, digits[len(digits)-dec:]...)
	}
	return b
}
