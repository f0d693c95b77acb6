package backend

import "testing"

// TestIdleOrder: which idle connection GetFor gives a session: its own,
// else the last returned that no live session used last, else the last
// returned; a caller that is no session takes the last returned that no
// live session used last; only the idleScan returned last are looked at.
func TestIdleOrder(t *testing.T) {
	a, b, gone := new(Owner), new(Owner), new(Owner)
	gone.Leave()
	conns := func(owners ...*Owner) []*Conn {
		l := make([]*Conn, len(owners))
		for i, o := range owners {
			l[i] = &Conn{owner: o}
		}
		return l
	}
	for _, tc := range []struct {
		name string
		l    []*Conn
		o    *Owner
		want int
	}{
		{"own, under others", conns(a, b, b), a, 0},
		{"own on top", conns(b, a), a, 1},
		{"free under a live session's", conns(nil, b), a, 0},
		{"a gone session's under a live one's", conns(gone, nil, b), a, 1},
		{"only live sessions'", conns(b, b), a, 1},
		{"no session: free one", conns(nil, b), nil, 0},
		{"no session: only live sessions'", conns(a, b), nil, 1},
		{"own too deep", append(conns(a), conns(make([]*Owner, idleScan)...)...), a, idleScan},
	} {
		if got := idleOrder(tc.l, tc.o); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
