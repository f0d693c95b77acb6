package router

import (
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shardgate/shardgate/config"
)

// ruleKind is a shard rule's type.
type ruleKind uint8

const (
	ruleHash ruleKind = iota
	ruleRange
	ruleYear
	ruleMonth
	ruleDay
	ruleGlobal
)

// rule is one compiled shard rule. It is immutable after New.
type rule struct {
	db, table string
	key       string // shard key column, lower case (MySQL column names are case-insensitive)
	kind      ruleKind
	nodes     []string // the rule's nodes, in rule order

	// subs are the physical subtables in index order: hash and range by
	// number, date rules by period (oldest first). Empty for global rules.
	subs []subtable

	limit   int64       // range: keys per subtable
	periods map[int]int // date rules: period (YYYY, YYYYMM or YYYYMMDD) -> subtable index
	// period lists the period of every subtable, ascending (date rules).
	period []int

	// coloc identifies the physical layout: rules with equal coloc put
	// subtable i of each table on the same node, so statements joining
	// them on their keys run per subtable index.
	coloc string
	// readNode is where reads of a global table go.
	readNode string
	// seq is the column a global sequence fills (lower case), "" when
	// none; seqBlock the ids one reservation takes.
	seq        string
	seqBlock   int
	seqAdvance bool // explicit values move the sequence past them
}

// subtable is one physical table of a sharded table.
type subtable struct {
	name string
	node string
}

func (r *rule) sharded() bool { return r.kind != ruleGlobal }

// hasNode reports whether the rule places a copy or a subtable on node.
func (r *rule) hasNode(node string) bool {
	for _, n := range r.nodes {
		if n == node {
			return true
		}
	}
	return false
}

// compileRule turns a validated config rule into a rule. Config validation
// already rejected malformed rules; errors here name what is still wrong.
func compileRule(sr *config.ShardRule, defaultNode string) (*rule, error) {
	r := &rule{db: sr.DB, table: sr.Table, key: strings.ToLower(sr.Key), nodes: sr.Nodes,
		seq: strings.ToLower(sr.Sequence), seqBlock: sr.SequenceBlock, seqAdvance: sr.SequenceAdvance}
	var b strings.Builder
	b.WriteString(sr.Type)
	b.WriteByte('|')
	b.WriteString(strings.Join(sr.Nodes, ","))
	switch sr.Type {
	case "hash", "range":
		r.kind = ruleHash
		if sr.Type == "range" {
			r.kind = ruleRange
			if sr.TableRowLimit <= 0 {
				return nil, fmt.Errorf("range rule needs a positive table_row_limit")
			}
			r.limit = int64(sr.TableRowLimit)
		}
		if len(sr.Locations) != len(sr.Nodes) {
			return nil, fmt.Errorf("locations has %d entries but nodes has %d", len(sr.Locations), len(sr.Nodes))
		}
		for j, n := range sr.Locations {
			for k := 0; k < n; k++ {
				r.subs = append(r.subs, subtable{name: sr.Subtable(len(r.subs)), node: sr.Nodes[j]})
			}
		}
		if len(r.subs) == 0 {
			return nil, fmt.Errorf("rule has no subtables")
		}
		fmt.Fprintf(&b, "|%v|%d|%d", sr.Locations, sr.TableRowLimit, sr.Generation)
	case "date_year", "date_month", "date_day":
		digits := map[string]int{"date_year": 4, "date_month": 6, "date_day": 8}[sr.Type]
		r.kind = map[string]ruleKind{"date_year": ruleYear, "date_month": ruleMonth, "date_day": ruleDay}[sr.Type]
		if len(sr.DateRange) != len(sr.Nodes) {
			return nil, fmt.Errorf("date_range has %d entries but nodes has %d", len(sr.DateRange), len(sr.Nodes))
		}
		type ps struct {
			p    int
			node string
		}
		var all []ps
		for j, e := range sr.DateRange {
			ps0, err := expandDateRange(e, digits)
			if err != nil {
				return nil, err
			}
			for _, p := range ps0 {
				all = append(all, ps{p, sr.Nodes[j]})
			}
		}
		sort.Slice(all, func(i, j int) bool { return all[i].p < all[j].p })
		r.periods = make(map[int]int, len(all))
		for i, e := range all {
			if _, dup := r.periods[e.p]; dup {
				return nil, fmt.Errorf("period %d is in two date_range entries", e.p)
			}
			r.periods[e.p] = i
			r.period = append(r.period, e.p)
			r.subs = append(r.subs, subtable{name: fmt.Sprintf("%s_%d", sr.Table, e.p), node: e.node})
		}
		fmt.Fprintf(&b, "|%v", sr.DateRange)
	case "global":
		r.kind = ruleGlobal
		r.readNode = sr.Nodes[0]
		if r.hasNode(defaultNode) {
			r.readNode = defaultNode
		}
		return r, nil
	default:
		return nil, fmt.Errorf("unknown rule type %q", sr.Type)
	}
	r.coloc = b.String()
	return r, nil
}

