package server

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
)

// conn is one client connection, its wire side: the packet stream, the
// login, the read loop, and how responses are framed for this client (it
// is the engine's Writer). Its handler runs the commands.
//
// It is owned by the goroutine running serveConn: all fields except nc
// (which other goroutines may Close or set deadlines on), act (under its
// lock: user, database, command), running, runningMany and idle are
// touched only by that goroutine. KILL, SHOW PROCESSLIST and Shutdown read
// those from other goroutines.
type conn struct {
	// gates are the gates of moving tables this session is inside (move.go).
	gates []*gate
	// dkey is scratch for the statement's digest key (metrics.go).
	dkey []byte
	srv  *Server
	nc   net.Conn
	c    *mysql.Conn
	id   uint32
	log  *zap.Logger
	h    *handler

	salt []byte
	user string
	caps uint32         // capabilities both sides agreed on
	st   *session.State // set once the client's capabilities are known
	// rwSplit caches whether the schema sends reads to replicas, as of
	// configuration version rwVersion (0: not known yet).
	rwSplit   bool
	rwVersion uint64

	// more is SERVER_MORE_RESULTS_EXISTS while the statements of a split
	// multi-statement text other than the last run.
	more uint16
	// binary is set while a prepared statement's execution runs through
	// the engine (a cross-shard plan): rows go out in the binary protocol.
	// binCols and binVals are its scratch.
	binary  bool
	binCols []*mysql.Column
	buf     []byte // scratch for packets the proxy builds

	act     activity                     // for SHOW PROCESSLIST
	tls     bool                         // the client upgraded to TLS
	running atomic.Pointer[backend.Conn] // backend running a statement now, for KILL
	// held are the thread ids of the backend connections the session
	// holds (CONNECTION_ID() there), for KILL; written by the session's
	// goroutine under heldMu after each command that changes them.
	heldMu sync.Mutex
	// failedChangeUser counts COM_CHANGE_USERs refused; from the third
	// on, MariaDB answers 1047 (MDEV-3915).
	failedChangeUser int
	held             []uint32
	heldBuf          []uint32
	// watch notices a client that leaves while its statement runs (see
	// startWatch).
	watch      *time.Timer
	watchDone  chan struct{}
	watchArmed atomic.Bool
	watched    bool // the watch is armed for the command under way
	// ctx is the client connection's context, canceled when it ends
	// (closeNow, or the session's goroutine returns): every backend call
	// of the session takes it, through its session.State.
	ctx    context.Context
	cancel context.CancelFunc
	// runningMany are the backends of a cross-shard merge under way.
	runningMany atomic.Pointer[[]*backend.Conn]
	// interrupted is set by a KILL QUERY that found the session busy
	// between two backend statements of one client statement (an exact
	// fallback's steps): the next step stops with 1317. Cleared at each
	// command.
	interrupted atomic.Bool
	idle        atomic.Bool // waiting for the next command
	inTxn       atomic.Bool // ... inside a transaction (a shutdown lets it finish)
	dl          dlState     // the deadlock detector's view (deadlock.go)
}

// preAuthPacket bounds a packet from a client that has not logged in
// yet: a handshake response is a few hundred bytes, and an
// unauthenticated socket must not make the proxy hold max_allowed_packet.
const preAuthPacket = 64 << 10

