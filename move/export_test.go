package move

import (
	"context"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/shardgate/shardgate/config"
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
// table b the way the copy reads and writes them.
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
	// The copy's own writer: LOAD DATA LOCAL (or REPLACE, with Replace).
	cp := &copier{def: def, targets: []copyTarget{{node: "b", db: dbB, name: tableB}}, env: oneEndpoint{b}}
	cp.noLocal.Store(Replace)
	conns := map[string]*client.Conn{}
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	data := jobBufs.Get().(*[]byte)
	*data = (*data)[:4]
	for i, row := range r.Values {
		if Replace {
			*data = appendTuple(*data, row, i == 0)
		} else {
			*data = appendTSV(*data, row)
		}
	}
	if err := cp.write(conns, job{target: 0, data: data, rows: len(r.Values)}); err != nil {
		return err
	}
	return nil
}

// Replace makes CopyRows write with REPLACE statements, as the copy does
// where the server refuses LOAD DATA LOCAL.
var Replace bool

// oneEndpoint is an Env whose every node is ep.
type oneEndpoint struct{ ep Endpoint }

func (o oneEndpoint) Endpoint(string) (Endpoint, error) { return o.ep, nil }
func (oneEndpoint) Lag(string) time.Duration            { return 0 }
func (oneEndpoint) Pause(context.Context, string, string) (func(*config.ShardRule) (time.Duration, error), error) {
	return nil, nil
}
