package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// numVariants is the number of pool partitions: one per subset of
// VariantCaps and VariantExtMetadata.
const numVariants = 32

func variantIndex(v uint32) int {
	i := 0
	if v&mysql.ClientDeprecateEOF != 0 {
		i |= 1
	}
	if v&mysql.ClientFoundRows != 0 {
		i |= 2
	}
	if v&mysql.ClientCompress != 0 {
		i |= 4
	}
	if v&mysql.ClientIgnoreSpace != 0 {
		i |= 8
	}
	if v&VariantExtMetadata != 0 {
		i |= 16
	}
	return i
}

// HealthFunc is told when a node goes down or comes back.
type HealthFunc func(node string, up bool, err error)

// Node is one backend node (kingshard's `nodes[]` entry): its master's pool
// and health. Safe for concurrent use.
type Node struct {
	Name string
	// addr is where the node's master is now: the configured one until
	// a replica is promoted (SwitchMaster). Read it through Addr.
	addr atomic.Pointer[string]
	// moved counts master switches; a connection remembers the count it
	// was dialled under (Stale).
	moved atomic.Uint64
	// readOnly is @@read_only as the last health check read it.
	readOnly atomic.Bool
	// adminDown is set by an operator (admin SQL): the node takes no
	// statements, whatever its health checks find.
	adminDown atomic.Bool

	cfg  config.Node
	opts config.BackendOptions

	// sem holds one token per connection checked out, and the reserve's
	// (grow.go): its capacity less the reserve is the pool's limit,
	// max_conns_limit or, with backend.pool_growth, more.
	sem chan struct{}
	// base is max_conns_limit.
	base int
	// reserved counts the tokens the pool holds itself; growMu
	// serialises its changes (setLimit).
	reserved atomic.Int64
	growMu   sync.Mutex
	// serverMax is the server's max_connections as the last health check
	// read it (0 before).
	serverMax atomic.Int64
	// quotas counts the connections each proxy user holds (Quota); holder
	// names the user of a connection checked out under a quota (guarded
	// by mu).
	quotas        quotas
	holder        map[*Conn]string
	quotaRefusals atomic.Uint64
	// doublePuts counts Puts of a connection not checked out (a caller's
	// bug): ignored, so that the pool's count of connections in use stays
	// right and no Get waits for a token that was never taken.
	doublePuts atomic.Uint64
	// fleetMaster: the master is the one a fleet's leader recorded
	// (SwitchMaster by the caller); the node does not follow a promotion
	// its own checks see.
	fleetMaster atomic.Bool

	mu     sync.Mutex
	idle   [numVariants][]*Conn
	nidle  int
	closed bool
	// halted is set by Halt (the proxy's shutdown deadline passed): the
	// node takes nothing more, and what it had was closed under its users.
	halted atomic.Bool
	// busy are the connections checked out: when the node goes down,
	// the statements running on them are aborted, so they fail within the
	// health check's time instead of waiting on a server that does not
	// answer.
	busy map[*Conn]struct{}

	up        atomic.Bool
	downErr   atomic.Pointer[error]
	failSince time.Time // first failure of the current streak; guarded by mu
	version   atomic.Pointer[string]
	onHealth  HealthFunc

	// gen advances whenever a connection of the node breaks or the node
	// changes state: idle connections from an older generation may lead to
	// a server that died, so they are pinged before reuse.
	gen atomic.Uint64
	// epoch advances at Renew; connections of an earlier epoch are closed
	// instead of going back to the pool.
	epoch atomic.Uint64

	// Counters for operators.
	dials, dialFails, acquireTimeouts, waitNanos, resets atomic.Uint64
	stmtEvictions                                        atomic.Uint64 // cached statements given back after 1461
	// stmtsCached counts the statements prepared on the node's pooled
	// connections, bounded by backend.prepared_stmt_budget (stmt.go).
	stmtsCached atomic.Int64

	stop chan struct{}
	done chan struct{}
	// bulk serialises the callers that take several connections at once
	// (LockBulk): two of them each holding part of what they need could
	// otherwise wait on each other until the acquire timeout.
	bulk sync.Mutex
	// tls is the node's TLS configuration (nil without tls: true).
	tls *tls.Config
	// ctx ends with Close or Halt: a health check in progress stops
	// then.
	ctx    context.Context
	cancel context.CancelFunc
	// halt ends with Halt only: the logins under way (Dial, DialAs and
	// Get join it), the waits for a free connection and the connections
	// made outside the pool end with it.
	halt    context.Context
	haltNow context.CancelFunc

	// kick asks the health loop for a check now (AwaitMove).
	kick chan struct{}

	// replicas are the node's read replicas (slave); replica is set on
	// the pool of a replica itself.
	replicas  atomic.Pointer[[]*Replica]
	replicaMu sync.Mutex // serialises SetReplicas
	replica   *Replica
}