// serveConn runs one client connection to completion.
func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	s.connsTotal.Add(1)
	id := s.newConnID()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(s.cfg().Frontend.NoDelay)
		if s.cfg().Frontend.SocketReadBuffer > 0 {
			tc.SetReadBuffer(s.cfg().Frontend.SocketReadBuffer)
		}
		if s.cfg().Frontend.SocketWriteBuffer > 0 {
			tc.SetWriteBuffer(s.cfg().Frontend.SocketWriteBuffer)
		}
	}
	c := &conn{
		srv: s,
		nc:  nc,
		c:   mysql.NewConn(s.writeBounded(nc), s.cfg().Frontend.ReadBuffer, s.cfg().Frontend.WriteBuffer),
		id:  id,
		log: s.log.With(zap.Uint32("conn", id), zap.String("client", nc.RemoteAddr().String())),
		buf: make([]byte, 0, 256),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	defer c.cancel()
	c.h = newHandler(c)
	c.c.MaxPacket = preAuthPacket
	s.packets.SetLimit(s.cfg().PacketMemoryTotal) // follows reloads
	c.c.Budget = s.packets
	defer c.c.Release()
	c.c.LendWriteBuffer()
	defer nc.Close()
	if !s.allowed(nc.RemoteAddr()) {
		s.rejected.Add(1)
		c.writeErr(mysql.NewError(mysql.ErHostNotPrivileged, "Host '%s' is not allowed to connect to this MySQL server", c.host()))
		return
	}
	if s.shutting.Load() {
		c.writeErr(mysql.NewError(mysql.ErServerShutdown, "Server shutdown in progress"))
		return
	}
	if !s.register(c) {
		s.rejected.Add(1)
		c.writeErr(mysql.NewError(mysql.ErTooManyConnections, "Too many connections (max_connections %d)", s.cfg().MaxConnections))
		return
	}
	defer s.unregister(c)
	defer c.releaseAll()
	defer func() {
		if r := recover(); r != nil {
			c.srv.panics.Add(1)
			c.log.Error("panic in session", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			c.writeErr(mysql.NewError(mysql.ErUnknownError, "internal error in the proxy: %v", r))
		}
	}()
	// At max_unauthenticated_connections the oldest handshake makes room
	// (handshakes.go); 1040 only when none can.
	hs, timeout := s.enterHandshake(c)
	if hs == nil {
		s.unauthRejected.Add(1)
		c.writeErr(mysql.NewError(mysql.ErTooManyConnections, "Too many connections (max_unauthenticated_connections %d are logging in)", s.cfg().MaxUnauthenticated))
		c.c.Flush()
		return
	}
	err := auth{c}.handshake(timeout)
	if !s.leaveHandshake(hs) && err == nil {
		return // evicted as it finished: the socket is closed
	}
	if errors.Is(err, mysql.ErrPacketTooLarge) {
		s.packetsTooLarge.Add(1)
	}
	if err != nil {
		c.log.Debug("handshake failed", zap.Error(err))
		return
	}
	c.c.MaxPacket, c.c.DiscardOversized = s.cfg().MaxAllowedPacket, true
	c.c.MemLimit = s.cfg().PacketMemoryPerClient
	c.log = c.log.With(zap.String("user", c.user))
	c.log.Debug("client connected")
	c.loop()
	c.log.Debug("client disconnected")
}

// loop reads commands until the client quits or the connection fails.
func (c *conn) loop() {
	defer func() {
		if len(c.gates) > 0 {
			c.leaveGates()
		}
	}()
	for {
		c.inTxn.Store(c.st.InTxn())
		if len(c.gates) > 0 && !c.st.InTxn() {
			c.leaveGates()
		}
		c.idle.Store(true)
		if c.srv.shutting.Load() && !c.inTxn.Load() {
			return
		}
		p, ok := c.readCommand()
		if !ok {
			return
		}
		if len(p) == 0 {
			c.writeErr(mysql.ErrBadPacket)
			if c.c.Flush() != nil {
				return
			}
			continue
		}
		if !c.command(p) {
			return
		}
	}
}

// readCommand waits for the client's next command, bounded by the
// session's wait_timeout (as on the server, which closes the connection)
// and inside a transaction by idle_in_transaction_timeout. ok is false
// when the session ends (the client left, timed out, or sent what cannot
// be read).
func (c *conn) readCommand() (p []byte, ok bool) {
	c.c.ResetSeq()
	// The wait for the next command is bounded by the session's
	// wait_timeout (as on the server, which closes the connection),
	// and inside a transaction by idle_in_transaction_timeout.
	idleTxn := c.srv.cfg().IdleInTransactionTimeout > 0 && c.st.InTxn()
	wait := c.st.WaitTimeout
	if idleTxn && (wait == 0 || c.srv.cfg().IdleInTransactionTimeout < wait) {
		wait = c.srv.cfg().IdleInTransactionTimeout
	} else {
		idleTxn = false
	}
	if wait > 0 {
		c.c.ReadTimeout = wait
	}
	p, err := c.c.ReadPacket()
	if wait > 0 {
		c.c.ReadTimeout = 0
		c.nc.SetReadDeadline(time.Time{})
	}
	c.idle.Store(false)
	if err != nil {
		if errors.Is(err, mysql.ErrPacketTooLarge) {
			c.srv.packetsTooLarge.Add(1)
		}
		if errors.Is(err, mysql.ErrPacketMemory) {
			c.log.Info("a command did not fit in packet_memory_total", zap.Int64("packet_memory_total", c.srv.packets.Limit()))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if idleTxn {
				c.endIdleTxn() // idletxn.go
			} else {
				c.log.Debug("closing a client idle for its wait_timeout", zap.Duration("wait_timeout", wait))
			}
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
			var se *mysql.SQLError
			if errors.As(err, &se) {
				c.writeErr(se)
			}
			c.log.Debug("read from client failed", zap.Error(err))
		}
		return nil, false
	}
	return p, true
}

// command runs one command and flushes its answer; it reports whether the
// session goes on.
func (c *conn) command(p []byte) bool {
	c.watched = c.startWatch(p)
	start := time.Now()
	quit, err := c.h.dispatch(p)
	err = c.deadlockErr(err) // deadlock.go
	c.h.endDeadlocked(err)
	c.observe(start, err != nil && !errors.Is(err, engine.ErrAnswered))
	c.noteHeld()
	c.unwatch()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.srv.writeTimeouts.Add(1) // client_write_timeout: the client stopped reading
	}
	if err != nil && !errors.Is(err, engine.ErrAnswered) {
		var se *mysql.SQLError
		if errors.As(err, &se) {
			c.writeErr(se)
		} else {
			c.log.Error("statement failed", zap.Error(err))
			c.writeErr(mysql.AsSQLError(err))
		}
	}
	if ferr := c.c.Flush(); ferr != nil || quit {
		if errors.Is(ferr, os.ErrDeadlineExceeded) {
			c.srv.writeTimeouts.Add(1)
		}
		return false
	}
	return true
}

