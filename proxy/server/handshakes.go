package server

import (
	"container/list"
	"sync"
	"time"
)

// handshakeBusyTimeout bounds a handshake that begins while more than half
// of max_unauthenticated_connections are logging in (handshakeTimeout
// otherwise): a client that will log in does so in a few round trips,
// and under pressure a socket that sends nothing gives its slot back
// sooner.
const handshakeBusyTimeout = 3 * time.Second

// handshakes are the connections logging in, oldest first: what
// max_unauthenticated_connections bounds. At the limit a new connection
// does not get 1040: the oldest handshake, which has had the longest time
// to log in, is closed (as MariaDB closes a connection whose
// connect_timeout passed: no packet, the socket ends) and the new one
// takes its place. So sockets that read the greeting and send nothing
// cannot lock real clients out; they only shorten each other's time.
//
// Safe for concurrent use: sessions enter and leave from their own
// goroutines; the lock also covers the eviction's close, so a handshake
// that has left can no longer be closed by it.
type handshakes struct {
	hsMu sync.Mutex
	hs   list.List // of *handshake
}

// handshake is one connection's place among the handshakes; evicted is
// set, under hsMu, when it was taken away.
type handshake struct {
	c       *conn
	e       *list.Element
	evicted bool
}

// enterHandshake admits c to the handshakes, evicting the oldest while the
// limit is reached. It returns c's place (for leaveHandshake) and the
// time c's handshake may take; nil when nothing could make room, and then
// c must be refused.
func (s *Server) enterHandshake(c *conn) (*handshake, time.Duration) {
	limit := s.cfg().MaxUnauthenticated
	s.hsMu.Lock()
	defer s.hsMu.Unlock()
	for s.hs.Len() >= limit {
		oldest := s.hs.Front()
		if oldest == nil {
			return nil, 0
		}
		s.hs.Remove(oldest)
		old := oldest.Value.(*handshake)
		old.evicted = true
		old.c.log.Debug("handshake evicted to make room at max_unauthenticated_connections")
		old.c.closeNow()
		s.unauthEvicted.Add(1)
	}
	h := &handshake{c: c}
	h.e = s.hs.PushBack(h)
	s.unauth.Store(int64(s.hs.Len()))
	timeout := handshakeTimeout
	if s.hs.Len() > limit/2 {
		timeout = handshakeBusyTimeout
	}
	return h, timeout
}

// leaveHandshake takes h out of the handshakes. It reports false when h
// was evicted (and its connection closed): then the client may have got
// its login's OK just before the close, as from a server that went away.
func (s *Server) leaveHandshake(h *handshake) bool {
	s.hsMu.Lock()
	defer s.hsMu.Unlock()
	if h.evicted {
		return false
	}
	s.hs.Remove(h.e)
	s.unauth.Store(int64(s.hs.Len()))
	return true
}
