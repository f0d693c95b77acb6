package engine

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// meta answers, with a result the proxy builds, the statements about
// tables whose answer one backend cannot give: SHOW TABLES and SHOW TABLE
// STATUS over the subtables of several nodes (each subtable shown as its
// logical table, a sharded table's status summed over its subtables), and
// EXPLAIN FORMAT='shard', which shows the plan itself. Each target's
// small result is read whole (Executor.collect) before anything is sent.
type meta struct {
	x *Executor
}

// showTables answers SHOW TABLES with the union over the targets, subtable
// names replaced by their logical table, without duplicates, in name
// order.
func (mt meta) showTables(plan *router.Plan) error {
	x := mt.x
	names := NewRenames(plan.Renames)
	var cols []mysql.Column
	seen := map[string]bool{}
	var rows [][][]byte
	for i := range plan.Targets {
		res, err := x.collect(&plan.Targets[i])
		if err != nil {
			return err
		}
		if cols == nil {
			for _, c := range res.Columns {
				cols = append(cols, *c)
			}
		}
		for _, row := range res.Rows {
			if len(row) == 0 || row[0] == nil {
				continue
			}
			row[0] = []byte(names.Name(string(row[0])))
			var key strings.Builder
			for _, v := range row {
				key.Write(v)
				key.WriteByte(0)
			}
			if seen[key.String()] {
				continue
			}
			seen[key.String()] = true
			rows = append(rows, row)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return string(rows[i][0]) < string(rows[j][0]) })
	return WriteResultSet(x.w, cols, rows)
}

// explain answers EXPLAIN FORMAT='shard' with the plan's targets.
func (mt meta) explain(plan *router.Plan) error {
	x := mt.x
	cols := []mysql.Column{
		{Name: "node", Type: mysql.TypeVarString, Length: 256, Charset: 45},
		{Name: "backend", Type: mysql.TypeVarString, Length: 256, Charset: 45},
		{Name: "subtable", Type: mysql.TypeVarString, Length: 256, Charset: 45},
		{Name: "cache", Type: mysql.TypeVarString, Length: 1024, Charset: 45},
		{Name: "sql", Type: mysql.TypeVarString, Length: 65535, Charset: 45},
	}
	rows := make([][][]byte, 0, len(plan.Targets))
	for _, t := range plan.Targets {
		addr := ""
		if n := x.eng.node(t.Node); n != nil {
			addr = n.Addr()
		}
		rows = append(rows, [][]byte{[]byte(t.Node), []byte(addr), Nullable(t.Subtable), []byte(plan.Cache), []byte(t.SQL)})
	}
	return WriteResultSet(x.w, cols, rows)
}

// WriteResultSet sends a complete result set built by the proxy.
func WriteResultSet(w Writer, cols []mysql.Column, rows [][][]byte) error {
	ptrs := make([]*mysql.Column, len(cols))
	for i := range cols {
		ptrs[i] = &cols[i]
	}
	if err := w.Fields(ptrs, nil); err != nil {
		return err
	}
	for _, r := range rows {
		if err := w.Row(r, nil); err != nil {
			return err
		}
	}
	return w.End(0)
}

