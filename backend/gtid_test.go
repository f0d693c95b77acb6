package backend

import "testing"

// TestGTIDCovers: a replica's position covers one GTID (a session's last
// commit) or a master's position (one GTID per domain) when it holds each
// domain at that sequence number or later.
func TestGTIDCovers(t *testing.T) {
	for _, tc := range []struct {
		pos, want string
		covers    bool
	}{
		{"0-1-10", "", true},
		{"", "", true},
		{"0-1-10", "0-1-10", true},
		{"0-1-10", "0-1-11", false},
		{"0-2-12", "0-1-11", true}, // another server wrote later in the domain
		{"0-1-10,1-1-5", "1-1-5", true},
		{"0-1-10,1-1-5", "0-1-9,1-1-5", true},
		{"0-1-10, 1-1-5", "0-1-9, 1-1-5", true},
		{"0-1-10,1-1-5", "0-1-9,1-1-6", false},
		{"0-1-10", "0-1-9,1-1-1", false}, // a domain the replica has not seen
		{"", "0-1-1", false},
		{"0-1-10", "0-1", false},
		{"0-1-10", "0-x-1", false},
	} {
		if got := GTIDCovers(tc.pos, tc.want); got != tc.covers {
			t.Errorf("GTIDCovers(%q, %q) = %v, want %v", tc.pos, tc.want, got, tc.covers)
		}
	}
}

// TestGTIDList: only lists of GTIDs reach MASTER_GTID_WAIT's SQL text,
// without spaces.
func TestGTIDList(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		ok      bool
	}{
		{"0-1-10", "0-1-10", true},
		{"0-1-10,1-2-3", "0-1-10,1-2-3", true},
		{"0-1-10, 1-2-3", "0-1-10,1-2-3", true},
		{"", "", false},
		{"0-1-10,", "", false},
		{"0-1-10'", "", false},
		{"0-1'); SELECT (1-10", "", false},
		{"0-1-10,x", "", false},
	} {
		got, ok := gtidList(tc.in)
		if got != tc.out || ok != tc.ok {
			t.Errorf("gtidList(%q) = %q, %v, want %q, %v", tc.in, got, ok, tc.out, tc.ok)
		}
	}
}
