package server_test

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// Prepared runs of the differential queries. Every query of the corpus and
// the generator also runs as a binary prepared statement: the numeric and
// string literals of its WHERE, HAVING and LIMIT clauses become ?
// placeholders, and their values are bound in COM_STMT_EXECUTE with the
// types clients send (go-sql-driver binds int64 as LONGLONG, float64 as
// DOUBLE and strings as STRING; other connectors send narrower integers,
// unsigned flags, DECIMAL, VARCHAR, BLOB and binary DATE/DATETIME values).
// The reference runs the same statement with the same bound values, and
// the answers are compared by diffChecker.compare, as text answers are.
// Binary rows are decoded into text that a value of the column's type
// prints as, so the comparison is exact: two encodings decode alike only
// when a client sees the same value.

// diffParam is one value bound to a ? of a prepared run.
type diffParam struct {
	typ, flags byte   // as COM_STMT_EXECUTE binds it (flags 0x80: unsigned)
	val        []byte // the binary encoding
	lit        string // the literal it stands for, for messages
}

func (p diffParam) String() string {
	u := ""
	if p.flags&0x80 != 0 {
		u = " UNSIGNED"
	}
	return fmt.Sprintf("%s as %s%s", p.lit, diffTypeNames[p.typ], u)
}

var diffTypeNames = map[byte]string{
	mysql.TypeTiny: "TINY", mysql.TypeShort: "SHORT", mysql.TypeLong: "LONG", mysql.TypeLongLong: "LONGLONG",
	mysql.TypeDouble: "DOUBLE", mysql.TypeNewDecimal: "NEWDECIMAL", mysql.TypeString: "STRING",
	mysql.TypeVarString: "VAR_STRING", mysql.TypeVarchar: "VARCHAR", mysql.TypeBlob: "BLOB",
	mysql.TypeDate: "DATE", mysql.TypeDatetime: "DATETIME", mysql.TypeTimestamp: "TIMESTAMP",
}

func diffFormatParams(ps []diffParam) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// diffRefusalsPrepared are statements the proxy refuses with 1235 as
// prepared statements (with placeholders where the text has literals) but
// runs as text; diffKnownRefusals apply too. re is matched against the
// parametrized statement. None are known: every statement the proxy runs
// as text it also runs prepared.
var diffRefusalsPrepared = []diffRefusal{}

// knownRefusalPrepared returns why the proxy may refuse the parametrized
// statement q, or "".
func knownRefusalPrepared(q string) string {
	for _, r := range diffRefusalsPrepared {
		if r.re.MatchString(q) && (r.unless == nil || !r.unless.MatchString(q)) {
			return r.why
		}
	}
	return ""
}

// checkPrepared runs q on table as a prepared statement with bound values
// through the proxy, and on the reference table the same way, and compares
// the answers.
func (ck *diffChecker) checkPrepared(t *testing.T, q diffQuery, table string) {
	t.Helper()
	ps, args := diffParametrize(q.sql)
	psql := strings.ReplaceAll(ps, "{t}", table)
	rsql := strings.ReplaceAll(ps, "{t}", diffRef)
	want := diffExecute(ck.ref, rsql, args)
	if want.prepared != nil && want.prepared.params != len(args) {
		t.Fatalf("%s: the reference reports %d parameters for %s, the harness binds %d (%s)", q.origin, want.prepared.params, rsql, len(args), diffFormatParams(args))
	}
	got := diffExecute(ck.proxy, psql, args)
	ck.prepared++
	ck.bound += len(args)
	ck.compare(t, diffCase{
		q: q, mode: "prepared", psql: psql, rsql: rsql, args: diffFormatParams(args),
		text: strings.ReplaceAll(q.sql, "{t}", table),
		got:  got, want: want,
		full: func() diffAnswer {
			fs, fargs := diffParametrize(diffLimitRe.ReplaceAllString(q.sql, ""))
			return diffExecute(ck.ref, strings.ReplaceAll(fs, "{t}", diffRef), fargs)
		},
		refusal: func() string { return knownRefusalPrepared(ps) },
		meta:    func() string { return diffPreparedDiffer(got.prepared, want.prepared) },
	})
}

