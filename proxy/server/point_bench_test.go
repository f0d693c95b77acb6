package server_test

import (
	"strconv"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// BenchmarkPointSelect is the in-process end of the funnel in docs/benchmarks.md:
// sysbench's point select sent as text through the proxy to a fake
// backend that answers one row, unsharded (the statement is forwarded as
// it came) and sharded over 2 nodes x 4 subtables (routed through the plan
// cache, the key varying over every subtable). Client and backend allocate
// nothing per query, so allocs/op is the proxy's.
func BenchmarkPointSelect(b *testing.B) {
	row := newCanned([]string{"c"}, nil, [][]string{{"83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330"}})
	answer := func([]byte) *canned { return row }
	queries := make([][]byte, 256)
	for i := range queries {
		queries[i] = append([]byte{mysql.ComQuery}, "SELECT c FROM t WHERE id="+strconv.Itoa(1+i*37)...)
	}
	for _, tc := range []struct {
		name  string
		rules []config.ShardRule
	}{
		{"unsharded", nil},
		{"sharded", []config.ShardRule{{DB: "bench", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{4, 4}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bc := benchProxy(b, answer, tc.rules)
			for _, q := range queries[:16] { // warm the pool and the plan cache
				if n, err := bc.query(q); err != nil || n != 1 {
					b.Fatalf("%s: %d rows, %v", q[1:], n, err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := bc.query(queries[i%len(queries)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
