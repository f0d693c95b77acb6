package mysql

import "testing"

func TestCollations(t *testing.T) {
	for _, c := range collations {
		got, ok := CollationByID(c.ID)
		if !ok || got != c {
			t.Errorf("CollationByID(%d) = %+v, %v; want %+v", c.ID, got, ok, c)
		}
	}
	if c, ok := CollationByID(59); !ok || c.Name != "cp1257_general_ci" {
		t.Errorf("CollationByID(59) = %+v, %v; want cp1257_general_ci", c, ok)
	}
	if c, ok := CollationByID(0); ok {
		t.Errorf("CollationByID(0) = %+v, want not found", c)
	}

	defaults := []struct {
		charset string
		id      byte
		ok      bool
	}{
		{"utf8mb4", 45, true},
		{"UTF8MB4", 45, true},
		{"utf8", 33, true},
		{"utf8mb3", 33, true},
		{"latin1", 8, true},
		{"binary", 63, true},
		{"ascii", 11, true},
		{"cp1257", 59, true},
		{"latin2", 9, true},
		{"klingon", 0, false},
	}
	for _, tc := range defaults {
		if id, ok := DefaultCollation(tc.charset); id != tc.id || ok != tc.ok {
			t.Errorf("DefaultCollation(%q) = %d, %v; want %d, %v", tc.charset, id, ok, tc.id, tc.ok)
		}
	}

	sets := []struct {
		id   byte
		want string
	}{
		{45, "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci"},
		{8, "SET NAMES latin1 COLLATE latin1_swedish_ci"},
		{255, "SET NAMES utf8mb4"}, // utf8mb4_0900_ai_ci: MariaDB lacks it
	}
	for _, tc := range sets {
		c, _ := CollationByID(tc.id)
		if got := c.SetNamesSQL(); got != tc.want {
			t.Errorf("SetNamesSQL(%d) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

func TestCollationByName(t *testing.T) {
	tests := []struct {
		cs, coll string
		id       byte
		ok       bool
	}{
		{"utf8mb4", "", 45, true},
		{"UTF8MB4", "utf8mb4_BIN", 46, true},
		{"utf8", "", 33, true},
		{"utf8", "utf8_bin", 83, true},
		{"latin1", "latin1_bin", 47, true},
		{"latin1", "utf8mb4_bin", 0, false},
		{"klingon", "", 0, false},
	}
	for _, tc := range tests {
		id, ok := CollationByName(tc.cs, tc.coll)
		if id != tc.id || ok != tc.ok {
			t.Errorf("CollationByName(%q, %q) = %d, %v; want %d, %v", tc.cs, tc.coll, id, ok, tc.id, tc.ok)
		}
	}
}