// diffPreparedDiffer compares COM_STMT_PREPARE's answers: the parameter
// count, and the result columns a client learns before executing (their
// count and names; MariaDB itself reports provisional types there).
func diffPreparedDiffer(got, want *diffPrepared) string {
	if got == nil || want == nil {
		return ""
	}
	var d []string
	if got.params != want.params {
		d = append(d, fmt.Sprintf("%d parameters, want %d", got.params, want.params))
	}
	if len(got.cols) != len(want.cols) {
		return strings.Join(append(d, fmt.Sprintf("%d columns %q, want %d %q", len(got.cols), diffNames(got.cols), len(want.cols), diffNames(want.cols))), "; ")
	}
	for i, g := range got.cols {
		if g.Name != want.cols[i].Name {
			d = append(d, fmt.Sprintf("column %d named %q, want %q", i+1, g.Name, want.cols[i].Name))
		}
	}
	return strings.Join(d, "; ")
}

func diffNames(cs []*mysql.Column) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// diffParametrize returns q with the numeric and string literals of its
// WHERE, HAVING and LIMIT clauses replaced by ?, and the values to bind
// in placeholder order. A minus sign that makes a number negative goes
// with the number. Literals elsewhere (the select list, GROUP BY and ORDER
// BY, where positions and expressions must stay as written), after an
// introducer or a DATE/TIME/TIMESTAMP keyword, stay.
func diffParametrize(q string) (string, []diffParam) {
	var out []string // pieces of the result
	var sig []int    // indexes in out of the pieces that are not space or comments
	var params []diffParam
	depth := 0
	clause := "" // "", "where" (WHERE or HAVING) or "limit"
	emit := func(s string, significant bool) {
		if significant {
			sig = append(sig, len(out))
		}
		out = append(out, s)
	}
	prev := func(k int) string { // the k-th significant piece back, or ""
		if len(sig) < k {
			return ""
		}
		return out[sig[len(sig)-k]]
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			j := i
			for j < len(q) && strings.IndexByte(" \t\n\r", q[j]) >= 0 {
				j++
			}
			emit(q[i:j], false)
			i = j
		case strings.HasPrefix(q[i:], "/*"):
			j := len(q)
			if k := strings.Index(q[i+2:], "*/"); k >= 0 {
				j = i + 2 + k + 2
			}
			emit(q[i:j], false)
			i = j
		case c == '\'' || c == '"':
			val, j := diffReadString(q, i)
			p := strings.ToUpper(prev(1))
			if clause == "where" && !strings.HasPrefix(p, "_") && p != "DATE" && p != "TIME" && p != "TIMESTAMP" {
				params = append(params, diffBindString(q[i:j], val, len(params)))
				emit("?", true)
			} else {
				emit(q[i:j], true)
			}
			i = j
		case c == '`':
			j := i + 1
			for j < len(q) && q[j] != '`' {
				j++
			}
			j = min(j+1, len(q))
			emit(q[i:j], true)
			i = j
		case c >= '0' && c <= '9':
			j := diffNumberEnd(q, i)
			lit := q[i:j]
			i = j
			if clause == "" {
				emit(lit, true)
				break
			}
			if prev(1) == "-" && diffOperatorContext(prev(2)) {
				// A unary minus: the value is negative.
				out = out[:sig[len(sig)-1]]
				sig = sig[:len(sig)-1]
				lit = "-" + lit
			}
			params = append(params, diffBindNumber(lit, clause == "limit", len(params)))
			emit("?", true)
		case c == '_' || c == '$' || (c|0x20) >= 'a' && (c|0x20) <= 'z':
			j := i
			for j < len(q) && (q[j] == '_' || q[j] == '$' || q[j] >= '0' && q[j] <= '9' || (q[j]|0x20) >= 'a' && (q[j]|0x20) <= 'z') {
				j++
			}
			w := q[i:j]
			if depth == 0 {
				switch strings.ToUpper(w) {
				case "WHERE", "HAVING":
					clause = "where"
				case "LIMIT":
					clause = "limit"
				case "SELECT", "FROM", "GROUP", "ORDER", "UNION", "FOR", "INTO":
					clause = ""
				}
			}
			emit(w, true)
			i = j
		default:
			switch c {
			case '(':
				depth++
			case ')':
				depth--
			}
			emit(q[i:i+1], true)
			i++
		}
	}
	return strings.Join(out, ""), params
}