// NewNode builds a node; call Start to check it and begin health checks.
func NewNode(cfg config.Node, opts config.BackendOptions, onHealth HealthFunc) *Node {
	n := &Node{
		Name:     cfg.Name,
		cfg:      cfg,
		opts:     opts,
		sem:      make(chan struct{}, semCap(cfg.MaxConnsLimit, opts.PoolGrowth)),
		base:     max(cfg.MaxConnsLimit, 1),
		onHealth: onHealth,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		kick:     make(chan struct{}, 1),
	}
	n.initReserve()
	n.up.Store(true)
	addr := cfg.Master
	n.addr.Store(&addr)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.halt, n.haltNow = context.WithCancel(context.Background())
	if cfg.TLS {
		n.tls = nodeTLS(cfg)
	}
	var reps []*Replica
	for _, r := range cfg.Slaves() {
		reps = append(reps, newReplica(n, r, onHealth))
	}
	n.replicas.Store(&reps)
	return n
}

// nodeTLS is the TLS configuration of a node: its CA (the system's roots
// when tls_ca is empty; config validation has read the file) and the
// name the certificate must carry.
func nodeTLS(cfg config.Node) *tls.Config {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.TLSServerName}
	if t.ServerName == "" {
		t.ServerName, _, _ = net.SplitHostPort(cfg.Master)
	}
	if cfg.TLSCA != "" {
		pool := x509.NewCertPool()
		if pem, err := os.ReadFile(cfg.TLSCA); err == nil {
			pool.AppendCertsFromPEM(pem)
		}
		t.RootCAs = pool // empty when unreadable: every dial fails verification
	}
	return t
}

// ErrNodeDown is wrapped by errors for statements sent to a node marked
// down.
var ErrNodeDown = errors.New("node is down")

// Start checks the node once (a node that is down does not stop the proxy:
// it is marked down and checked again every health interval) and starts the
// health checker.
func (n *Node) Start() {
	for _, r := range n.Replicas() {
		go r.Start()
	}
	n.check(true)
	go n.healthLoop()
}

// Close stops health checks and closes idle connections. Connections that
// are checked out are closed when they are returned. After Halt, Close
// sends the servers nothing (no COM_QUIT): it only closes sockets.
func (n *Node) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	idle := n.takeIdleLocked()
	n.mu.Unlock()
	close(n.stop)
	n.cancel()
	<-n.done // a check under way ends with n.ctx
	halted := n.halted.Load()
	for _, c := range idle {
		if halted {
			c.Abort()
		} else {
			c.Close()
		}
	}
	for _, r := range n.Replicas() {
		r.Close()
	}
}

// Halt ends the node's work at once, for a shutdown past its deadline
// when a server may not answer: every connection of the node is closed
// under its user without a word to the server (checked out, idle, and those
// made outside the pool by Dial and DialAs), the logins and the health
// check under way end, and Get, Dial and DialAs fail from now on with
// 1053. Nothing of Halt waits for a server. Close still has to be called
// (it waits for the health loop, which Halt has ended).
func (n *Node) Halt() {
	n.halted.Store(true)
	n.haltNow()
	n.cancel()
	n.mu.Lock()
	idle := n.takeIdleLocked()
	n.mu.Unlock()
	for _, c := range idle {
		c.Abort()
	}
	n.AbortBusy()
	for _, r := range n.Replicas() {
		r.Halt()
	}
}

