package deadlock

import (
	"sync"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// Slot is one session's entry in the detector: the statement it runs
// inside a transaction, the backend connections the statement runs on and
// those the transaction holds. Its session's goroutine writes it (Begin,
// End, TakeVictim); the detector's goroutine reads it and marks it a
// victim; both under mu.
type Slot struct {
	d       *Detector
	session uint32
	timer   *time.Timer // fires when a statement runs past the threshold

	mu      sync.Mutex
	active  bool // a statement of the transaction is running
	seq     uint64
	start   time.Time
	running []held
	holds   []held
	counted uint64 // the seq last counted as a wait past the threshold
	// victim is the error the statement of seq victimSeq ends with: the
	// detector chose its transaction to break a deadlock.
	victim    *mysql.SQLError
	victimSeq uint64
}

// held is a backend connection as the detector needs it.
type held struct {
	node *backend.Node
	t    Thread
}

// Register adds a session's slot; Unregister removes it when the session
// ends.
func (d *Detector) Register(session uint32) *Slot {
	s := &Slot{d: d, session: session}
	s.timer = time.AfterFunc(time.Hour, d.Wake)
	s.timer.Stop()
	d.mu.Lock()
	d.slots[s] = struct{}{}
	d.mu.Unlock()
	return s
}

// Unregister removes s (the session ended).
func (d *Detector) Unregister(s *Slot) {
	s.timer.Stop()
	d.mu.Lock()
	delete(d.slots, s)
	d.mu.Unlock()
}

// Begin records that a statement of the session's transaction runs on
// running, while the transaction holds holds; End that it is over. They
// copy the connections' identities into the slot's own slices (no
// allocation once they have grown) and arm or stop the timer.
func (s *Slot) Begin(running, holds []*backend.Conn) {
	now := time.Now()
	s.mu.Lock()
	s.active = true
	s.seq++
	s.start = now
	s.running = appendHeld(s.running[:0], running)
	s.holds = appendHeld(s.holds[:0], holds)
	s.mu.Unlock()
	s.timer.Reset(s.d.after)
}

func appendHeld(dst []held, conns []*backend.Conn) []held {
	for _, bc := range conns {
		if bc != nil {
			dst = append(dst, held{node: bc.Node(), t: Thread{Addr: bc.Addr, ID: bc.ThreadID}})
		}
	}
	return dst
}

// End records that the statement Begin recorded is over.
func (s *Slot) End() {
	s.mu.Lock()
	s.active = false
	s.mu.Unlock()
	s.timer.Stop()
}

// Victim returns the error the running statement is to end with when
// the detector chose its transaction as a deadlock's victim (nil
// otherwise); the statement's interruption (1317) is answered with it.
func (s *Slot) Victim() *mysql.SQLError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.victim != nil && s.active && s.victimSeq == s.seq {
		return s.victim
	}
	return nil
}

// TakeVictim returns the victim error set during the client's command,
// if any, and clears it: the session calls it once per command.
func (s *Slot) TakeVictim() *mysql.SQLError {
	s.mu.Lock()
	v := s.victim
	s.victim = nil
	s.mu.Unlock()
	return v
}

// mark makes the statement seq the victim, when it is still running;
// it returns the threads it runs on.
func (s *Slot) mark(seq uint64, err *mysql.SQLError) ([]held, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active || s.seq != seq {
		return nil, false
	}
	s.victim, s.victimSeq = err, seq
	return append([]held(nil), s.running...), true
}
