package engine

import "testing"

// TestLogicalName: subtables of every naming (kingshard's, date periods,
// a reshard's later generation) map to their logical table; other names
// do not.
func TestLogicalName(t *testing.T) {
	tables := []string{"orders", "t"}
	for name, want := range map[string]string{
		"orders_0003": "orders", "orders_202401": "orders", "orders_g1_0007": "orders", "t_g12_0000": "t",
		"orders": "", "orders_": "", "orders_g1_": "", "orders_gx_0001": "", "orders_g_0001": "", "orders_0001x": "", "other_0001": "",
	} {
		got, ok := LogicalName(tables, []byte(name))
		if got != want || ok != (want != "") {
			t.Errorf("LogicalName(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