// takeIdleLocked empties the idle lists and returns what they held; n.mu
// is held.
func (n *Node) takeIdleLocked() []*Conn {
	var idle []*Conn
	for i := range n.idle {
		idle = append(idle, n.idle[i]...)
		clear(n.idle[i])
		n.idle[i] = nil
	}
	n.nidle = 0
	return idle
}

// haltedError is the error of a Get, Dial or DialAs after Halt.
func (n *Node) haltedError() error {
	return mysql.NewError(mysql.ErServerShutdown, "Server shutdown in progress (backend node %s is closed)", n.Name)
}

// join returns ctx, ended also by Halt, for a login.
func (n *Node) join(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(n.halt, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// abortAtHalt closes c's socket when the node halts, for a connection
// made outside the pool, which AbortBusy does not reach. The registration
// holds the socket, not c: it is dropped once c is garbage, so the
// connections KILL and the health checks open one after another do not
// pile up on n.halt.
func (n *Node) abortAtHalt(c *Conn) {
	nc := c.NetConn()
	stop := context.AfterFunc(n.halt, func() { nc.Close() })
	runtime.AddCleanup(c, func(stop func() bool) { stop() }, stop)
}

// Addr is the address of the node's master now.
func (n *Node) Addr() string { return *n.addr.Load() }

// Up reports whether the node is considered alive.
func (n *Node) Up() bool { return n.up.Load() && !n.adminDown.Load() }

// SetAdminDown takes the node out of service (down) or puts it back, as
// an operator's decision that health checks do not override.
func (n *Node) SetAdminDown(down bool) { n.adminDown.Store(down) }

// AdminDown reports whether an operator took the node out of service.
func (n *Node) AdminDown() bool { return n.adminDown.Load() }

// Version returns the server version string of the node's master, or "".
func (n *Node) Version() string {
	if v := n.version.Load(); v != nil {
		return *v
	}
	return ""
}

// Stats is a snapshot of the node's pool.
type Stats struct {
	Name, Addr      string
	Up              bool
	InUse, Idle     int
	Max             int // the limit now: max_conns_limit, or more with backend.pool_growth
	Base            int // max_conns_limit
	ServerMax       int // the server's max_connections (0 before the first health check)
	QuotaRefusals   uint64
	Dials           uint64
	DialFailures    uint64
	AcquireTimeouts uint64
	DoublePuts      uint64 // Puts of a connection not checked out, ignored (a bug: TestIsolationFuzz checks for none)
	StmtEvictions   uint64 // cached statements given back after the server's max_prepared_stmt_count (1461)
	PreparedStmts   int64  // statements the proxy keeps prepared on the node's connections (its statement cache)
	WaitNanos       uint64 // time callers of Get waited for a free connection (the pool was full)
	Resets          uint64 // idle connections reset as they passed from one session to another (GetFor)
}

// Stats returns a snapshot of the node's pool.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	idle := n.nidle
	n.mu.Unlock()
	return Stats{Name: n.Name, Addr: n.Addr(), Up: n.Up(), InUse: n.inUse(), Idle: idle, Max: n.limit(),
		Base: n.base, ServerMax: int(n.serverMax.Load()), QuotaRefusals: n.quotaRefusals.Load(),
		Dials: n.dials.Load(), DialFailures: n.dialFails.Load(), AcquireTimeouts: n.acquireTimeouts.Load(),
		StmtEvictions: n.stmtEvictions.Load(), DoublePuts: n.doublePuts.Load(), WaitNanos: n.waitNanos.Load(), PreparedStmts: n.stmtsCached.Load(),
		Resets: n.resets.Load()}
}

func (n *Node) dialOptions(db string, coll byte, variant uint32) DialOptions {
	return DialOptions{
		User: n.cfg.User, Password: n.cfg.Password, DB: db, Collation: coll, Variant: variant,
		DialTimeout: n.opts.DialTimeout, ReadTimeout: n.opts.ReadTimeout, NoDelay: n.opts.NoDelay,
		CommandTimeout: n.opts.CommandTimeout, TLS: n.tls,
		ReadBuffer: n.opts.ReadBuffer, WriteBuffer: n.opts.WriteBuffer,
		SockReadBuf: n.opts.SocketReadBuffer, SockWriteBuf: n.opts.SocketWriteBuffer,
	}
}

// Dial opens a connection outside the pool (for KILL and health checks).
func (n *Node) Dial(ctx context.Context) (*Conn, error) {
	if n.halted.Load() {
		return nil, n.haltedError()
	}
	ctx, cancel := n.join(ctx)
	defer cancel()
	c, err := Dial(ctx, n.Addr(), n.dialOptions("", 0, 0))
	if err != nil {
		if n.halted.Load() {
			return nil, n.haltedError()
		}
		return nil, n.connectError(err)
	}
	n.abortAtHalt(c)
	return c, nil
}

// DialAs opens a connection outside the pool logged in with a client's
// backend account, user, which answers the server's authentication itself
// (scramble); db is the database to log in to. The connection is private:
// Put closes it.
func (n *Node) DialAs(ctx context.Context, user, db string, coll byte, variant uint32, scramble func(string, []byte) ([]byte, error)) (*Conn, error) {
	if n.halted.Load() {
		return nil, n.haltedError()
	}
	o := n.dialOptions(db, coll, variant)
	o.User, o.Password, o.Scramble = user, "", scramble
	n.dials.Add(1)
	ctx, cancel := n.join(ctx)
	defer cancel()
	c, err := Dial(ctx, n.Addr(), o)
	if err != nil {
		if n.halted.Load() {
			return nil, n.haltedError()
		}
		var se *mysql.SQLError
		if errors.As(err, &se) {
			return nil, se // the server's own answer (1045, 1044, ...)
		}
		n.dialFails.Add(1)
		return nil, n.connectError(err)
	}
	c.node, c.private = n, true
	c.gen, c.epoch, c.moved = n.gen.Load(), n.epoch.Load(), n.moved.Load()
	n.abortAtHalt(c)
	return c, nil
}

func (n *Node) connectError(err error) error {
	var se *mysql.SQLError
	if errors.As(err, &se) {
		return fmt.Errorf("node %s (%s): %w", n.Name, n.Addr(), err)
	}
	return fmt.Errorf("%w", mysql.NewError(mysql.ErConnectFailed, "backend node %s (%s) is unreachable: %v", n.Name, n.Addr(), err))
}

// Get checks out a connection of the given capability variant, waiting at
// most the acquire timeout for a free slot. db and coll are only used when
// a new connection has to be dialed; the caller brings an idle one to its
// session's state.
func (n *Node) Get(ctx context.Context, variant uint32, db string, coll byte) (*Conn, error) {
	return n.GetFor(ctx, nil, variant, db, coll)
}

// GetFor is Get for the client session o (nil: none): it returns the idle
// connection o used last when it is still in the pool, else one no live
// session used last, else a new one while the pool has room, else the one
// returned last, and the connection is then o's (idleOrder). One that
// another session (or the proxy) used last is reset first: MariaDB's
// per-connection status counters then start from zero for o, as on a
// connection of its own.
func (n *Node) GetFor(ctx context.Context, o *Owner, variant uint32, db string, coll byte) (*Conn, error) {
	if n.halted.Load() {
		return nil, n.haltedError()
	}
	if n.adminDown.Load() {
		return nil, mysql.NewError(mysql.ErConnectFailed, "backend node %s (%s) is down: taken out of service by an operator (admin node ... 'down')", n.Name, n.Addr())
	}
	if !n.up.Load() {
		msg := "unknown"
		if e := n.downErr.Load(); e != nil {
			msg = (*e).Error()
		}
		return nil, mysql.NewError(mysql.ErConnectFailed, "backend node %s (%s) is down: %s", n.Name, n.Addr(), msg)
	}
	q := quotaFrom(ctx)
	most, err := n.acquire(ctx, q)
	if err != nil {
		return nil, err
	}
	if most == 0 {
		q.User = "" // not counted
	}
	vi := variantIndex(variant)
	now := time.Now()
	for {
		n.mu.Lock()
		l := n.idle[vi]
		if len(l) == 0 {
			n.mu.Unlock()
			break
		}
		i := idleOrder(l, o)
		c := l[i]
		if o != nil && c.owner != o && c.owner.live() && n.inUse()+n.nidle <= n.limit() {
			// Every idle connection looked at is another connected
			// session's, which would lose its counters: a new one
			// while the pool has room (the token taken counts in
			// inUse).
			n.mu.Unlock()
			break
		}
		copy(l[i:], l[i+1:])
		l[len(l)-1] = nil
		n.idle[vi] = l[:len(l)-1]
		n.nidle--
		// The proxy's own commands (o nil) leave the connection its
		// session's.
		handover := o != nil && c.owner != o && c.owner != disowned
		if o != nil {
			c.owner = o
		}
		if handover {
			c.closeLater, c.closeAllLater = nil, false // the reset closes them all
		}
		n.checkoutLocked(c) // in the same critical section: no second lock per Get
		n.holdLocked(c, q.User)
		n.mu.Unlock()
		if n.expired(c, now) {
			n.forget(c)
			c.Close()
			continue
		}
		gen := n.gen.Load()
		if handover {
			// Another session (or the proxy itself) used it last: its
			// status counters, which no SET carries, are not this
			// session's. The reset also answers for a ping.
			if err := c.ResetConnection(c.coll); err != nil {
				n.forget(c)
				c.Close()
				continue
			}
			n.resets.Add(1)
			c.gen = gen
			return c, nil
		}
		n.closeStmtsLater(c)
		if c.gen != gen || n.opts.PingAfterIdle > 0 && now.Sub(c.lastUsed) > n.opts.PingAfterIdle {
			if err := c.Ping(); err != nil {
				n.forget(c)
				c.Close()
				continue
			}
			c.gen = gen
		}
		return c, nil
	}
	// Make room: drop an idle connection of another variant if the node is
	// at its limit.
	n.mu.Lock()
	if n.inUse()+n.nidle > n.limit() {
		for i := range n.idle {
			if l := n.idle[i]; len(l) > 0 {
				c := l[0]
				n.idle[i] = l[1:]
				n.nidle--
				n.mu.Unlock()
				c.Close()
				n.mu.Lock()
				break
			}
		}
	}
	n.mu.Unlock()
	return n.dialPooled(ctx, q, o, variant, db, coll)
}

// Owner is one client session as the pools see it (GetFor). The
// connection a session used last keeps, while idle, the session's
// per-connection state the proxy does not carry: the server's session
// status (Last_query_cost, Handler_read_*, Com_*, Column_compressions),
// which MariaDB keeps for as long as the client is connected. So the
// session gets that connection back while no other session took it, and
// the idle timeout does not close it until the session leaves (Leave):
// a client that thinks longer than backend.idle_timeout between two
// statements still reads its own counters. Safe for concurrent use.
type Owner struct{ gone atomic.Bool }

// Leave records that the session is gone: the connections it used last
// close at the idle timeout like any other.
func (o *Owner) Leave() {
	if o != nil {
		o.gone.Store(true)
	}
}

// disowned is the owner of a connection a new login or a reset left
// with nothing of any session (Conn.Disown): the next takes it as is.
var disowned = func() *Owner { o := new(Owner); o.Leave(); return o }()

// Disown records that the connection carries nothing of the session that
// holds it (a new login or a reset just ran): the next session takes it
// without a reset of its own.
func (c *Conn) Disown() {
	if n := c.node; n != nil {
		n.mu.Lock()
		c.owner = disowned
		n.mu.Unlock()
	}
}

// live reports whether o is a session still connected.
func (o *Owner) live() bool { return o != nil && !o.gone.Load() }

// idleOrder is the index in the idle list l (returned last at the end) of
// the connection GetFor gives o: o's own, else the last returned that no
// other live session used last (taking one that holds another session's
// counters only when every idle connection does), else the last returned.
// It looks at the idleScan returned last only, so that a Get stays short
// under the node's lock however large the pool.
func idleOrder(l []*Conn, o *Owner) int {
	free := -1
	for i := len(l) - 1; i >= max(len(l)-idleScan, 0); i-- {
		switch c := l[i]; {
		case o != nil && c.owner == o:
			return i
		case free < 0 && !c.owner.live():
			free = i
			if o == nil {
				return i
			}
		}
	}
	if free >= 0 {
		return free
	}
	return len(l) - 1
}

// idleScan bounds idleOrder's look into the idle list.
const idleScan = 32

// dialPooled is Get's dial of a new connection, for a caller holding a
// token and q's quota (both given back on failure).
func (n *Node) dialPooled(ctx context.Context, q Quota, o *Owner, variant uint32, db string, coll byte) (*Conn, error) {
	n.dials.Add(1)
	moved := n.moved.Load() // before the address: a switch during the dial makes the connection stale
	dctx, cancel := n.join(ctx)
	c, err := Dial(dctx, n.Addr(), n.dialOptions(db, coll, variant))
	cancel()
	if err != nil && n.opts.PoolGrowth && n.serverRefused(err) {
		// The server is full: wait for a connection of the pool instead.
		n.dialFails.Add(1)
		if q.User != "" {
			n.quotas.give(q.User)
		}
		return n.GetFor(ctx, o, variant, db, coll)
	}
	if err == nil {
		// Checked out under mu, where Halt (halted set first) looks for
		// connections to abort: either it sees c, or c sees it.
		n.mu.Lock()
		if n.halted.Load() {
			n.mu.Unlock()
			c.Abort()
			err = n.haltedError()
		} else {
			n.checkoutLocked(c)
			n.holdLocked(c, q.User)
			c.owner = o
			if o == nil {
				c.owner = disowned // the proxy's own: a session takes it as new
			}
			n.mu.Unlock()
		}
	}
	if err != nil {
		n.dialFails.Add(1)
		<-n.sem
		if q.User != "" {
			n.quotas.give(q.User)
		}
		if n.halted.Load() {
			return nil, n.haltedError()
		}
		var se *mysql.SQLError
		if errors.As(err, &se) && se.Code != mysql.ErConnectFailed {
			// The server answered (e.g. unknown database): pass its error on.
			return nil, err
		}
		n.recordFailure(err)
		return nil, n.connectError(err)
	}
	c.node = n
	c.gen = n.gen.Load()
	c.epoch = n.epoch.Load()
	c.moved = moved
	n.storeVersion(c.ServerVersion)
	return c, nil
}

// LockBulk is taken around the Gets of a caller that needs several
// connections of the node at the same time (a merge over its subtables):
// one such caller gathers its set at a time, so none waits for a
// connection another holds while itself holding some. Callers that take
// several nodes lock them in name order.
func (n *Node) LockBulk() { n.bulk.Lock() }

// UnlockBulk ends LockBulk.
func (n *Node) UnlockBulk() { n.bulk.Unlock() }

// checkoutLocked is checkout with n.mu held.
func (n *Node) checkoutLocked(c *Conn) {
	if n.busy == nil {
		n.busy = make(map[*Conn]struct{})
	}
	n.busy[c] = struct{}{}
}

// holdLocked records that c is checked out under user's quota ("" for
// none); n.mu is held.
func (n *Node) holdLocked(c *Conn, user string) {
	if user == "" {
		return
	}
	if n.holder == nil {
		n.holder = make(map[*Conn]string)
	}
	n.holder[c] = user
}

// forget drops c from the checked-out connections without returning it
// (it is being closed; the token and the quota stay with the caller).
func (n *Node) forget(c *Conn) {
	n.mu.Lock()
	delete(n.busy, c)
	delete(n.holder, c)
	n.mu.Unlock()
}

// AbortBusy aborts every checked-out connection (the node is down, or the
// proxy's shutdown deadline passed): whatever runs on them fails now.
func (n *Node) AbortBusy() {
	n.mu.Lock()
	busy := make([]*Conn, 0, len(n.busy))
	for c := range n.busy {
		busy = append(busy, c)
	}
	n.mu.Unlock()
	for _, c := range busy {
		c.Abort()
	}
}

// Renew replaces the pooled connections: idle ones are closed now, and
// those in use are closed when they come back. A SET GLOBAL changes what
// new sessions start with; pooled connections are sessions begun before,
// and would keep the old values for every client that borrows them.
func (n *Node) Renew() {
	n.epoch.Add(1)
	n.closeIdle()
}

func (n *Node) expired(c *Conn, now time.Time) bool {
	return c.epoch != n.epoch.Load() || c.moved != n.moved.Load() ||
		(n.opts.MaxLifetime > 0 && now.Sub(c.created) > n.opts.MaxLifetime) ||
		(n.opts.IdleTimeout > 0 && now.Sub(c.lastUsed) > n.opts.IdleTimeout && !c.owner.live()) ||
		c.waitTimedOut(now)
}

// waitTimedOut reports whether the server may have closed the connection
// for a wait_timeout a session set on it (a second of margin).
func (c *Conn) waitTimedOut(now time.Time) bool {
	w, ok := c.Vars["@@SESSION.`wait_timeout`"]
	if !ok {
		return false
	}
	secs, err := strconv.ParseUint(w, 10, 32)
	return err == nil && now.Sub(c.lastUsed) >= time.Duration(secs)*time.Second-time.Second
}

// HasThread reports whether a connection of the node's pool, idle or
// checked out, has the server thread id.
func (n *Node) HasThread(id uint32) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.busy {
		if c.ThreadID == id {
			return true
		}
	}
	for _, list := range n.idle {
		for _, c := range list {
			if c.ThreadID == id {
				return true
			}
		}
	}
	return false
}