// Nullable is s as a column value, NULL when empty.
func Nullable(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// Renames maps physical table names to logical ones in results.
type Renames map[string]string

// NewRenames builds the map of a plan's renames.
func NewRenames(rs []router.Rename) Renames {
	m := make(Renames, len(rs))
	for _, r := range rs {
		m[r.Physical] = r.Logical
	}
	return m
}

// Name is the logical name of table s (s itself when it is not a subtable).
func (m Renames) Name(s string) string {
	if l, ok := m[s]; ok {
		return l
	}
	return s
}

// Text replaces the occurrences of physical names that stand as names:
// quoted (`t_0000`, 't_0000') or between characters no name holds (a
// GROUP_CONCAT of table names: t_0000,u). t_00001 and xt_0000 are left.
func (m Renames) Text(s string) string {
	for p, l := range m {
		if !strings.Contains(s, p) {
			continue
		}
		var b strings.Builder
		rest := s
		for {
			i := strings.Index(rest, p)
			if i < 0 {
				break
			}
			end := i + len(p)
			name := (i == 0 || !nameByte(rest[i-1])) && (end == len(rest) || !nameByte(rest[end]))
			b.WriteString(rest[:i])
			if name {
				b.WriteString(l)
			} else {
				b.WriteString(p)
			}
			rest = rest[end:]
		}
		b.WriteString(rest)
		s = b.String()
	}
	return s
}

// nameByte reports whether c may be part of an unquoted name.
func nameByte(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

// RelayRenamed returns a relay for metadata statements on a sharded table
// (SHOW CREATE TABLE, SHOW INDEX, DESCRIBE): the small result is decoded,
// physical names are replaced by the logical name, and it is re-sent.
func RelayRenamed(rs []router.Rename) Relay {
	return func(x *Executor, bc *backend.Conn) (backend.Outcome, error) {
		m := NewRenames(rs)
		res, more, err := bc.ReadResult()
		for err == nil && more {
			_, more, err = bc.ReadResult()
		}
		if err != nil {
			var se *mysql.SQLError
			if errors.As(err, &se) && !bc.Broken() {
				return backend.Outcome{}, &mysql.SQLError{Code: se.Code, State: se.State, Message: m.Text(se.Message)}
			}
			return backend.Outcome{}, err
		}
		done := backend.Outcome{OK: true, Status: res.OK.Status, Sent: true}
		if res.Columns == nil {
			return done, x.w.OK(res.OK)
		}
		cols := make([]mysql.Column, len(res.Columns))
		for i, c := range res.Columns {
			cols[i] = *c
			cols[i].Table = m.Name(c.Table)
			cols[i].OrgTable = m.Name(c.OrgTable)
		}
		for _, row := range res.Rows {
			for i, v := range row {
				if v == nil {
					continue
				}
				if l, ok := m[string(v)]; ok {
					row[i] = []byte(l)
				} else {
					row[i] = []byte(m.Text(string(v)))
				}
			}
		}
		return done, WriteResultSet(x.w, cols, res.Rows)
	}
}

// showTableStatus answers SHOW TABLE STATUS over the targets: one row per
// logical table, a sharded table's subtables summed (Rows, Data_length,
// Index_length, Data_free, Max_data_length; Avg_row_length recomputed; the
// largest Auto_increment; the earliest Create_time, the latest
// Update_time and Check_time), one copy of a global table, matching the
// plan's LIKE pattern on logical names, in name order.
func (mt meta) showTableStatus(plan *router.Plan) error {
	x := mt.x
	names := NewRenames(plan.Renames)
	var cols []mysql.Column
	idx := map[string]int{}
	byName := map[string][][]byte{}
	var order []string
	for i := range plan.Targets {
		res, err := x.collect(&plan.Targets[i])
		if err != nil {
			return err
		}
		if cols == nil {
			for j, c := range res.Columns {
				cols = append(cols, *c)
				idx[c.Name] = j
			}
		}
		for _, row := range res.Rows {
			if len(row) != len(cols) || row[0] == nil {
				continue
			}
			logical := names.Name(string(row[0]))
			if !router.LikeMatch(logical, plan.Pattern, plan.Escape) {
				continue
			}
			sum, seen := byName[logical]
			if !seen {
				row[0] = []byte(logical)
				byName[logical] = row
				order = append(order, logical)
				continue
			}
			if string(row[0]) == logical {
				continue // another copy of a global table
			}
			addStatus(sum, row, idx)
		}
	}
	sort.Strings(order)
	rows := make([][][]byte, 0, len(order))
	for _, n := range order {
		row := byName[n]
		if i, ok := idx["Avg_row_length"]; ok {
			r, d := statusInt(row, idx, "Rows"), statusInt(row, idx, "Data_length")
			if r > 0 && d >= 0 {
				row[i] = []byte(strconv.FormatInt(d/r, 10))
			}
		}
		rows = append(rows, row)
	}
	return WriteResultSet(x.w, cols, rows)
}

// addStatus adds one subtable's SHOW TABLE STATUS row into sum.
func addStatus(sum, row [][]byte, idx map[string]int) {
	for _, c := range []string{"Rows", "Data_length", "Max_data_length", "Index_length", "Data_free"} {
		i, ok := idx[c]
		if !ok || row[i] == nil || sum[i] == nil {
			continue
		}
		a, err1 := strconv.ParseInt(string(sum[i]), 10, 64)
		b, err2 := strconv.ParseInt(string(row[i]), 10, 64)
		if err1 == nil && err2 == nil {
			sum[i] = []byte(strconv.FormatInt(a+b, 10))
		}
	}
	pick := func(c string, later bool) {
		i, ok := idx[c]
		if !ok || row[i] == nil {
			return
		}
		if sum[i] == nil || (string(row[i]) > string(sum[i])) == later {
			sum[i] = row[i]
		}
	}
	if i, ok := idx["Auto_increment"]; ok && row[i] != nil {
		a, _ := strconv.ParseInt(string(sum[i]), 10, 64)
		if b, err := strconv.ParseInt(string(row[i]), 10, 64); err == nil && (sum[i] == nil || b > a) {
			sum[i] = row[i]
		}
	}
	pick("Create_time", false)
	pick("Update_time", true)
	pick("Check_time", true)
}

func statusInt(row [][]byte, idx map[string]int, c string) int64 {
	i, ok := idx[c]
	if !ok || row[i] == nil {
		return -1
	}
	v, err := strconv.ParseInt(string(row[i]), 10, 64)
	if err != nil {
		return -1
	}
	return v
}
