package move

import (
	"context"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
)

// CompareTables checksums table a and table b with the verify's queries
// (ranges of width keys for an integer key, 4096 hash buckets otherwise)
// and returns the buckets that differ and the rows of a.
func CompareTables(a, b Endpoint, dbA, tableA, dbB, tableB string, width int64) ([]int64, int64, error) {
	ca, err := dial(a)
	if err != nil {
		return nil, 0, err
	}
	defer ca.Close()
	cb, err := dial(b)
	if err != nil {
		return nil, 0, err
	}
	defer cb.Close()
	def, err := readDef(ca, dbA, tableA)
	if err != nil {
		return nil, 0, err
	}
	v := &verifier{def: def, width: width}
	sa, sb := map[int64]bucketSum{}, map[int64]bucketSum{}
	ctx := context.Background()
	if err := v.sums(ctx, func(table) (*client.Conn, error) { return ca, nil }, []table{{ep: a, db: dbA, name: tableA}}, nil, sa); err != nil {
		return nil, 0, err
	}
	if err := v.sums(ctx, func(table) (*client.Conn, error) { return cb, nil }, []table{{ep: b, db: dbB, name: tableB}}, nil, sb); err != nil {
		return nil, 0, err
	}
	var rows int64
	for _, s := range sa {
		rows += s.rows
	}
	return differ(sa, sb), rows, nil
}

// CopyRows copies the rows of table a that match where ("" for all) into
// table b (REPLACE), the way the copy and the repair read and write them.
func CopyRows(a, b Endpoint, dbA, tableA, dbB, tableB, where string) error {
	ca, err := dial(a)
	if err != nil {
		return err
	}
	defer ca.Close()
	cb, err := dial(b)
	if err != nil {
		return err
	}
	defer cb.Close()
	def, err := readDef(ca, dbA, tableA)
	if err != nil {
		return err
	}
	if where != "" {
		where = " WHERE " + where
	}
	r, err := ca.Execute("SELECT " + def.selectList() + " FROM " + qualified(dbA, tableA) + where)
	if err != nil {
		return err
	}
	for i := range r.Values {
		var row strings.Builder
		row.WriteByte('(')
		for j := range r.Values[i] {
			if j > 0 {
				row.WriteByte(',')
			}
			literal(&row, &r.Values[i][j])
		}
		row.WriteByte(')')
		if _, err := cb.Execute("REPLACE INTO " + qualified(dbB, tableB) + " (" + def.colList() + ") VALUES " + row.String()); err != nil {
			return err
		}
	}
	return nil
}
