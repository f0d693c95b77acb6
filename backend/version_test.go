package backend

import "testing"

func TestMariaDBAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"5.5.5-10.11.19-MariaDB-0+deb12u1", true},
		{"5.5.5-10.5.2-MariaDB", true},
		{"5.5.5-10.4.34-MariaDB", false},
		{"11.4.2-MariaDB", true},
		{"8.0.36", false},
		{"5.7.44-log", false},
		{"MariaDB", false},
		{"", false},
	} {
		if got := MariaDBAtLeast(tc.v, 10, 5); got != tc.want {
			t.Errorf("MariaDBAtLeast(%q, 10, 5) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
