package server

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/deadlock"
	"github.com/shardgate/shardgate/mysql"
)

// Deadlocks across nodes (package deadlock): each statement a session
// runs inside a transaction is shown to the detector with the backend
// connections the transaction holds (noteRunning); when the detector
// chooses the transaction as a deadlock's victim, it kills the waiting
// statement, and the interruption (1317) the node answers becomes the
// deadlock error (1213): in the relayed ERR packet (the engine asks the
// slot's Victim), or in the error the command returns (deadlockErr). The
// handler then rolls the transaction back on every node, as after a
// deadlock one node detects (endDeadlocked).

// startDetector starts the detector unless cfg turns it off (nil then).
func startDetector(cfg *config.Config, log *zap.Logger) *deadlock.Detector {
	if cfg.DeadlockDetectAfter <= 0 {
		return nil
	}
	return deadlock.New(deadlock.Options{After: cfg.DeadlockDetectAfter, Log: log})
}

// dlState is a session's part: its slot (registered the first time it
// runs a statement in a transaction) and scratch that keeps noteRunning
// allocation-free. Owned by the session's goroutine.
type dlState struct {
	slot   *deadlock.Slot
	one    [1]*backend.Conn
	pinned []*backend.Conn
}

// noteRunning is called with the connection (or, for a merge, connections)
// a statement starts on, and with none when it ends.
func (c *conn) noteRunning(bc *backend.Conn, many []*backend.Conn) {
	d := c.srv.deadlock
	if d == nil || c.st == nil {
		return
	}
	s := c.dl.slot
	if bc == nil && many == nil {
		if s != nil {
			s.End()
		}
		return
	}
	if !c.st.InTxn() {
		return
	}
	if s == nil {
		s = d.Register(c.id)
		c.dl.slot = s
		c.h.x.Victim = s.Victim
		context.AfterFunc(c.ctx, func() { d.Unregister(s) })
	}
	if many == nil {
		c.dl.one[0] = bc
		many = c.dl.one[:]
	}
	c.dl.pinned = c.st.AppendPinned(c.dl.pinned[:0])
	s.Begin(many, c.dl.pinned)
	c.dl.one[0] = nil
}

// deadlockErr turns the interruption of a statement the detector chose
// as a deadlock's victim into the deadlock error, once per command.
func (c *conn) deadlockErr(err error) error {
	s := c.dl.slot
	if s == nil {
		return err
	}
	v := s.TakeVictim()
	if v == nil || err == nil {
		return err
	}
	var se *mysql.SQLError
	if errors.As(err, &se) && se.Code == mysql.ErQueryInterrupted {
		return v
	}
	return err
}

// DeadlockStats returns the deadlock detector's counts; false when it is
// off.
func (s *Server) DeadlockStats() (deadlock.Stats, bool) {
	if s.deadlock == nil {
		return deadlock.Stats{}, false
	}
	return s.deadlock.Stats(), true
}