// diffOperatorContext reports whether a minus sign after piece p is unary.
func diffOperatorContext(p string) bool {
	switch strings.ToUpper(p) {
	case "", "(", ",", "=", "<", ">", "!", "+", "-", "*", "/", "%", "WHERE", "HAVING", "AND", "OR", "XOR", "NOT",
		"BETWEEN", "IN", "LIKE", "IS", "LIMIT", "OFFSET", "SELECT", "ON", "WHEN", "THEN", "ELSE", "CASE", "DIV", "MOD":
		return true
	}
	return false
}

// diffNumberEnd returns the end of the number literal starting at i.
func diffNumberEnd(q string, i int) int {
	digits := func(j int) int {
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			j++
		}
		return j
	}
	j := digits(i)
	if j < len(q) && q[j] == '.' {
		j = digits(j + 1)
	}
	if j+1 < len(q) && (q[j] == 'e' || q[j] == 'E') {
		k := j + 1
		if q[k] == '+' || q[k] == '-' {
			k++
		}
		if k < len(q) && q[k] >= '0' && q[k] <= '9' {
			j = digits(k)
		}
	}
	return j
}

// diffReadString reads the quoted string starting at i: its value and
// the end of the literal.
func diffReadString(q string, i int) (string, int) {
	quote := q[i]
	var b strings.Builder
	j := i + 1
	for j < len(q) {
		c := q[j]
		switch {
		case c == quote && j+1 < len(q) && q[j+1] == quote:
			b.WriteByte(quote)
			j += 2
		case c == quote:
			return b.String(), j + 1
		case c == '\\' && j+1 < len(q):
			switch e := q[j+1]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'Z':
				b.WriteByte(26)
			case '%', '_':
				b.WriteByte('\\')
				b.WriteByte(e)
			default:
				b.WriteByte(e)
			}
			j += 2
		default:
			b.WriteByte(c)
			j++
		}
	}
	return b.String(), j
}

// diffVariant picks how the n-th value of a statement with literal lit is
// bound, from its position and text only, so that the same literal binds
// alike in a statement and in the same statement without its LIMIT.
func diffVariant(lit string, n, choices int) int {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s", n, lit)
	return int(h.Sum64() % uint64(choices))
}

var (
	diffDateRe     = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})$`)
	diffDatetimeRe = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$`)
)

// diffBindNumber binds a numeric literal: integers as LONGLONG mostly,
// else as the narrowest signed or unsigned integer type, a DOUBLE or a
// string (LIMIT takes integers only); decimals as DOUBLE, DECIMAL or a
// string.
func diffBindNumber(lit string, limit bool, n int) diffParam {
	str := func(typ byte) diffParam {
		return diffParam{typ: typ, val: mysql.AppendLenEncBytes(nil, []byte(lit)), lit: lit}
	}
	i, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		if u, err := strconv.ParseUint(lit, 10, 64); err == nil {
			return diffParam{typ: mysql.TypeLongLong, flags: 0x80, val: binary.LittleEndian.AppendUint64(nil, u), lit: lit}
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			panic("not a number: " + lit)
		}
		switch diffVariant(lit, n, 3) {
		case 0:
			return diffParam{typ: mysql.TypeDouble, val: binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)), lit: lit}
		case 1:
			return str(mysql.TypeNewDecimal)
		}
		return str(mysql.TypeString)
	}
	narrow := func(unsigned bool) diffParam {
		p := diffParam{lit: lit}
		if unsigned {
			p.flags = 0x80
		}
		switch {
		case unsigned && i >= 0 && i <= math.MaxUint8, !unsigned && i >= math.MinInt8 && i <= math.MaxInt8:
			p.typ, p.val = mysql.TypeTiny, []byte{byte(i)}
		case unsigned && i >= 0 && i <= math.MaxUint16, !unsigned && i >= math.MinInt16 && i <= math.MaxInt16:
			p.typ, p.val = mysql.TypeShort, binary.LittleEndian.AppendUint16(nil, uint16(i))
		case unsigned && i >= 0 && i <= math.MaxUint32, !unsigned && i >= math.MinInt32 && i <= math.MaxInt32:
			p.typ, p.val = mysql.TypeLong, binary.LittleEndian.AppendUint32(nil, uint32(i))
		default:
			p.typ, p.val = mysql.TypeLongLong, binary.LittleEndian.AppendUint64(nil, uint64(i))
			if i < 0 {
				p.flags = 0
			}
		}
		return p
	}
	longlong := diffParam{typ: mysql.TypeLongLong, val: binary.LittleEndian.AppendUint64(nil, uint64(i)), lit: lit}
	switch v := diffVariant(lit, n, 8); {
	case v == 3:
		return narrow(false)
	case v == 4 && i >= 0:
		return narrow(true)
	case v == 5 && i >= 0:
		u := longlong
		u.flags = 0x80
		return u
	case v == 6 && !limit:
		return str(mysql.TypeString)
	case v == 7 && !limit && i > -1<<53 && i < 1<<53:
		return diffParam{typ: mysql.TypeDouble, val: binary.LittleEndian.AppendUint64(nil, math.Float64bits(float64(i))), lit: lit}
	}
	return longlong
}