// Put returns a connection taken with Get. Broken connections are closed.
func (n *Node) Put(c *Conn) {
	if c.private {
		if n.halted.Load() {
			c.Abort()
		} else {
			c.Close()
		}
		return
	}
	c.lastUsed = time.Now()
	n.mu.Lock()
	if _, out := n.busy[c]; !out {
		n.mu.Unlock()
		n.doublePuts.Add(1)
		return
	}
	for (len(c.closeLater) > 0 || c.closeAllLater) && !c.broken {
		// Statements sessions asked to close (ForgetOn) while c was
		// checked out; c stays busy meanwhile, so none is left behind.
		n.mu.Unlock()
		n.closeStmtsLater(c)
		n.mu.Lock()
	}
	if c.broken {
		n.gen.Add(1)
	}
	delete(n.busy, c)
	user, counted := n.holder[c]
	if counted {
		delete(n.holder, c)
	}
	if n.halted.Load() {
		n.mu.Unlock()
		c.Abort() // Halt closed it already, or it came from a login Halt cut short
	} else if c.broken || n.closed || n.expired(c, c.lastUsed) {
		n.mu.Unlock()
		c.Close()
	} else {
		vi := variantIndex(c.Variant)
		n.idle[vi] = append(n.idle[vi], c)
		n.nidle++
		n.mu.Unlock()
	}
	<-n.sem
	if counted {
		n.quotas.give(user)
	}
}

