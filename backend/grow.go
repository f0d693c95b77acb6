package backend

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// How a node's pool grows past max_conns_limit.
//
// n.sem counts the connections checked out: one token per connection.
// With backend.pool_growth its capacity is serverConnsCap, MariaDB's
// largest max_connections, and the tokens beyond the pool's limit are
// held by the pool itself (n.reserved): the limit is the capacity less
// the reserve. Growing takes reserve tokens out of the channel (a waiting
// Get's send goes through at once); shrinking puts them back as room
// appears, that is as connections come back. Callers that take and give
// tokens (Get, Put, ForgetOn) never see the reserve: tokens are alike.
// Filling the reserve at NewNode costs about a millisecond.
//
// The limit starts at max_conns_limit. Each health check reads the
// server's max_connections and sets it to that less server_headroom
// (never below max_conns_limit): a pool that is full while the server
// has room grows instead of making clients wait (issue 32: 70 clients
// idle in transactions held all 64 connections). When the server refuses
// a connection with 1040 anyway (its other clients took the room), the
// limit drops to what the pool holds until the next health check.
// Connections past max_conns_limit are closed after growIdle idle.

// serverConnsCap is the largest max_connections MariaDB accepts.
const serverConnsCap = 100000

// growIdle is how long a connection past max_conns_limit may stay idle.
const growIdle = 10 * time.Second

// semCap is the capacity of a node's token channel.
func semCap(base int, grow bool) int {
	if grow {
		return max(base, serverConnsCap)
	}
	return max(base, 1)
}

// initReserve fills the reserve so that the limit starts at the base.
func (n *Node) initReserve() {
	r := cap(n.sem) - n.base
	for range r {
		n.sem <- struct{}{}
	}
	n.reserved.Store(int64(r))
}

// limit is the most connections the pool may have checked out now.
func (n *Node) limit() int { return cap(n.sem) - int(n.reserved.Load()) }

// inUse is the number of connections checked out (a moment's view while
// setLimit runs).
func (n *Node) inUse() int { return len(n.sem) - int(n.reserved.Load()) }

// setLimit moves the reserve toward a limit of want: reserve tokens
// are given back at once; taken back only as far as the channel has
// room (connections in use keep theirs), the rest at the next call.
func (n *Node) setLimit(want int) {
	want = min(max(want, n.base, 1), cap(n.sem))
	n.growMu.Lock()
	defer n.growMu.Unlock()
	for n.limit() < want && n.reserved.Load() > 0 {
		<-n.sem // never blocks: the reserve's tokens are in the channel
		n.reserved.Add(-1)
	}
	for n.limit() > want {
		select {
		case n.sem <- struct{}{}:
			n.reserved.Add(1)
		default:
			return
		}
	}
}

// serverLimit is the limit a server's max_connections allows: all of it
// but the headroom left to the server's other clients.
func (n *Node) serverLimit(maxConns int) int {
	headroom := n.opts.ServerHeadroom
	if headroom <= 0 {
		headroom = max(10, maxConns/10)
	}
	return maxConns - headroom
}

// noteMaxConnections is told the server's max_connections by a health
// check: the limit follows it.
func (n *Node) noteMaxConnections(maxConns int) {
	n.serverMax.Store(int64(maxConns))
	if n.opts.PoolGrowth {
		n.setLimit(n.serverLimit(maxConns))
	}
}

// serverRefused handles a dial the server refused with 1040 while the
// pool was past its base: the server has no room for more, so the limit
// drops to what the pool holds (the caller's token given back) until the
// next health check. It reports whether the caller should wait for a
// connection instead of failing.
func (n *Node) serverRefused(err error) bool {
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != mysql.ErTooManyConnections || n.inUse() <= n.base {
		return false
	}
	<-n.sem
	n.setLimit(n.inUse())
	return true
}