// diffBindString binds a string literal as STRING mostly, else as
// VAR_STRING, VARCHAR or BLOB (a binary string, as MySQL reads BLOB
// parameters); dates and datetimes also as binary DATE, DATETIME or
// TIMESTAMP values.
func diffBindString(lit, val string, n int) diffParam {
	str := func(typ byte) diffParam {
		return diffParam{typ: typ, val: mysql.AppendLenEncBytes(nil, []byte(val)), lit: lit}
	}
	v := diffVariant(lit, n, 8)
	if m := diffDatetimeRe.FindStringSubmatch(val); m == nil {
		m = diffDateRe.FindStringSubmatch(val)
		if m != nil && v >= 4 {
			// DATE as libmysqlclient sends it (4 bytes), or with a zero
			// time (7 bytes) as some connectors do for java.sql.Date.
			b := diffBinaryDate(m, v == 5 || v == 7)
			typ := mysql.TypeDate
			if v == 6 {
				typ = mysql.TypeDatetime
			}
			return diffParam{typ: typ, val: b, lit: lit}
		}
	} else if v >= 4 {
		typ := mysql.TypeDatetime
		if v == 6 {
			typ = mysql.TypeTimestamp
		}
		return diffParam{typ: typ, val: diffBinaryDate(m, true), lit: lit}
	}
	switch v {
	case 1:
		return str(mysql.TypeVarString)
	case 2:
		return str(mysql.TypeVarchar)
	case 3:
		return str(mysql.TypeBlob)
	}
	return str(mysql.TypeString)
}

// diffBinaryDate encodes a date or datetime's submatches as a binary
// temporal value, with the time (7 bytes) or without (4).
func diffBinaryDate(m []string, withTime bool) []byte {
	f := make([]int, 6)
	for i := 1; i < len(m); i++ {
		f[i-1], _ = strconv.Atoi(m[i])
	}
	b := []byte{4}
	if withTime {
		b[0] = 7
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(f[0]))
	b = append(b, byte(f[1]), byte(f[2]))
	if withTime {
		b = append(b, byte(f[3]), byte(f[4]), byte(f[5]))
	}
	return b
}

// diffPrepared is COM_STMT_PREPARE's answer.
type diffPrepared struct {
	params int
	cols   []*mysql.Column
}