func (n *Node) storeVersion(v string) {
	if old := n.version.Load(); old == nil || *old != v {
		n.version.Store(&v)
	}
}

func (n *Node) healthLoop() {
	defer close(n.done)
	iv := n.opts.HealthInterval
	if iv <= 0 {
		iv = 2 * time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.check(false)
			n.reapIdle()
			n.trimGrown(time.Now())
		case <-n.kick:
			n.check(false)
		}
	}
}

// check dials the node and pings it. A fresh connection is used so that a
// healthy pool does not hide a server that stopped accepting connections.
func (n *Node) check(initial bool) {
	if len(n.Replicas()) > 0 {
		defer n.followPromotion()
	}
	to := n.opts.DialTimeout
	if to <= 0 {
		to = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(n.ctx, to)
	defer cancel()
	c, err := Dial(ctx, n.Addr(), n.dialOptions("", 0, 0))
	if err == nil {
		c.commandTimeout = to // a health check waits no longer than a dial
		stop := context.AfterFunc(ctx, c.Abort)
		err = c.Ping()
		var gtidPos string
		if err == nil {
			// SHOW, not SELECT: the checks stay out of the servers'
			// Com_select.
			if res, qerr := c.Exec("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'gtid_slave_pos', 'max_connections')"); qerr == nil {
				for _, row := range res.Rows {
					if len(row) == 2 {
						switch string(row[0]) {
						case "read_only":
							n.readOnly.Store(string(row[1]) == "ON")
						case "gtid_slave_pos":
							gtidPos = string(row[1])
						case "max_connections":
							if m, err := strconv.Atoi(string(row[1])); err == nil {
								n.noteMaxConnections(m)
							}
						}
					}
				}
			}
		}
		if err == nil && n.replica != nil {
			n.replica.checkReplication(c, gtidPos)
		}
		stop()
		n.storeVersion(c.ServerVersion)
		c.Close()
	}
	if err != nil && n.replica != nil {
		// A replica that does not answer gets no reads from now on, not
		// after down_after_noalive.
		n.replica.status.Store(&ReplicaStatus{Why: "unreachable: " + err.Error(), Lag: -1, At: time.Now()})
	}
	if err != nil {
		if initial {
			n.markDown(err)
			return
		}
		n.recordFailure(err)
		return
	}
	n.mu.Lock()
	n.failSince = time.Time{}
	n.mu.Unlock()
	if !n.up.Swap(true) {
		n.gen.Add(1)
		if n.onHealth != nil {
			n.onHealth(n.Name, true, nil)
		}
	}
}

// recordFailure marks the node down once failures have lasted
// down_after_noalive seconds.
func (n *Node) recordFailure(err error) {
	n.mu.Lock()
	now := time.Now()
	if n.failSince.IsZero() {
		n.failSince = now
	}
	long := now.Sub(n.failSince) >= time.Duration(n.cfg.DownAfterNoalive)*time.Second
	n.mu.Unlock()
	if long {
		n.markDown(err)
	}
}

func (n *Node) markDown(err error) {
	n.downErr.Store(&err)
	n.gen.Add(1)
	n.closeIdle()
	n.AbortBusy()
	if n.up.Swap(false) && n.onHealth != nil {
		n.onHealth(n.Name, false, err)
	}
}

// closeIdle closes every idle connection: the server they lead to went
// away.
func (n *Node) closeIdle() {
	var drop []*Conn
	n.mu.Lock()
	for i, l := range n.idle {
		drop = append(drop, l...)
		clear(l)
		n.idle[i] = l[:0]
	}
	n.nidle = 0
	n.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

// reapIdle closes idle connections past their idle timeout or lifetime.
func (n *Node) reapIdle() {
	now := time.Now()
	var drop []*Conn
	n.mu.Lock()
	for i, l := range n.idle {
		keep := l[:0]
		for _, c := range l {
			if n.expired(c, now) {
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

// IdleTimeout is how long the node's pool keeps a connection idle (0: no
// limit).
func (n *Node) IdleTimeout() time.Duration { return n.opts.IdleTimeout }

// User is the account the node's pool logs in with.
func (n *Node) User() string { return n.cfg.User }
