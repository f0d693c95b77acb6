package move

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/shardgate/shardgate/mysql"
)

// table is one physical table on a server.
type table struct {
	ep       Endpoint
	db, name string
}

// bucketSum is the rows of one primary-key range on one side: their
// count, the sum (mod 2^64) of the CRC32s and the XOR of the CRC32Cs of
// their canonical images (tableDef.rowImage). CRC32 tells apart any two
// images that differ in one burst of up to 32 bits, so a single changed
// byte always shows; CRC32C is a second, independent 32 bits.
type bucketSum struct {
	rows int64
	sum  uint64
	xor  uint64
}

// verifier compares the rows of two sets of tables by primary-key range.
type verifier struct {
	def   *tableDef
	width int64 // keys per range of an integer key; 0: 4096 hash buckets of other keys
}

func (v *verifier) bucketExpr() string {
	if v.def.intPK {
		return mysql.QuoteIdent(v.def.cols[v.def.pk[0]]) + " DIV " + strconv.FormatInt(v.width, 10)
	}
	return v.def.keyHash() + " % 4096"
}

// describe names bucket b for a report.
func (v *verifier) describe(b int64) string {
	if v.def.intPK {
		return fmt.Sprintf("%s in [%d, %d)", v.def.cols[v.def.pk[0]], b*v.width, (b+1)*v.width)
	}
	return fmt.Sprintf("CRC32(%s) %% 4096 = %d", v.def.pkList(), b)
}

// sums adds up the buckets of tables into out; only those in only (all
// when nil). conn returns a connection to a table's server.
func (v *verifier) sums(ctx context.Context, conn func(table) (*client.Conn, error), tables []table, only []int64, out map[int64]bucketSum) error {
	where := ""
	if only != nil {
		if len(only) == 0 {
			return nil
		}
		ids := make([]string, len(only))
		for i, b := range only {
			ids[i] = strconv.FormatInt(b, 10)
		}
		where = " WHERE " + v.bucketExpr() + " IN (" + strings.Join(ids, ",") + ")"
	}
	for _, t := range tables {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c, err := conn(t)
		if err != nil {
			return err
		}
		r, err := c.Execute(v.sumQuery(t, where))
		if err != nil {
			return fmt.Errorf("checksum of %s.%s: %w", t.db, t.name, err)
		}
		for i := range r.Values {
			b, _ := r.GetInt(i, 0)
			n, _ := r.GetInt(i, 1)
			cur := out[b]
			cur.rows += n
			sum, _ := r.GetString(i, 2)
			x, ok := new(big.Int).SetString(sum, 10)
			if !ok {
				return fmt.Errorf("checksum of %s.%s: sum %q", t.db, t.name, sum)
			}
			cur.sum += x.Uint64() // the low 64 bits: the sums add mod 2^64
			xor, _ := r.GetUint(i, 3)
			cur.xor ^= xor
			out[b] = cur
		}
	}
	return nil
}

// sumQuery checksums the rows of t (where: "" or a WHERE clause) by
// bucket. It names nothing of its own: it groups by the first column of
// its select list (GROUP BY 1), so no column of the table, whatever its
// name, can stand in for an alias (issue 33: GROUP BY b grouped by a
// column named b).
func (v *verifier) sumQuery(t table, where string) string {
	img := v.def.rowImage()
	return "SELECT " + v.bucketExpr() + ", COUNT(*), SUM(CRC32(" + img + ")), BIT_XOR(CRC32C(" + img + ")) FROM " +
		qualified(t.db, t.name) + where + " GROUP BY 1"
}

