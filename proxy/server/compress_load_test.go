package server_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
)

// TestLoadDataLocalCompressed (issue 32): LOAD DATA LOCAL INFILE over the
// compressed protocol used to lose the backend connection (1430). Files
// empty, of one line, of one packet and of many (several MiB), into an
// unsharded table (the file is relayed to the server) and a sharded one
// (the proxy splits it), with and without compression, load every line
// and leave the session usable; so does a second load on the same
// connection.
func TestLoadDataLocalCompressed(t *testing.T) {
	e := newShardEnv(t, "ldz",
		config.ShardRule{Table: "sh", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	mustExec(t, e.app,
		"CREATE TABLE plain (id INT PRIMARY KEY, s VARCHAR(200))",
		"CREATE TABLE sh (id INT PRIMARY KEY, s VARCHAR(200))")
	files := []struct {
		name  string
		lines int
	}{{"empty", 0}, {"one line", 1}, {"one packet", 100}, {"many packets", 60000}}
	for _, compress := range []bool{false, true} {
		c := conn(t, openDB(t, e.p.dsn("ldz", fmt.Sprintf("compress=%v", compress))))
		for _, f := range files {
			var b strings.Builder
			for i := range f.lines {
				fmt.Fprintf(&b, "%d\tline %d %s\n", i, i, strings.Repeat("v", i%150))
			}
			data := b.String()
			handler := "ldz_" + strings.ReplaceAll(f.name, " ", "_")
			gomysql.RegisterReaderHandler(handler, func() io.Reader { return strings.NewReader(data) })
			t.Cleanup(func() { gomysql.DeregisterReaderHandler(handler) })
			want := fmt.Sprintf("%d %d", f.lines, f.lines*(f.lines-1)/2)
			for _, table := range []string{"plain", "sh"} {
				t.Run(fmt.Sprintf("%s into %s, compress=%v", f.name, table, compress), func(t *testing.T) {
					for round := range 2 {
						mustExec(t, c, "DELETE FROM "+table)
						res, err := c.ExecContext(t.Context(), "LOAD DATA LOCAL INFILE 'Reader::"+handler+"' INTO TABLE "+table)
						if err != nil {
							t.Fatalf("round %d: %v", round, err)
						}
						if n, _ := res.RowsAffected(); n != int64(f.lines) {
							t.Errorf("round %d: %d rows affected, want %d", round, n, f.lines)
						}
						if got := queryValue(t, c, "SELECT CONCAT(COUNT(*), ' ', COALESCE(SUM(id), 0)) FROM "+table); got != want {
							t.Errorf("round %d: count and sum %s, want %s", round, got, want)
						}
					}
				})
			}
		}
	}
}