// expandDateRange lists every period of a date_range entry ("A-B" or "A").
func expandDateRange(e string, digits int) ([]int, error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(e), "-")
	if !isRange {
		b = a
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	layout := map[int]string{4: "2006", 6: "200601", 8: "20060102"}[digits]
	if len(a) != digits || len(b) != digits {
		return nil, fmt.Errorf("date_range entry %q is not %d digits", e, digits)
	}
	from, err1 := time.Parse(layout, a)
	to, err2 := time.Parse(layout, b)
	if err1 != nil || err2 != nil || to.Before(from) {
		return nil, fmt.Errorf("date_range entry %q is not a valid span", e)
	}
	var out []int
	for t := from; !t.After(to); {
		out = append(out, periodOf(t, digits))
		switch digits {
		case 4:
			t = t.AddDate(1, 0, 0)
		case 6:
			t = t.AddDate(0, 1, 0)
		default:
			t = t.AddDate(0, 0, 1)
		}
		if len(out) > 1<<20 {
			return nil, fmt.Errorf("date_range entry %q spans too many subtables", e)
		}
	}
	return out, nil
}

func periodOf(t time.Time, digits int) int {
	switch digits {
	case 4:
		return t.Year()
	case 6:
		return t.Year()*100 + int(t.Month())
	default:
		return t.Year()*10000 + int(t.Month())*100 + t.Day()
	}
}

func (r *rule) digits() int {
	switch r.kind {
	case ruleYear:
		return 4
	case ruleMonth:
		return 6
	}
	return 8
}

// valKind classifies a shard key value taken from a statement.
type valKind uint8

const (
	valNone   valKind = iota // not a constant the router can evaluate
	valNull                  // NULL
	valInt                   // i
	valUint                  // u, above math.MaxInt64
	valString                // s
	valNum                   // a decimal or float: f, exact floor in i when fits
	valDate                  // DATE/TIMESTAMP literal: s
)

// value is a constant shard key value.
type value struct {
	kind valKind
	i    int64
	u    uint64
	f    float64
	s    string
}

func (v value) String() string {
	switch v.kind {
	case valNull:
		return "NULL"
	case valInt:
		return strconv.FormatInt(v.i, 10)
	case valUint:
		return strconv.FormatUint(v.u, 10)
	case valString, valDate:
		return strconv.Quote(v.s)
	case valNum:
		if v.s != "" {
			return v.s
		}
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	}
	return "?"
}

// integral returns the value as an integer when it is one exactly.
func (v value) integral() (int64, bool) {
	switch v.kind {
	case valInt:
		return v.i, true
	case valNum:
		if v.f == math.Trunc(v.f) && v.f >= math.MinInt64 && v.f < math.MaxInt64 {
			return int64(v.f), true
		}
	}
	return 0, false
}

// errOutOfRange is returned by index when a key lies outside every
// subtable of a range or date rule.
type errOutOfRange struct{ v value }

func (e errOutOfRange) Error() string { return "out of range" }

// index returns the subtable that holds key v, as kingshard computes it.
// ok is false when the value cannot be mapped (then every subtable may hold
// matching rows); err is errOutOfRange when the rule has no subtable for it.
func (r *rule) index(v value) (idx int, ok bool, err error) {
	switch r.kind {
	case ruleHash:
		h, ok := hashValue(v)
		if !ok {
			return 0, false, nil
		}
		return int(h % uint64(len(r.subs))), true, nil
	case ruleRange:
		n, ok := rangeValue(v)
		if !ok {
			return 0, false, nil
		}
		if n.neg || n.big {
			return 0, false, errOutOfRange{v}
		}
		i := n.floor / r.limit
		if i >= int64(len(r.subs)) {
			return 0, false, errOutOfRange{v}
		}
		return int(i), true, nil
	case ruleYear, ruleMonth, ruleDay:
		p, ok := r.periodValue(v)
		if !ok {
			return 0, false, nil
		}
		i, found := r.periods[p]
		if !found {
			return 0, false, errOutOfRange{v}
		}
		return i, true, nil
	}
	return 0, false, nil
}

// hashValue is kingshard's HashValue: integers by value (negative ones as
// the uint64 of their two's complement), strings that parse as unsigned
// integers by that number, other strings by CRC-32 (IEEE).
func hashValue(v value) (uint64, bool) {
	switch v.kind {
	case valInt:
		return uint64(v.i), true
	case valUint:
		return v.u, true
	case valString:
		if u, err := strconv.ParseUint(v.s, 10, 64); err == nil {
			return u, true
		}
		return uint64(crc32.ChecksumIEEE([]byte(v.s))), true
	case valNum:
		if i, ok := v.integral(); ok {
			return uint64(i), true
		}
	}
	return 0, false
}

// num is a numeric key value for range rules: its floor, whether it is an
// integer, and whether it lies below zero or beyond int64.
type num struct {
	floor    int64
	integral bool
	neg, big bool
}

