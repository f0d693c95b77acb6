package schema

import (
	"slices"
	"testing"
)

func TestColumnMembers(t *testing.T) {
	for _, tt := range []struct {
		typ  string
		want []string
	}{
		{"enum('a','b')", []string{"a", "b"}},
		{"set('x','it''s','','a,b')", []string{"x", "it's", "", "a,b"}},
		{"ENUM('10','1e999999')", []string{"10", "1e999999"}},
		{"enum('(',')')", []string{"(", ")"}},
		{"varchar(10)", nil},
		{"int(11) unsigned", nil},
	} {
		c := Column{Type: tt.typ}
		if got := c.Members(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.typ, got, tt.want)
		}
	}
}