// diffExecute prepares q, executes it once with args, reads the whole
// answer (binary rows decoded as diffBinaryRow does) and closes the
// statement. A malformed answer is an error with code 0.
func diffExecute(r *rawConn, q string, args []diffParam) diffAnswer {
	r.t.Helper()
	r.nc.SetDeadline(time.Now().Add(60 * time.Second))
	deprecateEOF := r.caps&mysql.ClientDeprecateEOF != 0
	r.command(append([]byte{mysql.ComStmtPrepare}, q...))
	p := r.read()
	switch {
	case len(p) == 0:
		r.t.Fatalf("prepare %s: empty response packet", q)
	case p[0] == mysql.ErrHeader:
		return diffAnswer{err: mysql.ParseErr(p)}
	case p[0] != mysql.OKHeader || len(p) < 12:
		r.t.Fatalf("prepare %s: got %s, want the statement OK", q, describe(p))
	}
	id := binary.LittleEndian.Uint32(p[1:5])
	ncols := int(binary.LittleEndian.Uint16(p[5:7]))
	pr := &diffPrepared{params: int(binary.LittleEndian.Uint16(p[7:9]))}
	for range pr.params {
		r.read()
	}
	if pr.params > 0 && !deprecateEOF {
		if p := r.read(); !mysql.IsEOF(p) {
			r.t.Fatalf("prepare %s: got %s, want EOF after the parameters", q, describe(p))
		}
	}
	for i := range ncols {
		c, err := mysql.ParseColumn(r.read())
		if err != nil {
			r.t.Fatalf("prepare %s: column %d: %v", q, i, err)
		}
		pr.cols = append(pr.cols, c)
	}
	if ncols > 0 && !deprecateEOF {
		if p := r.read(); !mysql.IsEOF(p) {
			r.t.Fatalf("prepare %s: got %s, want EOF after the columns", q, describe(p))
		}
	}
	defer r.command(binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtClose}, id)) // no answer
	a := diffAnswer{prepared: pr}
	if pr.params != len(args) {
		a.err = &mysql.SQLError{Message: fmt.Sprintf("the statement has %d parameters, %d values are bound", pr.params, len(args))}
		return a
	}
	e := &mysql.StmtExecute{Iterations: 1, Null: make([]bool, len(args))}
	for _, arg := range args {
		e.Types = append(e.Types, arg.typ, arg.flags)
		e.Values = append(e.Values, arg.val)
	}
	r.command(mysql.AppendStmtExecute(nil, id, e))
	p = r.read()
	switch {
	case len(p) == 0:
		r.t.Fatalf("execute %s: empty response packet", q)
	case p[0] == mysql.ErrHeader:
		a.err = mysql.ParseErr(p)
		return a
	case p[0] == mysql.OKHeader:
		return a
	}
	n, _, k := mysql.ReadLenEncInt(p)
	if k == 0 {
		r.t.Fatalf("execute %s: bad column count %x", q, p)
	}
	for i := uint64(0); i < n; i++ {
		c, err := mysql.ParseColumn(r.read())
		if err != nil {
			r.t.Fatalf("execute %s: column %d: %v", q, i, err)
		}
		a.cols = append(a.cols, c)
	}
	if !deprecateEOF {
		if p := r.read(); !mysql.IsEOF(p) {
			r.t.Fatalf("execute %s: got %s, want EOF after columns", q, describe(p))
		}
	}
	for {
		p := r.read()
		if mysql.IsEOF(p) {
			return a
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			a.err = mysql.ParseErr(p)
			return a
		}
		row, err := diffBinaryRow(p, a.cols)
		if err != nil && a.err == nil {
			// Read on to the end of the result, keeping the connection
			// in step; the answer is wrong.
			a.err = &mysql.SQLError{Message: fmt.Sprintf("row %d: %v: %x", len(a.rows), err, p)}
		}
		a.rows = append(a.rows, row)
	}
}

// diffBinaryRow decodes a binary protocol row into the text each value
// prints as: integers in decimal, floats in the shortest form that reads
// back exactly, temporal values as 'YYYY-MM-DD hh:mm:ss' with the column's
// fractional digits, everything else (DECIMAL, strings) as sent.
func diffBinaryRow(p []byte, cols []*mysql.Column) ([]string, error) {
	nb := (len(cols) + 7 + 2) / 8
	if len(p) < 1+nb || p[0] != mysql.OKHeader {
		return nil, fmt.Errorf("not a binary row")
	}
	bitmap, r := p[1:1+nb], p[1+nb:]
	row := make([]string, len(cols))
	for i, c := range cols {
		if pos := i + 2; bitmap[pos/8]&(1<<(pos%8)) != 0 {
			row[i] = diffNull
			continue
		}
		s, n, err := diffBinaryValue(c, r)
		if err != nil {
			return nil, fmt.Errorf("column %d %q (type %#x): %v", i+1, c.Name, c.Type, err)
		}
		row[i], r = s, r[n:]
	}
	if len(r) != 0 {
		return nil, fmt.Errorf("%d bytes after the last value", len(r))
	}
	return row, nil
}

