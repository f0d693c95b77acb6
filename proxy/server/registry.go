package server

import (
	"sort"
	"sync"
	"time"
)

// registry is the list of client sessions by connection id: the sessions
// SHOW PROCESSLIST shows, KILL finds (processlist.go) and Shutdown closes.
// A session adds itself once logged in (register) and removes itself when
// it ends. Safe for concurrent use.
type registry struct {
	mu       sync.Mutex
	sessions map[uint32]*conn
	conf     *liveConfig // max_connections; the default node of KILL; the nodes where KILL of a backend thread runs
}

// A session's connection id (the handshake's, SHOW PROCESSLIST's, the one
// a connector's cancel sends with KILL QUERY) lives in a range of its
// own, [firstConnID, firstConnID+connIDs): KILL also takes the backends'
// thread ids, which CONNECTION_ID() returns through the proxy (it runs on
// the session's backend connection), and those start at 1 on each server
// and grow by one per connection, so an id below the range is a backend
// thread and one in it a session (kill). The range ends below 2^31:
// clients keep the id in a signed 32-bit field (MySqlConnector's
// ServerThread is an int).
const (
	firstConnID = 1 << 30
	connIDs     = 1 << 30
)

// newConnID returns the id of a new client connection: the next of the
// range, skipping the ids of sessions still open once it wrapped.
func (s *Server) newConnID() uint32 {
	for {
		id := firstConnID + (s.nextID.Add(1)-1)%connIDs
		if s.session(id) == nil {
			return id
		}
	}
}

// sessionID reports whether id is in the range of sessions' ids.
func sessionID(id uint64) bool { return id >= firstConnID && id < firstConnID+connIDs }

// register adds c, unless max_connections sessions are open already.
func (r *registry) register(c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sessions) >= r.conf.cfg().MaxConnections {
		return false
	}
	if r.sessions == nil {
		r.sessions = make(map[uint32]*conn)
	}
	r.sessions[c.id] = c
	return true
}

func (r *registry) unregister(c *conn) {
	r.mu.Lock()
	delete(r.sessions, c.id)
	r.mu.Unlock()
}

// count returns the number of sessions open.
func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

// list returns the sessions by connection id.
func (r *registry) list() []*conn {
	r.mu.Lock()
	list := make([]*conn, 0, len(r.sessions))
	for _, o := range r.sessions {
		list = append(list, o)
	}
	r.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	return list
}

// sessionHolding returns the session of user (any user when "") that
// holds the backend connection whose thread id is id, if any.
func (r *registry) sessionHolding(id uint64, user string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.sessions {
		if (user == "" || c.act.owner() == user) && c.holds(id) {
			return c
		}
	}
	return nil
}

func (r *registry) session(id uint32) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

// closeIdle wakes sessions blocked waiting for a command so they exit.
func (r *registry) closeIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ss := range r.sessions {
		// A session inside a transaction may still commit it.
		if ss.idle.Load() && !ss.inTxn.Load() {
			ss.nc.SetReadDeadline(time.Unix(1, 0))
		}
	}
}

// closeAll closes every session's client connection and aborts the
// backend statements they run (Shutdown past its deadline).
func (r *registry) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ss := range r.sessions {
		ss.nc.Close()
		// A statement blocked on a backend would keep its session
		// alive past the deadline.
		if bc := ss.running.Load(); bc != nil {
			bc.Abort()
		}
		if many := ss.runningMany.Load(); many != nil {
			for _, bc := range *many {
				bc.Abort()
			}
		}
	}
}
