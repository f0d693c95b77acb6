package deadlock

import (
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
)

// BenchmarkSlot is the cost a statement inside a transaction pays: Begin
// and End around it (the detector sleeps: nothing waits past the
// threshold).
func BenchmarkSlot(b *testing.B) {
	d := New(Options{After: time.Hour})
	defer d.Close()
	s := d.Register(1)
	defer d.Unregister(s)
	running := []*backend.Conn{{Addr: "127.0.0.1:3307", ThreadID: 7}}
	holds := []*backend.Conn{running[0], {Addr: "127.0.0.1:3308", ThreadID: 9}}
	b.ReportAllocs()
	for b.Loop() {
		s.Begin(running, holds)
		s.End()
	}
}

// TestSlotVictim: a victim mark holds for the statement it was made for,
// while it runs, and TakeVictim clears it.
func TestSlotVictim(t *testing.T) {
	d := New(Options{After: time.Hour})
	defer d.Close()
	s := d.Register(1)
	defer d.Unregister(s)
	s.Begin([]*backend.Conn{{Addr: "a", ThreadID: 1}}, nil)
	seq := s.seq
	if _, ok := s.mark(seq+1, &mysqlErr); ok {
		t.Fatal("marked a statement that is not running")
	}
	if _, ok := s.mark(seq, &mysqlErr); !ok || s.Victim() == nil {
		t.Fatal("the running statement was not marked")
	}
	s.End()
	if s.Victim() != nil {
		t.Error("Victim after End")
	}
	if s.TakeVictim() == nil || s.TakeVictim() != nil {
		t.Error("TakeVictim must return the mark once")
	}
}

var mysqlErr = *mysqlDeadlock("node1, node2")