// differ lists the buckets where a and b differ, ascending.
func differ(a, b map[int64]bucketSum) []int64 {
	var out []int64
	for k, x := range a {
		if b[k] != x {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// compare checksums the sources against the targets at one point of the
// binary log: each source node's tables are read in a consistent snapshot
// whose binary log position the server reports, and the targets are read
// while the apply is held exactly at those positions. Ranges that differ
// are compared a second time the same way; those that differ again are
// returned, with the rows compared.
func (v *verifier) compare(ctx context.Context, sources map[string][]table, targets []table, a *applier) ([]Range, int64, error) {
	var only []int64
	var src, dst map[int64]bucketSum
	for round := 0; round < 2; round++ {
		var err error
		src, dst, err = v.snapshotSums(ctx, sources, targets, a, only)
		if err != nil {
			return nil, 0, err
		}
		only = differ(src, dst)
		if len(only) == 0 {
			break
		}
	}
	var rows int64
	for _, s := range src {
		rows += s.rows
	}
	out := make([]Range, 0, len(only))
	for _, b := range only {
		out = append(out, Range{Bucket: b, SourceRows: src[b].rows, TargetRows: dst[b].rows, Description: v.describe(b)})
	}
	return out, rows, nil
}

// snapshotSums is one consistent comparison (see compare).
func (v *verifier) snapshotSums(ctx context.Context, sources map[string][]table, targets []table, a *applier, only []int64) (src, dst map[int64]bucketSum, err error) {
	src, dst = map[int64]bucketSum{}, map[int64]bucketSum{}
	snaps := map[string]*client.Conn{}
	defer func() {
		for _, c := range snaps {
			c.Execute("ROLLBACK")
			c.Close()
		}
	}()
	// The apply stops first, then the snapshots are taken: their positions
	// are past where it stopped, and it goes on to exactly them.
	h, err := a.freeze(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer h.release()
	at := map[string]string{}
	for node, ts := range sources {
		c, err := dial(ts[0].ep)
		if err != nil {
			return nil, nil, err
		}
		snaps[node] = c
		if _, err := c.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
			return nil, nil, err
		}
		r, err := c.Execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
		if err != nil {
			return nil, nil, err
		}
		var file, pos string
		for i := range r.Values {
			name, _ := r.GetString(i, 0)
			val, _ := r.GetString(i, 1)
			switch strings.ToLower(name) {
			case "binlog_snapshot_file":
				file = val
			case "binlog_snapshot_position":
				pos = val
			}
		}
		if file == "" {
			return nil, nil, fmt.Errorf("node %s reports no binlog_snapshot_file: verify needs MariaDB with binary logs", node)
		}
		g, err := c.Execute("SELECT BINLOG_GTID_POS(" + text(file) + ", " + pos + ")")
		if err != nil {
			return nil, nil, err
		}
		at[node], _ = g.GetString(0, 0)
	}
	if err := h.runTo(ctx, at); err != nil {
		return nil, nil, err
	}
	for node, ts := range sources {
		c := snaps[node]
		if err := v.sums(ctx, func(table) (*client.Conn, error) { return c, nil }, ts, only, src); err != nil {
			return nil, nil, err
		}
	}
	conns := map[string]*client.Conn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	err = v.sums(ctx, func(t table) (*client.Conn, error) {
		if c := conns[t.ep.Addr]; c != nil {
			return c, nil
		}
		c, err := dial(t.ep)
		if err == nil {
			conns[t.ep.Addr] = c
		}
		return c, err
	}, targets, only, dst)
	return src, dst, err
}

// repair makes the targets' rows of the given buckets those of the
// sources: every source row is written again where the placement puts it,
// and target rows the sources lack are deleted.
func (v *verifier) repair(ctx context.Context, sources []table, c *copier, buckets []int64) error {
	if len(buckets) == 0 {
		return nil
	}
	ids := make([]string, len(buckets))
	for i, b := range buckets {
		ids[i] = strconv.FormatInt(b, 10)
	}
	where := " WHERE " + v.bucketExpr() + " IN (" + strings.Join(ids, ",") + ")"
	keep := map[string]bool{}
	conns := map[string]*client.Conn{}
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	conn := func(ep Endpoint) (*client.Conn, error) {
		if cn := conns[ep.Addr]; cn != nil {
			return cn, nil
		}
		cn, err := dial(ep)
		if err == nil {
			conns[ep.Addr] = cn
		}
		return cn, err
	}
	for _, s := range sources {
		cn, err := conn(s.ep)
		if err != nil {
			return err
		}
		r, err := cn.Execute("SELECT " + v.def.selectList() + " FROM " + qualified(s.db, s.name) + where)
		if err != nil {
			return err
		}
		for i := range r.Values {
			t, err := c.place.Locate(fieldAny(&r.Values[i][c.keyCol]))
			if err != nil {
				return err
			}
			var row, pk strings.Builder
			row.WriteByte('(')
			for ci := range r.Values[i] {
				if ci > 0 {
					row.WriteByte(',')
				}
				literal(&row, &r.Values[i][ci])
			}
			row.WriteByte(')')
			pk.WriteString(strconv.Itoa(t))
			for _, j := range v.def.pk {
				pk.WriteByte('|')
				literal(&pk, &r.Values[i][j])
			}
			keep[pk.String()] = true
			tg := c.targets[t]
			ep, err := c.env.Endpoint(tg.node)
			if err != nil {
				return err
			}
			tc, err := conn(ep)
			if err != nil {
				return err
			}
			if _, err := tc.Execute("REPLACE INTO " + qualified(tg.db, tg.name) + " (" + v.def.colList() + ") VALUES " + row.String()); err != nil {
				return err
			}
		}
	}
	for ti, tg := range c.targets {
		ep, err := c.env.Endpoint(tg.node)
		if err != nil {
			return err
		}
		tc, err := conn(ep)
		if err != nil {
			return err
		}
		r, err := tc.Execute("SELECT " + v.def.pkList() + " FROM " + qualified(tg.db, tg.name) + where)
		if err != nil {
			return err
		}
		for i := range r.Values {
			var pk, cond strings.Builder
			pk.WriteString(strconv.Itoa(ti))
			cond.WriteByte('(')
			for j := range r.Values[i] {
				pk.WriteByte('|')
				literal(&pk, &r.Values[i][j])
				if j > 0 {
					cond.WriteByte(',')
				}
				literal(&cond, &r.Values[i][j])
			}
			cond.WriteByte(')')
			if keep[pk.String()] {
				continue
			}
			if _, err := tc.Execute("DELETE FROM " + qualified(tg.db, tg.name) + " WHERE (" + v.def.pkList() + ") = " + cond.String()); err != nil {
				return err
			}
		}
	}
	return nil
}