// closeNow ends the session at once, dropping whatever is buffered for
// the client (it would end inside a packet).
func (c *conn) closeNow() error {
	c.cancel()
	c.nc.Close()
	return errCloseSession
}

// noteHeld records the thread ids of the backend connections the session
// holds now, when they changed (one comparison per command otherwise).
func (c *conn) noteHeld() {
	ids := c.st.AppendBackendIDs(c.heldBuf[:0])
	c.heldBuf = ids
	if slices.Equal(ids, c.held) {
		return
	}
	c.heldMu.Lock()
	c.held = append(c.held[:0:0], ids...)
	c.heldMu.Unlock()
}

// holds reports whether the session holds the backend connection whose
// thread id is id.
func (c *conn) holds(id uint64) bool {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	return slices.Contains(c.held, uint32(id))
}

// local reports whether the client came over the Unix socket, which, as
// on MySQL, counts as a secure transport.
func (c *conn) local() bool {
	_, ok := c.nc.LocalAddr().(*net.UnixAddr)
	return ok
}

// addr is the client's address as SHOW PROCESSLIST shows it: host:port,
// or "localhost" over the Unix socket.
func (c *conn) addr() string {
	if c.local() {
		return "localhost"
	}
	return c.nc.RemoteAddr().String()
}

// host is the client's host as MySQL names it: its IP address, or
// "localhost" over the Unix socket.
func (c *conn) host() string {
	if c.local() {
		return "localhost"
	}
	if h, _, err := net.SplitHostPort(c.nc.RemoteAddr().String()); err == nil {
		return h
	}
	return c.nc.RemoteAddr().String()
}

// status is the session's server status (autocommit before login).
func (c *conn) status() uint16 {
	if c.st == nil {
		return mysql.StatusAutocommit
	}
	return c.st.Status
}

func (c *conn) writeOK(ok mysql.OK) error {
	ok.Status |= c.more
	c.buf = mysql.AppendOKTracked(c.buf[:0], mysql.OKHeader, ok, c.SessionState(nil))
	return c.c.WritePacket(c.buf)
}

// okStatus answers OK with the session's status.
func (c *conn) okStatus() error { return c.writeOK(mysql.OK{Status: c.status()}) }