func diffBinaryValue(c *mysql.Column, r []byte) (string, int, error) {
	short := fmt.Errorf("truncated value")
	fixed := func(n int) ([]byte, error) {
		if len(r) < n {
			return nil, short
		}
		return r[:n], nil
	}
	unsigned := c.Flags&mysql.FlagUnsigned != 0
	integer := func(u uint64, bits int) string {
		if unsigned || c.Type == mysql.TypeYear {
			return strconv.FormatUint(u, 10)
		}
		return strconv.FormatInt(int64(u<<(64-bits))>>(64-bits), 10)
	}
	switch c.Type {
	case mysql.TypeTiny:
		b, err := fixed(1)
		if err != nil {
			return "", 0, err
		}
		return integer(uint64(b[0]), 8), 1, nil
	case mysql.TypeShort, mysql.TypeYear:
		b, err := fixed(2)
		if err != nil {
			return "", 0, err
		}
		return integer(uint64(binary.LittleEndian.Uint16(b)), 16), 2, nil
	case mysql.TypeLong, mysql.TypeInt24:
		b, err := fixed(4)
		if err != nil {
			return "", 0, err
		}
		return integer(uint64(binary.LittleEndian.Uint32(b)), 32), 4, nil
	case mysql.TypeLongLong:
		b, err := fixed(8)
		if err != nil {
			return "", 0, err
		}
		return integer(binary.LittleEndian.Uint64(b), 64), 8, nil
	case mysql.TypeFloat:
		b, err := fixed(4)
		if err != nil {
			return "", 0, err
		}
		return strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 'g', -1, 32), 4, nil
	case mysql.TypeDouble:
		b, err := fixed(8)
		if err != nil {
			return "", 0, err
		}
		return strconv.FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(b)), 'g', -1, 64), 8, nil
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		if len(r) < 1 || len(r) < 1+int(r[0]) {
			return "", 0, short
		}
		d := r[1 : 1+int(r[0])]
		var f [6]int
		micro := 0
		switch len(d) {
		case 11:
			micro = int(binary.LittleEndian.Uint32(d[7:]))
			fallthrough
		case 7:
			f[3], f[4], f[5] = int(d[4]), int(d[5]), int(d[6])
			fallthrough
		case 4:
			f[0], f[1], f[2] = int(binary.LittleEndian.Uint16(d)), int(d[2]), int(d[3])
		case 0:
		default:
			return "", 0, fmt.Errorf("temporal value of %d bytes", len(d))
		}
		s := fmt.Sprintf("%04d-%02d-%02d", f[0], f[1], f[2])
		if c.Type != mysql.TypeDate || f[3]+f[4]+f[5]+micro != 0 {
			s += fmt.Sprintf(" %02d:%02d:%02d", f[3], f[4], f[5]) + diffFraction(c, micro)
		}
		return s, 1 + len(d), nil
	case mysql.TypeTime:
		if len(r) < 1 || len(r) < 1+int(r[0]) {
			return "", 0, short
		}
		d := r[1 : 1+int(r[0])]
		if len(d) == 0 {
			return "00:00:00" + diffFraction(c, 0), 1, nil
		}
		if len(d) != 8 && len(d) != 12 {
			return "", 0, fmt.Errorf("TIME value of %d bytes", len(d))
		}
		sign, micro := "", 0
		if d[0] == 1 {
			sign = "-"
		}
		if len(d) == 12 {
			micro = int(binary.LittleEndian.Uint32(d[8:]))
		}
		h := int(binary.LittleEndian.Uint32(d[1:5]))*24 + int(d[5])
		return fmt.Sprintf("%s%02d:%02d:%02d", sign, h, d[6], d[7]) + diffFraction(c, micro), 1 + len(d), nil
	}
	v, isNull, n := mysql.ReadLenEncBytes(r)
	if n == 0 || isNull {
		return "", 0, fmt.Errorf("bad length-encoded value")
	}
	return string(v), n, nil
}

// diffFraction prints microseconds with the column's fractional digits (all
// six when the column has none but the value does, so no value is lost).
func diffFraction(c *mysql.Column, micro int) string {
	digits := int(c.Decimals)
	if digits < 1 || digits > 6 {
		if micro == 0 {
			return ""
		}
		digits = 6
	}
	s := fmt.Sprintf(".%06d", micro)
	if rest := strings.TrimRight(s[1+digits:], "0"); rest != "" {
		return s // digits beyond the column's: keep them all
	}
	return s[:1+digits]
}