func rangeValue(v value) (num, bool) {
	switch v.kind {
	case valInt:
		return num{floor: v.i, integral: true, neg: v.i < 0}, true
	case valUint:
		return num{integral: true, big: true}, true
	case valString:
		if i, err := strconv.ParseInt(v.s, 10, 64); err == nil {
			return num{floor: i, integral: true, neg: i < 0}, true
		}
		if _, err := strconv.ParseUint(v.s, 10, 64); err == nil {
			return num{integral: true, big: true}, true
		}
	case valNum:
		f := math.Floor(v.f)
		switch {
		case math.IsNaN(f):
			return num{}, false
		case f < 0:
			return num{floor: -1, integral: f == v.f, neg: true}, true
		case f >= math.MaxInt64:
			return num{integral: f == v.f, big: true}, true
		}
		return num{floor: int64(f), integral: f == v.f}, true
	}
	return num{}, false
}

// periodValue returns the period (YYYY, YYYYMM or YYYYMMDD) a date key
// falls in: integers are Unix timestamps (UTC), strings and DATE/TIMESTAMP
// literals start with YYYY-MM-DD (for date_year a bare YYYY is accepted).
func (r *rule) periodValue(v value) (int, bool) {
	digits := r.digits()
	switch v.kind {
	case valInt:
		return periodOf(time.Unix(v.i, 0).UTC(), digits), true
	case valString, valDate:
		s := v.s
		if digits == 4 && len(s) == 4 {
			if y, err := strconv.Atoi(s); err == nil && y > 0 {
				return y, true
			}
		}
		if len(s) < 10 {
			return 0, false
		}
		t, err := time.Parse("2006-01-02", s[:10])
		if err != nil {
			return 0, false
		}
		return periodOf(t, digits), true
	}
	return 0, false
}

// compareOp is a range predicate on the shard key: key < v and so on.
type compareOp uint8

const (
	opLT compareOp = iota
	opLE
	opGT
	opGE
)

// rangeSet returns the subtables that may hold keys satisfying key op v.
// ok is false when the rule cannot prune (hash rules, unmappable values).
// ordered reports whether the rule maps ranges of values to subtables
// (rangeSet can cut them); a hash rule cannot, and the planner then does
// not look at the bounds at all.
func (r *rule) ordered() bool {
	switch r.kind {
	case ruleRange, ruleYear, ruleMonth, ruleDay:
		return true
	}
	return false
}

func (r *rule) rangeSet(op compareOp, v value, s keySet) (keySet, bool) {
	n := len(r.subs)
	switch r.kind {
	case ruleRange:
		x, ok := rangeValue(v)
		if !ok {
			return s, false
		}
		for i := 0; i < n; i++ {
			lo, hi := int64(i)*r.limit, int64(i+1)*r.limit // [lo, hi)
			var in bool
			switch {
			case x.neg:
				in = op == opGT || op == opGE
			case x.big:
				in = op == opLT || op == opLE
			default:
				switch op {
				case opLT:
					if x.integral {
						in = lo < x.floor
					} else {
						in = lo <= x.floor
					}
				case opLE:
					in = lo <= x.floor
				case opGT, opGE:
					in = hi > x.floor
				}
			}
			if in {
				s.add(i)
			}
		}
		return s, true
	case ruleYear, ruleMonth, ruleDay:
		p, ok := r.periodValue(v)
		if !ok {
			return s, false
		}
		for i, q := range r.period {
			if ((op == opLT || op == opLE) && q <= p) || ((op == opGT || op == opGE) && q >= p) {
				s.add(i)
			}
		}
		return s, true
	}
	return s, false
}

// keySet is a set of subtable indexes, or all of them.
type keySet struct {
	all  bool
	bits []uint64
}

func allKeys() keySet { return keySet{all: true} }

func newKeySet(n int) keySet { return keySet{bits: make([]uint64, (n+63)/64)} }

func (s *keySet) add(i int) { s.bits[i/64] |= 1 << (uint(i) % 64) }

func (s keySet) has(i int) bool { return s.all || s.bits[i/64]&(1<<(uint(i)%64)) != 0 }

func intersect(a, b keySet) keySet {
	if a.all {
		return b
	}
	if b.all {
		return a
	}
	out := keySet{bits: make([]uint64, len(a.bits))}
	for i := range a.bits {
		out.bits[i] = a.bits[i] & b.bits[i]
	}
	return out
}

func union(a, b keySet) keySet {
	if a.all || b.all {
		return allKeys()
	}
	out := keySet{bits: make([]uint64, len(a.bits))}
	for i := range a.bits {
		out.bits[i] = a.bits[i] | b.bits[i]
	}
	return out
}

// members lists the indexes in s, below n, in ascending order.
func (s keySet) members(n int) []int {
	var out []int
	for i := 0; i < n; i++ {
		if s.has(i) {
			out = append(out, i)
		}
	}
	return out
}