// endStatus is the status for the packet that ends a response: with
// SERVER_MORE_RESULTS_EXISTS while a split multi-statement text has more.
func (c *conn) endStatus() uint16 { return c.status() | c.more }

// writeErr sends an ERR packet with the next sequence number. Errors from
// writing are ignored: the read loop notices a dead client.
func (c *conn) writeErr(err error) {
	se := mysql.AsSQLError(err)
	c.srv.errorsSent.Add(1)
	c.srv.metrics.error(se.Code)
	c.buf = mysql.AppendErr(c.buf[:0], se)
	c.c.WritePacket(c.buf)
	c.c.Flush()
}

func (c *conn) writeFlush(p []byte) error {
	if err := c.c.WritePacket(p); err != nil {
		return err
	}
	return c.c.Flush()
}

// writeDeadlineConn gives every write to the client a deadline
// (client_write_timeout): a client that stops reading cannot hold the
// session, and the backend connection relaying to it, for good. The
// deadline is moved only when a quarter of it has passed since it was
// last set (setting it costs more than reading the clock), so a write
// always has at least three quarters of the timeout.
// writeBounded wraps a client connection (plain, or TLS over it) in
// client_write_timeout, when set.
func (s *Server) writeBounded(nc net.Conn) net.Conn {
	if d := s.cfg().ClientWriteTimeout; d > 0 {
		return &writeDeadlineConn{Conn: nc, d: d}
	}
	return nc
}

type writeDeadlineConn struct {
	net.Conn
	d    time.Duration
	last time.Time
}

func (w *writeDeadlineConn) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(w.last) > w.d/4 {
		w.Conn.SetWriteDeadline(now.Add(w.d))
		w.last = now
	}
	return w.Conn.Write(p)
}

// watchAfter is how long a statement runs before the proxy starts
// watching its client's socket: a client that disconnects then has its
// statement stopped on the backend (KILL QUERY), as the server does for
// its own clients. Short statements never start the watch.
const watchAfter = time.Second

// startWatch arms the watch for the command in p; it reports whether
// stopWatch must be called. A command during which the proxy itself reads
// from the client (LOAD DATA LOCAL INFILE) ends the watch as soon as the
// statement is known (unwatch), long before it could fire.
func (c *conn) startWatch(p []byte) bool {
	if p[0] != mysql.ComQuery && p[0] != mysql.ComStmtExecute {
		return false
	}
	if c.watch == nil {
		c.watch = time.AfterFunc(watchAfter, c.watchClient)
		c.watchDone = make(chan struct{}, 1)
	} else {
		c.watch.Reset(watchAfter)
	}
	return true
}

// unwatch ends the watch of the command under way, if armed.
func (c *conn) unwatch() {
	if c.watched {
		c.watched = false
		c.stopWatch()
	}
}

// watchClient runs when a statement has run for watchAfter: it waits for
// the client's socket to close (or to send the next command early) and,
// if the client left, kills what the session runs on its backends.
func (c *conn) watchClient() {
	c.watchArmed.Store(true)
	err := c.c.WaitReadable()
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		// The client is gone: stop its statement on the backend, and
		// the connection with it (the session ends).
		c.log.Info("client left during its statement; stopping it on the backend")
		if bc := c.running.Load(); bc != nil {
			killOn(bc, false, func() bool { return c.running.Load() == bc })
		}
		if many := c.runningMany.Load(); many != nil {
			for _, bc := range *many {
				killOn(bc, false, func() bool { return c.runningMany.Load() == many })
			}
		}
	}
	c.watchDone <- struct{}{}
}

// stopWatch ends the watch: a watcher that started is woken (a read
// deadline in the past) and waited for, so the session reads the client
// alone again.
func (c *conn) stopWatch() {
	if c.watch.Stop() {
		return // never fired
	}
	// The timer fired (or is about to): wait for the watcher.
	for !c.watchArmed.Load() {
		runtime.Gosched()
	}
	c.nc.SetReadDeadline(time.Unix(1, 0))
	<-c.watchDone
	c.watchArmed.Store(false)
	c.nc.SetReadDeadline(time.Time{})
}
