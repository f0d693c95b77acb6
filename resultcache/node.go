package resultcache

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// node is what the cache knows of one node's binary log reader.
type node struct {
	mu      sync.Mutex
	epoch   uint64                  // moves each time the reader goes down or comes up
	up      atomic.Bool             // written under mu; read without it on the hit path
	applied atomic.Pointer[gtidPos] // the position whose changes are all applied; immutable
	polls   []poll                  // positions read from the node, oldest first, not yet applied
	// caughtUp is when (Unix ns) the node was last known to have written
	// nothing the reader had not applied.
	caughtUp atomic.Int64
}

// poll is the node's own position at a moment.
type poll struct {
	pos gtidPos
	at  time.Time
}

// gtidPos is a GTID position: the last sequence number of each domain.
type gtidPos map[uint32]uint64

// parsePos reads a MariaDB GTID list ("0-1-12,1-2-3"; "" is empty).
func parsePos(s string) (gtidPos, bool) {
	p := gtidPos{}
	for g := range strings.SplitSeq(s, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		d, seq, ok := parseGTID(g)
		if !ok {
			return nil, false
		}
		if seq > p[d] {
			p[d] = seq
		}
	}
	return p, true
}

// parseGTID reads domain-server-seq.
func parseGTID(g string) (domain uint32, seq uint64, ok bool) {
	ds, rest, ok1 := strings.Cut(g, "-")
	_, sq, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	d, err1 := strconv.ParseUint(ds, 10, 32)
	n, err2 := strconv.ParseUint(sq, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uint32(d), n, true
}

// covers reports whether p holds every transaction of q.
func (p gtidPos) covers(q gtidPos) bool {
	for d, seq := range q {
		if p[d] < seq {
			return false
		}
	}
	return true
}

// nodePos returns the named node and the position pos says; false for a
// node the cache does not know or a position that does not parse.
func (c *Cache) nodePos(name, pos string) (*node, gtidPos, bool) {
	n := c.nodes[name]
	if n == nil {
		return nil, nil, false
	}
	p, ok := parsePos(pos)
	return n, p, ok
}

func (n *node) state() (epoch uint64, up bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.epoch, n.up.Load()
}

// ReaderUp records that node's reader streams from pos (the node's
// position when it started): every change after it will be applied.
func (c *Cache) ReaderUp(nodeName, pos string, at time.Time) {
	n, p, ok := c.nodePos(nodeName, pos)
	if !ok {
		return
	}
	n.mu.Lock()
	n.epoch++
	n.up.Store(true)
	n.polls = nil
	n.applied.Store(&p)
	n.mu.Unlock()
	n.caughtUp.Store(at.UnixNano())
}

// ReaderDown records that node's reader lost its stream: changes may
// have been missed, so every answer goes (answers of other nodes too,
// which a Flush cannot tell apart cheaply), and the node's answers are
// not served or stored until ReaderUp.
func (c *Cache) ReaderDown(nodeName string) {
	if n := c.nodes[nodeName]; n != nil {
		n.mu.Lock()
		n.epoch++
		n.up.Store(false)
		n.polls = nil
		n.mu.Unlock()
	}
	c.Flush()
}

// Applied records that node's reader has applied every change up to pos
// (the position after a transaction).
func (c *Cache) Applied(nodeName, pos string) {
	n, p, ok := c.nodePos(nodeName, pos)
	if !ok {
		return
	}
	n.mu.Lock()
	n.applied.Store(&p)
	at := n.settleLocked(p)
	n.mu.Unlock()
	if !at.IsZero() {
		n.caughtUp.Store(at.UnixNano())
	}
}

// settleLocked drops the polls p covers and returns the time of the
// last of them (zero when none); n.mu held.
func (n *node) settleLocked(p gtidPos) time.Time {
	var at time.Time
	i := 0
	for ; i < len(n.polls) && p.covers(n.polls[i].pos); i++ {
		at = n.polls[i].at
	}
	n.polls = n.polls[i:]
	return at
}

// Polled records the node's own position pos, read at at (before the
// read was sent): once the reader has applied it, the cache is known to
// be no further behind than at.
func (c *Cache) Polled(nodeName, pos string, at time.Time) {
	n, p, ok := c.nodePos(nodeName, pos)
	if !ok {
		return
	}
	n.mu.Lock()
	if !n.up.Load() {
		n.mu.Unlock()
		return
	}
	if a := n.applied.Load(); a != nil && a.covers(p) {
		n.mu.Unlock()
		n.caughtUp.Store(at.UnixNano())
		return
	}
	if len(n.polls) < 1024 {
		n.polls = append(n.polls, poll{p, at})
	}
	n.mu.Unlock()
}

// Servable reports whether the node's answers may be served to a session
// other than a writer Covers must check: its reader is up and was known
// caught up within MaxStaleness.
func (c *Cache) Servable(nodeName string, now time.Time) bool {
	n := c.nodes[nodeName]
	if n == nil {
		return false
	}
	return n.up.Load() && now.UnixNano()-n.caughtUp.Load() <= int64(c.opt.MaxStaleness)
}

// Covers reports whether the changes the cache has applied on node
// include gtid (domain-server-seq: a session's last write there).
func (c *Cache) Covers(nodeName, gtid string) bool {
	n := c.nodes[nodeName]
	if n == nil {
		return false
	}
	d, seq, ok := parseGTID(gtid)
	if !ok {
		return false
	}
	a := n.applied.Load()
	return a != nil && (*a)[d] >= seq
}

// Lag is how far behind the node the cache may be: the time since its
// reader was last known caught up (-1 while the reader is down).
func (c *Cache) Lag(nodeName string, now time.Time) time.Duration {
	n := c.nodes[nodeName]
	if n == nil {
		return -1
	}
	if _, up := n.state(); !up {
		return -1
	}
	return now.Sub(time.Unix(0, n.caughtUp.Load()))
}