// trimGrown closes idle connections past max_conns_limit that have been
// idle for growIdle: the pool shrinks back once the crowd is gone.
func (n *Node) trimGrown(now time.Time) {
	used := n.inUse()
	var drop []*Conn
	n.mu.Lock()
	for i, l := range n.idle {
		keep := l[:0]
		for _, c := range l {
			if used+n.nidle-len(drop) > n.base && now.Sub(c.lastUsed) >= growIdle {
				drop = append(drop, c)
			} else {
				keep = append(keep, c)
			}
		}
		for j := len(keep); j < len(l); j++ {
			l[j] = nil
		}
		n.idle[i] = keep
	}
	n.nidle -= len(drop)
	n.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

// Quota is what one proxy user may hold of a node's pool at once
// (user_list[].max_backend_conns): Max connections, or Share percent of
// the pool's limit when Max is 0; neither means no quota.
type Quota struct {
	User  string
	Max   int
	Share int
}

// of is the quota's number of connections for a pool limit, 0 for none.
func (q Quota) of(limit int) int {
	switch {
	case q.User == "":
		return 0
	case q.Max > 0:
		return q.Max
	case q.Share > 0:
		return max(1, (limit*q.Share+99)/100)
	}
	return 0
}

type quotaKey struct{}

// WithQuota returns ctx carrying the quota of the session whose
// statements use it: Get counts the connections it checks out for that
// session against the quota on each node.
func WithQuota(ctx context.Context, q Quota) context.Context {
	return context.WithValue(ctx, quotaKey{}, q)
}

func quotaFrom(ctx context.Context) Quota {
	q, _ := ctx.Value(quotaKey{}).(Quota)
	return q
}

// quotas counts each user's connections checked out of one node. Safe
// for concurrent use.
type quotas struct {
	mu      sync.Mutex
	held    map[string]int
	waiting int
	// changed is closed (and replaced) when a connection is given back
	// while someone waits.
	changed chan struct{}
}

// take counts one more connection for user if fewer than most are held;
// otherwise it returns a channel closed when one comes back.
func (q *quotas) take(user string, most int) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[user] < most {
		if q.held == nil {
			q.held = make(map[string]int)
		}
		q.held[user]++
		return true, nil
	}
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	q.waiting++
	return false, q.changed
}

// doneWaiting ends a wait take began.
func (q *quotas) doneWaiting() {
	q.mu.Lock()
	q.waiting--
	q.mu.Unlock()
}

// give returns one connection of user.
func (q *quotas) give(user string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[user]--; q.held[user] <= 0 {
		delete(q.held, user)
	}
	if q.waiting > 0 && q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// count is the connections user holds.
func (q *quotas) count(user string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held[user]
}

// acquire takes a token for a new checkout, within the quota of the
// session of ctx, waiting at most the acquire timeout for both. On
// success the caller holds the token and the quota (most > 0 when it
// counts).
func (n *Node) acquire(ctx context.Context, q Quota) (most int, err error) {
	if q.User != "" {
		most = q.of(n.limit())
	}
	var t *time.Timer
	deadline := func() <-chan time.Time {
		if t == nil {
			t = time.NewTimer(n.opts.AcquireTimeout)
		}
		return t.C
	}
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	waitStart := time.Now()
	for most > 0 {
		ok, changed := n.quotas.take(q.User, most)
		if ok {
			break
		}
		err := n.await(ctx, changed, deadline())
		n.quotas.doneWaiting()
		if err != nil {
			n.quotaRefusals.Add(1)
			return 0, n.quotaError(err, q, most, waitStart)
		}
	}
	select {
	case n.sem <- struct{}{}:
		return most, nil
	default:
	}
	defer func() { n.waitNanos.Add(uint64(time.Since(waitStart))) }()
	select {
	case n.sem <- struct{}{}:
		return most, nil
	case <-deadline():
		err = errAcquireTimeout
	case <-ctx.Done():
		err = ctx.Err()
	case <-n.halt.Done():
		err = n.haltedError()
	}
	if most > 0 {
		n.quotas.give(q.User)
	}
	if errors.Is(err, errAcquireTimeout) {
		n.acquireTimeouts.Add(1)
		return 0, mysql.NewError(mysql.ErTooManyConnections,
			"timed out after %v waiting for a connection to backend node %s (all %d in use%s; raise max_conns_limit or backend.acquire_timeout)",
			n.opts.AcquireTimeout, n.Name, n.limit(), n.limitWhy())
	}
	return 0, err
}

// errAcquireTimeout marks a wait that ran out of acquire_timeout.
var errAcquireTimeout = errors.New("acquire timeout")

// await waits for ch, the deadline, ctx or the node's halt.
func (n *Node) await(ctx context.Context, ch <-chan struct{}, deadline <-chan time.Time) error {
	select {
	case <-ch:
		return nil
	case <-deadline:
		return errAcquireTimeout
	case <-ctx.Done():
		return ctx.Err()
	case <-n.halt.Done():
		return n.haltedError()
	}
}

// quotaError is the error of a session that waited in vain for one of
// its user's connections to come back.
func (n *Node) quotaError(err error, q Quota, most int, since time.Time) error {
	if !errors.Is(err, errAcquireTimeout) {
		return err
	}
	return mysql.NewError(mysql.ErTooManyUserConnections,
		"User '%s' already has %d connections to backend node %s in use, its quota (user_list max_backend_conns; waited %v)",
		q.User, most, n.Name, time.Since(since).Round(time.Millisecond))
}

// limitWhy says where the pool's limit comes from, for the timeout's
// message.
func (n *Node) limitWhy() string {
	if !n.opts.PoolGrowth {
		return ", max_conns_limit"
	}
	if m := n.serverMax.Load(); m > 0 {
		return ", what the server's max_connections " + strconv.FormatInt(m, 10) + " leaves after backend.server_headroom"
	}
	return ""
}
