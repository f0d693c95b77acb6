package move_test

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// BenchmarkImportCopy imports a sysbench-shaped table of 100 000 rows
// from one server into 4 subtables on the other, once per iteration, and
// reports the copy's rows/s (the workflow's own copy_seconds). With
// -cpuprofile it shows where the proxy's share of a copy goes.
func BenchmarkImportCopy(b *testing.B) {
	if cluster == nil {
		b.Skip("integration benchmark: needs MariaDB")
	}
	src, dst := cluster.Servers[0], cluster.Servers[1]
	sdb := open(b, src, "")
	exec(b, sdb, "DROP DATABASE IF EXISTS bc_src", "CREATE DATABASE bc_src",
		"CREATE TABLE bc_src.sbtest1 (id INT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))")
	const rows = 100000
	for lo := 0; lo < rows; lo += 5000 {
		var v []string
		for i := lo; i < lo+5000; i++ {
			v = append(v, fmt.Sprintf("(%d, %d, '%s', '%s')", i+1, i*7%rows, strings.Repeat(fmt.Sprintf("%011d-", i), 10)[:119], strings.Repeat("x", 59)))
		}
		exec(b, sdb, "INSERT INTO bc_src.sbtest1 VALUES "+strings.Join(v, ","))
	}
	b.ResetTimer()
	var secs float64
	for i := range b.N {
		name := fmt.Sprintf("bc%d", i)
		ddb := open(b, dst, "")
		exec(b, ddb, "DROP DATABASE IF EXISTS bc_dst", "DROP DATABASE IF EXISTS bc_sidecar", "CREATE DATABASE bc_dst")
		store := move.NewStore(move.Endpoint{Addr: dst.Addr, User: dst.User, Password: dst.Password}, "bc_sidecar")
		m := move.NewManager(store, env{dst}, zap.NewNop(), "bench")
		rule := config.ShardRule{DB: "bc_dst", Table: "sbtest1", Key: "id", Type: "hash", Nodes: []string{"n1"}, Locations: []int{4}}
		if _, err := m.Start(move.Spec{Name: name, Kind: move.KindImport, DB: "bc_dst", Table: "sbtest1", From: rule, To: rule,
			Source: &move.Endpoint{Addr: src.Addr, User: src.User, Password: src.Password}, SourceDB: "bc_src", SourceTable: "sbtest1",
			Options: config.MoveOptions{CopyWorkers: 4, BatchRows: 1000}}); err != nil {
			b.Fatal(err)
		}
		st := wait(b, m, name, move.PhaseReady)
		secs += st.State.CopySeconds
		m.Close()
	}
	b.ReportMetric(float64(rows*b.N)/secs, "rows/s")
}
