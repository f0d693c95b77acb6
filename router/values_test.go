package router_test

import (
	"slices"
	"testing"

	"github.com/shardgate/shardgate/router"
)

// TestPlaceholderOrder: the restore writes LIMIT ? OFFSET ? as LIMIT ?,?
// with the offset first; the order maps the restored placeholders back to
// the client's.
func TestPlaceholderOrder(t *testing.T) {
	tests := []struct {
		sql  string
		want []int
	}{
		{"SELECT a FROM t WHERE id = ? ORDER BY a LIMIT ? OFFSET ?", []int{0, 2, 1}},
		{"SELECT a FROM t WHERE id = ? LIMIT ?, ?", nil},
		{"SELECT a FROM t WHERE s = 'x?' AND id IN (?, ?) LIMIT ? OFFSET 3", nil},
		{"SELECT a FROM t WHERE id IN (SELECT id FROM u LIMIT ? OFFSET ?) AND x = ?", []int{1, 0, 2}},
		{"UPDATE t SET a = ? WHERE id = ?", nil},
	}
	for _, tc := range tests {
		got, err := router.PlaceholderOrder(tc.sql, 0)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, %v, want %v", tc.sql, got, err, tc.want)
		}
	}
}
