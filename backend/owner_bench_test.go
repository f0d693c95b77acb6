package backend

import "testing"

// BenchmarkIdleOrder is GetFor's search under the node's lock at its
// worst: idleScan idle connections, each the last of another live
// session, none the caller's, so every one is looked at.
func BenchmarkIdleOrder(b *testing.B) {
	l := make([]*Conn, 4*idleScan)
	for i := range l {
		l[i] = &Conn{owner: new(Owner)}
	}
	o := new(Owner)
	b.ReportAllocs()
	for b.Loop() {
		if idleOrder(l, o) != len(l)-1 {
			b.Fatal("wrong pick")
		}
	}
}
