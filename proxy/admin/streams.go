package admin

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// streams is the table of the GET /changes streams open, for the status
// page (GET /admin/streams). Each stream's own request goroutine updates
// its entry; the table's lock guards only adding and removing.
type streams struct {
	mu   sync.Mutex
	next uint64
	open map[uint64]*streamInfo
}

// streamInfo is one open change stream. The counters are written by the
// stream's goroutine and read by /admin/streams.
type streamInfo struct {
	id      uint64
	remote  string
	tables  []string
	started time.Time
	changes atomic.Uint64
	// lastTS is the binary log timestamp (Unix seconds) of the last change
	// sent, lastSent when it was sent (Unix nanoseconds).
	lastTS, lastSent atomic.Int64
}

// add registers a stream opened by r; the caller removes it when it ends.
func (s *streams) add(r *http.Request, tables []string) *streamInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = make(map[uint64]*streamInfo)
	}
	s.next++
	st := &streamInfo{id: s.next, remote: r.RemoteAddr, tables: tables, started: time.Now()}
	s.open[st.id] = st
	return st
}

func (s *streams) remove(st *streamInfo) {
	s.mu.Lock()
	delete(s.open, st.id)
	s.mu.Unlock()
}

// sent records one change sent, with its binary log timestamp.
func (st *streamInfo) sent(ts int64, now time.Time) {
	st.changes.Add(1)
	st.lastTS.Store(ts)
	st.lastSent.Store(now.UnixNano())
}

// StreamStatus is one open change stream as GET /admin/streams shows it.
type StreamStatus struct {
	ID      uint64    `json:"id"`
	Remote  string    `json:"remote"`
	Tables  []string  `json:"tables"` // empty: every logical table
	Started time.Time `json:"started"`
	Changes uint64    `json:"changes_sent"`
	// LastChange is the binary log time of the last change sent (zero
	// before the first); LagSeconds how long after it the change went out,
	// -1 before the first. IdleSeconds is the time since the last change
	// was sent (or since the stream opened).
	LastChange  time.Time `json:"last_change,omitzero"`
	LagSeconds  float64   `json:"lag_seconds"`
	IdleSeconds float64   `json:"idle_seconds"`
}

// list returns the streams open, oldest first.
func (s *streams) list(now time.Time) []StreamStatus {
	s.mu.Lock()
	out := make([]StreamStatus, 0, len(s.open))
	for _, st := range s.open {
		x := StreamStatus{ID: st.id, Remote: st.remote, Tables: st.tables, Started: st.started, Changes: st.changes.Load(), LagSeconds: -1}
		last := st.started
		if ns := st.lastSent.Load(); ns != 0 {
			last = time.Unix(0, ns)
			x.LastChange = time.Unix(st.lastTS.Load(), 0)
			x.LagSeconds = max(0, last.Sub(x.LastChange).Seconds())
		}
		x.IdleSeconds = now.Sub(last).Seconds()
		out = append(out, x)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// serveStreams answers the change streams open as JSON (GET /admin/streams).
func (c *Console) serveStreams(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(c.streams.list(time.Now()))
}
