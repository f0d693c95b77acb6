package router

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// TestKingshardCompat loads kingshard's sample ks.yaml unchanged and checks,
// for sample keys, that reads and writes go to the subtable and node
// kingshard chooses. The expectations are worked out by hand from
// kingshard's algorithm:
//
//   - hash: index = key mod 8 (locations [4,4]: 0-3 on node1, 4-7 on
//     node2); negative integers as uint64(int64(key)), so -1 is
//     2^64-1 mod 8 = 7; strings that parse as unsigned integers by value,
//     other strings by crc32.ChecksumIEEE (zlib.crc32 gives the same:
//     "abc" = 891568578, mod 8 = 2; "kingshard" = 1740694220, mod 8 = 4).
//   - range: index = key / 10000 for 0 <= key < 80000, else an error.
//   - date_*: the table suffix is the key's year, year-month or date;
//     the node is the one whose date_range lists that period; integer keys
//     are Unix timestamps (UTC here; kingshard uses the server's zone).
func TestKingshardCompat(t *testing.T) {
	cfg, err := config.Load("testdata/kingshard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		table, key, value string
		subtable, node    string // "" subtable: the key is outside every range (1526)
	}{
		{"test_shard_hash", "id", "0", "test_shard_hash_0000", "node1"},
		{"test_shard_hash", "id", "1", "test_shard_hash_0001", "node1"},
		{"test_shard_hash", "id", "3", "test_shard_hash_0003", "node1"},
		{"test_shard_hash", "id", "4", "test_shard_hash_0004", "node2"},
		{"test_shard_hash", "id", "5", "test_shard_hash_0005", "node2"},
		{"test_shard_hash", "id", "8", "test_shard_hash_0000", "node1"},
		{"test_shard_hash", "id", "15", "test_shard_hash_0007", "node2"},
		{"test_shard_hash", "id", "1000000006", "test_shard_hash_0006", "node2"},
		{"test_shard_hash", "id", "-1", "test_shard_hash_0007", "node2"},
		{"test_shard_hash", "id", "-8", "test_shard_hash_0000", "node1"},
		{"test_shard_hash", "id", "'12'", "test_shard_hash_0004", "node2"},
		{"test_shard_hash", "id", "'abc'", "test_shard_hash_0002", "node1"},
		{"test_shard_hash", "id", "'kingshard'", "test_shard_hash_0004", "node2"},
		{"test_shard_hash", "id", "18446744073709551615", "test_shard_hash_0007", "node2"},

		{"test_shard_range", "id", "0", "test_shard_range_0000", "node1"},
		{"test_shard_range", "id", "9999", "test_shard_range_0000", "node1"},
		{"test_shard_range", "id", "10000", "test_shard_range_0001", "node1"},
		{"test_shard_range", "id", "39999", "test_shard_range_0003", "node1"},
		{"test_shard_range", "id", "40000", "test_shard_range_0004", "node2"},
		{"test_shard_range", "id", "65432", "test_shard_range_0006", "node2"},
		{"test_shard_range", "id", "79999", "test_shard_range_0007", "node2"},
		{"test_shard_range", "id", "'20001'", "test_shard_range_0002", "node1"},
		{"test_shard_range", "id", "80000", "", ""},
		{"test_shard_range", "id", "-5", "", ""},

		{"test_shard_year", "ctime", "'2015-06-01'", "test_shard_year_2015", "node1"},
		{"test_shard_year", "ctime", "'2016-12-31 23:59:59'", "test_shard_year_2016", "node1"},
		{"test_shard_year", "ctime", "'2017-01-01'", "test_shard_year_2017", "node2"},
		{"test_shard_year", "ctime", "'2018-12-31 23:59:59'", "test_shard_year_2018", "node2"},
		{"test_shard_year", "ctime", "1483228800", "test_shard_year_2017", "node2"}, // 2017-01-01T00:00:00Z
		{"test_shard_year", "ctime", "'2019-01-01'", "", ""},
		{"test_shard_year", "ctime", "'2014-12-31'", "", ""},

		{"test_shard_month", "ctime", "'2015-12-01'", "test_shard_month_201512", "node1"},
		{"test_shard_month", "ctime", "'2016-01-15'", "test_shard_month_201601", "node1"},
		{"test_shard_month", "ctime", "'2016-02-29 12:00:00'", "test_shard_month_201602", "node1"},
		{"test_shard_month", "ctime", "'2016-09-30 10:00:00'", "test_shard_month_201609", "node2"},
		{"test_shard_month", "ctime", "'2016-10-31'", "test_shard_month_201610", "node2"},
		{"test_shard_month", "ctime", "1451606400", "test_shard_month_201601", "node1"}, // 2016-01-01T00:00:00Z
		{"test_shard_month", "ctime", "DATE '2016-09-01'", "test_shard_month_201609", "node2"},
		{"test_shard_month", "ctime", "'2016-03-01'", "", ""},
		{"test_shard_month", "ctime", "'2016-11-01'", "", ""},

		{"test_shard_day", "ctime", "'2015-12-22'", "test_shard_day_20151222", "node1"},
		{"test_shard_day", "ctime", "'2015-12-23 08:00:00'", "test_shard_day_20151223", "node1"},
		{"test_shard_day", "ctime", "'2015-12-24'", "test_shard_day_20151224", "node1"},
		{"test_shard_day", "ctime", "'2016-09-01'", "test_shard_day_20160901", "node2"},
		{"test_shard_day", "ctime", "'2016-09-02 23:00:00'", "test_shard_day_20160902", "node2"},
		{"test_shard_day", "ctime", "1472688000", "test_shard_day_20160901", "node2"}, // 2016-09-01T00:00:00Z
		{"test_shard_day", "ctime", "'2015-12-25'", "", ""},
		{"test_shard_day", "ctime", "'2016-08-31'", "", ""},
	}
	s := Session{User: "kingshard", DB: "kingshard"}
	for _, tc := range tests {
		for _, sql := range []string{
			fmt.Sprintf("SELECT * FROM %s WHERE %s = %s", tc.table, tc.key, tc.value),
			fmt.Sprintf("INSERT INTO %s (%s, v) VALUES (%s, 1)", tc.table, tc.key, tc.value),
			fmt.Sprintf("DELETE FROM %s WHERE %s IN (%s)", tc.table, tc.key, tc.value),
		} {
			p, err := r.Route(sql, s)
			if tc.subtable == "" {
				var se *mysql.SQLError
				if !errors.As(err, &se) || se.Code != ErNoPartition || se.State != "HY000" {
					t.Errorf("%s: got %v, %v; want error 1526", sql, p, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", sql, err)
				continue
			}
			if len(p.Targets) != 1 || p.Targets[0].Subtable != tc.subtable || p.Targets[0].Node != tc.node {
				t.Errorf("%s: got %+v; want %s on %s", sql, p.Targets, tc.subtable, tc.node)
			}
		}
	}
}
