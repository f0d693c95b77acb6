package backend

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// baseCaps are the capabilities the proxy asks of every backend. Variant
// flags (CLIENT_DEPRECATE_EOF, CLIENT_FOUND_ROWS) are added per pool.
// CLIENT_SESSION_TRACK lets the server say, in each OK packet, what a
// statement changed in the session (see Tracking).
const baseCaps = mysql.ClientLongPassword | mysql.ClientLongFlag | mysql.ClientConnectWithDB |
	mysql.ClientLocalFiles | mysql.ClientProtocol41 | mysql.ClientTransactions |
	mysql.ClientSecureConnection | mysql.ClientMultiStatements | mysql.ClientMultiResults |
	mysql.ClientPSMultiResults | mysql.ClientPluginAuth | mysql.ClientPluginAuthLenencClientData |
	mysql.ClientSessionTrack

// trackingSQL turns on every session state tracker: after it, each OK
// packet reports the system variables a statement set, a change of the
// current schema, any other change of session state (user variables,
// temporary tables, prepared statements, ...), and the characteristics of
// the next transaction (SET TRANSACTION). It is part of every pooled
// connection's baseline, set after each login. The last one costs the
// query cache: MariaDB neither stores nor serves results while it is on.
// It stays on because nothing else reports a SET TRANSACTION run where
// the proxy cannot see it (a stored function), which would otherwise reach
// the next client's transaction on a pooled connection.
const trackingSQL = "SET SESSION session_track_state_change = ON, session_track_schema = ON, " +
	"session_track_system_variables = '*', session_track_transaction_info = 'CHARACTERISTICS'"

// UnknownInsertID in Conn.LastInsertID says the proxy does not know the
// connection's LAST_INSERT_ID(): a session that reads it sets it first.
const UnknownInsertID = ^uint64(0)

// Close ends the connection the way a client does, with COM_QUIT (when it
// is not broken, and within 100 ms), so the server does not count it in
// Aborted_clients; then closes the socket.
func (c *Conn) Close() error {
	c.forgetStmts()
	if !c.broken {
		nc := c.NetConn()
		nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.ResetSeq()
		if c.WritePacket([]byte{mysql.ComQuit}) == nil {
			c.Flush()
		}
	}
	return c.Conn.Close()
}

// Private reports whether the connection is logged in with a client's own
// backend account (Node.DialAs).
func (c *Conn) Private() bool { return c.private }

// Tracking reports whether the server reports session state changes on
// this connection (CLIENT_SESSION_TRACK and the trackers are on).
func (c *Conn) Tracking() bool { return c.tracking }

// enableTracking turns the trackers on when the server negotiated
// CLIENT_SESSION_TRACK; a server without them (MySQL before 5.7, old
// MariaDB) leaves the connection without tracking.
func (c *Conn) enableTracking() error {
	c.tracking = false
	if c.Caps&mysql.ClientSessionTrack == 0 {
		return nil
	}
	if _, err := c.Exec(trackingSQL); err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && se.Code == erUnknownSystemVariable {
			return nil
		}
		return err
	}
	c.tracking = true
	return nil
}

// Retrack turns the connection's trackers back on after a statement of
// a client's changed them (a SET of its own trackers).
func (c *Conn) Retrack() error { return c.enableTracking() }

// erUnknownSystemVariable is ER_UNKNOWN_SYSTEM_VARIABLE.
const erUnknownSystemVariable = 1193

// VariantCaps are the client capabilities that select a pool partition.
// A client that compresses gets compressed backend connections: the
// server's per-connection status (SHOW STATUS LIKE 'Compression') is then
// the client's. CLIENT_IGNORE_SPACE (mariadb -i) changes how the server
// parses function names followed by a space.
const VariantCaps = mysql.ClientDeprecateEOF | mysql.ClientFoundRows | mysql.ClientCompress | mysql.ClientIgnoreSpace

// VariantExtMetadata in a Variant asks for MariaDB's extended column
// metadata (mysql.MariaDBClientExtendedMetadata, an extended capability):
// column definitions then carry the data type and format names (point,
// json) that MariaDB's own clients show. It is no capability bit on the
// wire (bit 31 is the client-side CLIENT_REMEMBER_OPTIONS, which the proxy
// never sends), only a pool partition.
const VariantExtMetadata uint32 = 1 << 31

// DialOptions configure a new backend connection.
type DialOptions struct {
	User, Password string
	DB             string
	Collation      byte   // handshake collation id
	Variant        uint32 // subset of VariantCaps, and VariantExtMetadata
	DialTimeout    time.Duration
	ReadTimeout    time.Duration // per network read, 0 = none
	CommandTimeout time.Duration // bound of the proxy's own commands, 0 = none
	TLS            *tls.Config   // nil: no TLS
	// Scramble, when set, answers the server's authentication request
	// (plugin and salt) in place of Password: a client logging in with a
	// backend account answers it itself (the proxy never learns the
	// password). Only mysql_native_password is answered this way.
	Scramble     func(plugin string, salt []byte) ([]byte, error)
	NoDelay      bool
	ReadBuffer   int
	WriteBuffer  int
	SockReadBuf  int
	SockWriteBuf int
}

// Conn is one authenticated connection to a backend server. It is owned by
// one goroutine at a time.
type Conn struct {
	*mysql.Conn

	Addr          string
	ThreadID      uint32 // the backend's connection id, for KILL
	ServerVersion string
	Caps          uint32 // negotiated capabilities
	ExtCaps       uint32 // negotiated MariaDB extended capabilities
	Variant       uint32

	// State the connection was left in; maintained by the session that owns
	// the connection and read by the next borrower.
	DB         string
	Collation  byte
	MultiStmts bool
	// LastInsertID is what LAST_INSERT_ID() returns on the connection;
	// UnknownInsertID when the proxy cannot tell.
	LastInsertID uint64
	// FillNoise marks a connection whose last statement was a result
	// cache fill (a locking read with NOWAIT): MariaDB reports the return
	// of its lock wait timeouts with the next statement's answer, which
	// is not that statement's doing.
	FillNoise bool
	// Vars are the session and user variables set on the connection beyond
	// a new login's, as SQL assignment targets ("@@SESSION.`x`", "@`u`")
	// to SQL literals.
	Vars map[string]string

	node  *Node
	gen   uint64 // the node's generation when the connection was last known good
	epoch uint64 // the node's epoch when the connection was made (Node.Renew)
	moved uint64 // the node's master switches when it was made (Node.SwitchMaster)
	tls   bool   // the connection runs over TLS
	// private marks a connection logged in with a client's own backend
	// account (Node.DialAs): it belongs to that session and is closed,
	// never pooled, when the session is done with it.
	private bool
	// owner is the client session that took the connection last
	// (Node.GetFor); guarded by node.mu.
	owner *Owner
	// commandTimeout bounds the proxy's own commands (bound/unbound).
	commandTimeout time.Duration
	tracking       bool // session state trackers are on
	created        time.Time
	lastUsed       time.Time
	broken         bool

	// Statements prepared on this connection by PrepareCached, by text,
	// and their preparation order for eviction.
	stmts     map[string]*Stmt
	stmtOrder []string
	// closeLater are statements sessions that no longer hold the
	// connection asked to close (Node.ForgetOn), closed when it next
	// comes back to its pool or out of it; guarded by node.mu.
	closeLater []string
	// closeAllLater replaces closeLater when it would grow past
	// maxCachedStmts: every statement cached then is closed.
	closeAllLater bool

	// Kept from the handshake for ChangeUser.
	user, password string
	salt           []byte
	coll           byte
}

// MarkBroken records that the connection's protocol state is unknown (an I/O
// error, a client that vanished mid-result); Put then closes it.
func (c *Conn) MarkBroken() { c.broken = true }

// Broken reports whether MarkBroken was called.
func (c *Conn) Broken() bool { return c.broken }

// Stale reports whether the connection leads to a server that is no
// longer its node's master (the master moved since it was made).
func (c *Conn) Stale() bool { return c.node != nil && c.moved != c.node.moved.Load() }

// Node returns the node the connection belongs to (nil for Dial'd conns).
func (c *Conn) Node() *Node { return c.node }

// Dial connects and authenticates to addr.
func Dial(ctx context.Context, addr string, o DialOptions) (*Conn, error) {
	d := net.Dialer{Timeout: o.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(o.NoDelay)
		if o.SockReadBuf > 0 {
			tc.SetReadBuffer(o.SockReadBuf)
		}
		if o.SockWriteBuf > 0 {
			tc.SetWriteBuffer(o.SockWriteBuf)
		}
	}
	c := &Conn{Conn: mysql.NewConn(nc, o.ReadBuffer, o.WriteBuffer), Addr: addr, created: time.Now()}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else if o.DialTimeout > 0 {
		nc.SetDeadline(time.Now().Add(o.DialTimeout))
	}
	// The login ends when ctx is cancelled, not only at its deadline
	// (which the socket's deadline keeps, with its own error): a node
	// halted at the shutdown deadline cancels the logins under way to a
	// server that does not answer.
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			nc.Close()
		}
	})
	if err := c.handshake(o); err != nil {
		stop()
		nc.Close()
		return nil, dialErr(ctx, err)
	}
	if err := c.enableTracking(); err != nil {
		stop()
		nc.Close()
		return nil, dialErr(ctx, err)
	}
	if !stop() && errors.Is(ctx.Err(), context.Canceled) {
		nc.Close()
		return nil, ctx.Err()
	}
	nc.SetDeadline(time.Time{})
	c.ReadTimeout = o.ReadTimeout
	c.commandTimeout = o.CommandTimeout
	c.lastUsed = time.Now()
	return c, nil
}

// dialErr is the error of a login that failed, marked context.Canceled
// when a cancellation of ctx (not its deadline) ended it.
func dialErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%w: %w", context.Canceled, err)
	}
	return err
}

func (c *Conn) handshake(o DialOptions) error {
	p, err := c.ReadPacket()
	if err != nil {
		return fmt.Errorf("reading handshake: %w", err)
	}
	h, err := mysql.ParseHandshake(p)
	if err != nil {
		return err
	}
	c.ThreadID = h.ConnectionID
	c.ServerVersion = h.ServerVersion
	if h.Capabilities&mysql.ClientProtocol41 == 0 {
		return mysql.NewError(mysql.ErHandshake, "backend %s does not speak protocol 4.1", c.Addr)
	}
	want := baseCaps | o.Variant&^VariantExtMetadata
	if o.DB == "" {
		want &^= mysql.ClientConnectWithDB
	}
	c.Caps = want & h.Capabilities
	if o.Variant&VariantExtMetadata != 0 {
		if h.Capabilities&mysql.ClientLongPassword != 0 || h.ExtCapabilities&mysql.MariaDBClientExtendedMetadata == 0 {
			return mysql.NewError(mysql.ErHandshake, "backend %s lacks the extended metadata the client needs", c.Addr)
		}
		c.ExtCaps = mysql.MariaDBClientExtendedMetadata
	}
	if o.TLS != nil {
		if h.Capabilities&mysql.ClientSSL == 0 {
			return mysql.NewError(mysql.ErHandshake, "backend %s does not offer TLS, which its node's tls requires", c.Addr)
		}
		// SSLRequest, then the rest of the login inside TLS.
		if err := c.WritePacket(mysql.AppendSSLRequest(nil, c.Caps, c.ExtCaps, 45)); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return err
		}
		tc := tls.Client(c.NetConn(), o.TLS)
		if err := tc.Handshake(); err != nil {
			return mysql.NewError(mysql.ErHandshake, "TLS to backend %s: %v", c.Addr, err)
		}
		c.UseConn(tc)
		c.tls = true
		c.Caps |= mysql.ClientSSL
	}

	if v := o.Variant &^ VariantExtMetadata; v&h.Capabilities != v {
		return mysql.NewError(mysql.ErHandshake, "backend %s lacks capabilities %#x the client needs", c.Addr, v&^h.Capabilities)
	}
	c.Variant = o.Variant
	plugin := h.AuthPlugin
	if plugin == "" {
		plugin = mysql.AuthNativePassword
	}
	answer := func(plugin string, salt []byte) ([]byte, error) { return scramble(plugin, salt, o.Password, c.tls) }
	var auth []byte
	if o.Scramble != nil {
		// The client answers the server's challenge itself, and a client
		// follows one authentication switch only. So the first response
		// names a plugin no account uses, without data: the server then
		// always asks once, with the account's own plugin and challenge,
		// and that request goes to the client.
		answer, plugin = o.Scramble, relayPlugin
	} else if auth, err = answer(plugin, h.Salt); err != nil {
		return err
	}
	coll := o.Collation
	if coll == 0 {
		coll = 45
	}
	resp := mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
		Capabilities:    c.Caps,
		ExtCapabilities: c.ExtCaps,
		MaxPacket:       mysql.MaxPacketPayload,
		Charset:         coll,
		User:            o.User,
		AuthResponse:    auth,
		Database:        o.DB,
		AuthPlugin:      plugin,
	})
	if err := c.WritePacket(resp); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	if err := c.authResult(plugin, h.Salt, o.Password, answer); err != nil {
		return err
	}
	if o.Variant&mysql.ClientCompress != 0 {
		c.EnableCompression()
	}
	c.DB = o.DB
	c.Collation = coll
	c.MultiStmts = true
	c.user, c.password, c.salt, c.coll = o.User, o.Password, h.Salt, coll
	return nil
}

// relayPlugin is the plugin a login whose answers come from the client
// names first (DialOptions.Scramble), so that the server asks for its
// account's plugin: a name no server knows.
const relayPlugin = "shardgate_relay"

// ChangeUser sends COM_CHANGE_USER for the connection's own account with
// db as the new default database ("" for none). Like a new login it drops
// all session state: variables, temporary tables, prepared statements,
// locks and transactions; the collation returns to the handshake's.
func (c *Conn) ChangeUser(db string) error {
	c.bound()
	defer c.unbound()
	plugin := mysql.AuthNativePassword
	auth, err := scramble(plugin, c.salt, c.password, c.tls)
	if err != nil {
		return err
	}
	c.ResetSeq()
	p := mysql.AppendChangeUser(nil, &mysql.ChangeUser{
		User: c.user, AuthResponse: auth, Database: db, Charset: uint16(c.coll), AuthPlugin: plugin,
	}, c.Caps)
	if err := c.writeFlush(p); err != nil {
		c.broken = true
		return err
	}
	if err := c.authResult(plugin, c.salt, c.password, func(p string, s []byte) ([]byte, error) { return scramble(p, s, c.password, c.tls) }); err != nil {
		var se *mysql.SQLError
		if !errors.As(err, &se) {
			c.broken = true
		}
		return err
	}
	c.DB = db
	c.Collation = c.coll
	c.LastInsertID = 0
	c.Vars = nil
	c.forgetStmts()
	// A new login resets the trackers with every other session variable.
	if err := c.enableTracking(); err != nil {
		c.broken = true
		return err
	}
	// Whether the multi-statement option survives a change of user differs
	// between servers: set it again so the recorded state is the real one.
	return c.SetMultiStatements(c.MultiStmts)
}

// ChangeUserAs sends COM_CHANGE_USER for another account on a connection
// whose own login the client answered (DialOptions.Scramble): the client
// computed cu's auth response against this connection's challenge, which
// a server keeps for the connection's lifetime (MariaDB's clients answer
// a COM_CHANGE_USER and its plugin switches with the challenge of their
// login). answer passes each further request of the server (plugin
// switch, more data) to the client and returns its reply. An SQLError
// (access denied, or 1047 after three failures) leaves the connection to
// the account it had, as the server does.
func (c *Conn) ChangeUserAs(cu *mysql.ChangeUser, answer func(req []byte) ([]byte, error)) error {
	c.bound()
	defer c.unbound()
	c.ResetSeq()
	if err := c.writeFlush(mysql.AppendChangeUser(nil, cu, c.Caps)); err != nil {
		c.broken = true
		return err
	}
	for {
		p, err := c.ReadPacket()
		if err != nil {
			c.broken = true
			return err
		}
		if len(p) == 0 {
			c.broken = true
			return mysql.ErrBadPacket
		}
		switch p[0] {
		case mysql.OKHeader:
		case mysql.ErrHeader:
			return mysql.ParseErr(p)
		default: // a plugin switch or more data for the plugin
			reply, err := answer(p)
			if err == nil {
				err = c.writeFlush(reply)
			}
			if err != nil {
				c.broken = true
				return err
			}
			continue
		}
		break
	}
	c.user, c.password = cu.User, ""
	c.DB = cu.Database
	if cu.Charset != 0 {
		c.coll = byte(cu.Charset)
	}
	c.Collation = c.coll
	c.LastInsertID = 0
	c.Vars = nil
	c.forgetStmts()
	if err := c.enableTracking(); err != nil {
		c.broken = true
		return err
	}
	return c.SetMultiStatements(c.MultiStmts)
}

// bound arms the deadline of one of the proxy's own commands (a ping, a
// login change, a SET, a COMMIT it sends): a server that stops answering
// fails it after CommandTimeout instead of holding the session, KILL or
// shutdown. unbound clears it.
func (c *Conn) bound() {
	if c.commandTimeout > 0 {
		c.NetConn().SetDeadline(time.Now().Add(c.commandTimeout))
	}
}

func (c *Conn) unbound() {
	if c.commandTimeout > 0 {
		c.NetConn().SetDeadline(time.Time{})
	}
}

// Abort closes the network connection under its owner, so a read or write
// blocked on it fails now. It is safe to call from any goroutine; the owner
// then sees an I/O error and marks the connection broken.
func (c *Conn) Abort() {
	c.NetConn().Close()
}

func scramble(plugin string, salt []byte, password string, overTLS bool) ([]byte, error) {
	switch plugin {
	case mysql.AuthNativePassword:
		return mysql.ScrambleNative(salt, password), nil
	case mysql.AuthCachingSha2Password:
		return mysql.ScrambleCachingSha2(salt, password), nil
	case mysql.AuthClearPassword:
		if overTLS {
			return append([]byte(password), 0), nil
		}
		// The backend asks for the password itself: on a connection
		// without TLS anyone on the path could read it, and a server (or
		// something posing as one) could ask only to learn it.
		return nil, mysql.NewError(mysql.ErAccessDenied, "backend asks for the %s plugin, which would send the password in clear; shardgate does not answer it without TLS", plugin)
	}
	return nil, mysql.NewError(mysql.ErAccessDenied, "backend asks for unsupported auth plugin %q", plugin)
}

// authResult reads the server's answers until OK or ERR, following auth
// switches and caching_sha2_password's extra round trips.
func (c *Conn) authResult(plugin string, salt []byte, password string, answer func(string, []byte) ([]byte, error)) error {
	for {
		p, err := c.ReadPacket()
		if err != nil {
			return fmt.Errorf("reading auth result: %w", err)
		}
		if len(p) == 0 {
			return mysql.ErrBadPacket
		}
		switch p[0] {
		case mysql.OKHeader:
			return nil
		case mysql.ErrHeader:
			return mysql.ParseErr(p)
		case mysql.AuthSwitch:
			np, nsalt, err := mysql.ParseAuthSwitch(p)
			if err != nil {
				return err
			}
			plugin, salt = np, nsalt
			auth, err := answer(plugin, salt)
			if err != nil {
				return err
			}
			if auth == nil {
				auth = []byte{}
			}
			if err := c.writeFlush(auth); err != nil {
				return err
			}
		case mysql.AuthMoreData:
			if plugin != mysql.AuthCachingSha2Password || len(p) < 2 {
				return mysql.ErrBadPacket
			}
			switch p[1] {
			case mysql.CachingSha2FastAuthOK:
				// The OK packet follows.
			case mysql.CachingSha2FullAuth:
				if c.tls {
					// Inside TLS the password goes as it is.
					if err := c.writeFlush(append([]byte(password), 0)); err != nil {
						return err
					}
					continue
				}
				if err := c.writeFlush([]byte{mysql.CachingSha2RequestPublicKey}); err != nil {
					return err
				}
				kp, err := c.ReadPacket()
				if err != nil {
					return err
				}
				if len(kp) < 2 || kp[0] != mysql.AuthMoreData {
					return mysql.ErrBadPacket
				}
				pub, err := mysql.ParsePublicKey(kp[1:])
				if err != nil {
					return err
				}
				enc, err := encrypt(password, salt, pub)
				if err != nil {
					return err
				}
				if err := c.writeFlush(enc); err != nil {
					return err
				}
			default:
				return mysql.ErrBadPacket
			}
		default:
			return mysql.ErrBadPacket
		}
	}
}

func encrypt(password string, salt []byte, pub *rsa.PublicKey) ([]byte, error) {
	return mysql.EncryptPassword(password, salt, pub)
}

func (c *Conn) writeFlush(p []byte) error {
	if err := c.WritePacket(p); err != nil {
		return err
	}
	return c.Flush()
}

// command sends a one-packet command starting a new exchange.
func (c *Conn) command(cmd byte, arg string) error {
	c.ResetSeq()
	b := make([]byte, 0, 1+len(arg))
	b = append(b, cmd)
	b = append(b, arg...)
	return c.writeFlush(b)
}

// readOK reads a reply that must be OK (or EOF, for COM_SET_OPTION) or ERR.
func (c *Conn) readOK() (mysql.OK, error) {
	p, err := c.ReadPacket()
	if err != nil {
		c.broken = true
		return mysql.OK{}, err
	}
	if len(p) == 0 {
		c.broken = true
		return mysql.OK{}, mysql.ErrBadPacket
	}
	switch p[0] {
	case mysql.ErrHeader:
		return mysql.OK{}, mysql.ParseErr(p)
	case mysql.OKHeader:
		ok, _, err := c.ParseOK(p)
		return ok, err
	case mysql.EOFHeader:
		st, _ := mysql.ResultStatus(p)
		return mysql.OK{Status: st}, nil
	}
	c.broken = true
	return mysql.OK{}, fmt.Errorf("backend %s: unexpected reply %#x", c.Addr, p[0])
}

// Ping sends COM_PING.
func (c *Conn) Ping() error {
	c.bound()
	defer c.unbound()
	if err := c.command(mysql.ComPing, ""); err != nil {
		c.broken = true
		return err
	}
	_, err := c.readOK()
	return err
}

// UseDB sends COM_INIT_DB and records the database on success.
func (c *Conn) UseDB(db string) error {
	c.bound()
	defer c.unbound()
	if err := c.command(mysql.ComInitDB, db); err != nil {
		c.broken = true
		return err
	}
	if _, err := c.readOK(); err != nil {
		return err
	}
	c.DB = db
	return nil
}

// SetMultiStatements toggles CLIENT_MULTI_STATEMENTS with COM_SET_OPTION.
func (c *Conn) SetMultiStatements(on bool) error {
	c.bound()
	defer c.unbound()
	opt := mysql.OptionMultiStatementsOff
	if on {
		opt = mysql.OptionMultiStatementsOn
	}
	c.ResetSeq()
	if err := c.writeFlush([]byte{mysql.ComSetOption, byte(opt), byte(opt >> 8)}); err != nil {
		c.broken = true
		return err
	}
	if _, err := c.readOK(); err != nil {
		return err
	}
	c.MultiStmts = on
	return nil
}

// ResetConnection sends COM_RESET_CONNECTION, which drops all session state
// (variables, temporary tables, prepared statements, locks, transactions,
// and the session's status counters), and turns the trackers back on (the
// reset returns them to their global values with every other variable),
// and IGNORE_SPACE for a connection logged in with CLIENT_IGNORE_SPACE,
// which the login added to its sql_mode and the reset takes away.
// The collation returns to the handshake's; the database is kept. On an
// uncompressed connection both commands go in one write: one round trip.
func (c *Conn) ResetConnection(handshakeCollation byte) error {
	tracking := c.tracking
	if err := c.reset(tracking && c.Caps&mysql.ClientCompress == 0); err != nil {
		return err
	}
	c.Collation = handshakeCollation
	c.LastInsertID = 0
	c.Vars = nil
	c.forgetStmts()
	if tracking && !c.tracking {
		if err := c.enableTracking(); err != nil {
			c.broken = true
			return err
		}
	}
	if !tracking && c.Caps&mysql.ClientIgnoreSpace != 0 {
		if _, err := c.Exec("SET SESSION " + ignoreSpaceSQL); err != nil {
			c.broken = true
			return err
		}
	}
	return nil
}

// reset sends COM_RESET_CONNECTION, followed in the same write by the
// trackers' SET when retrack is set. Any failure leaves the connection
// broken: a reply may be unread.
func (c *Conn) reset(retrack bool) error {
	c.bound()
	defer c.unbound()
	c.tracking = false
	c.ResetSeq()
	if err := c.WritePacket([]byte{mysql.ComResetConnection}); err != nil {
		c.broken = true
		return err
	}
	if retrack {
		c.ResetSeq()
		cmd := trackingCommand
		if c.Caps&mysql.ClientIgnoreSpace != 0 {
			cmd = trackingIgnoreSpaceCommand
		}
		if err := c.WritePacket(cmd); err != nil {
			c.broken = true
			return err
		}
	}
	if err := c.Flush(); err != nil {
		c.broken = true
		return err
	}
	c.SetSeq(1)
	if _, err := c.readOK(); err != nil {
		c.broken = true
		return err
	}
	if retrack {
		c.SetSeq(1)
		if _, err := c.readOK(); err != nil {
			c.broken = true
			return err
		}
		c.tracking = true
	}
	return nil
}

// trackingCommand is trackingSQL as a COM_QUERY payload; with
// ignoreSpaceSQL, for a connection logged in with CLIENT_IGNORE_SPACE.
var (
	trackingCommand            = append([]byte{mysql.ComQuery}, trackingSQL...)
	trackingIgnoreSpaceCommand = append([]byte{mysql.ComQuery}, trackingSQL+", "+ignoreSpaceSQL...)
)

// ignoreSpaceSQL is what the server does at the login of a client with
// CLIENT_IGNORE_SPACE (IGNORE_SPACE added to the session's sql_mode), and
// a reset undoes.
const ignoreSpaceSQL = "sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'IGNORE_SPACE')"

// Result is a small fully-read text result, for the proxy's own queries.
type Result struct {
	OK      mysql.OK
	Columns []*mysql.Column
	Rows    [][][]byte
	// State is the session state information of the final OK (see
	// mysql.ParseStateChanges), copied; nil when nothing was reported.
	State []byte
}

// ParseOK decodes an OK packet payload as this connection's server sends
// it (with CLIENT_SESSION_TRACK, or without) and returns its session state
// information, aliasing p.
func (c *Conn) ParseOK(p []byte) (mysql.OK, []byte, error) {
	if c.Caps&mysql.ClientSessionTrack != 0 {
		return mysql.ParseOKTracked(p)
	}
	ok, err := mysql.ParseOK(p)
	return ok, nil, err
}

// Exec runs a text query and reads its whole result (only for the proxy's
// own small queries: SET NAMES, KILL, version checks). Multiple result sets
// are read and the last one is returned.
func (c *Conn) Exec(query string) (*Result, error) {
	c.bound()
	defer c.unbound()
	return c.Run(query)
}

// Run runs a client's own statement that the proxy reads whole (a SET,
// a KILL's expression) like Exec, without the deadline of the proxy's own
// commands: a client's statement may run as long as the server lets it
// (KILL and the client's leaving stop it through Abort), as it would on
// the server directly.
func (c *Conn) Run(query string) (*Result, error) {
	if err := c.command(mysql.ComQuery, query); err != nil {
		c.broken = true
		return nil, err
	}
	for {
		res, more, err := c.ReadResult()
		if err != nil || !more {
			return res, err
		}
	}
}

// ReadResult reads one complete text result (OK, or a result set with its
// rows decoded and copied) after a query was sent; more reports
// SERVER_MORE_RESULTS_EXISTS. A backend ERR is returned as *mysql.SQLError
// with the connection still usable. Only for small results.
func (c *Conn) ReadResult() (res *Result, more bool, err error) {
	p, err := c.ReadPacket()
	if err != nil {
		c.broken = true
		return nil, false, err
	}
	if len(p) == 0 {
		c.broken = true
		return nil, false, mysql.ErrBadPacket
	}
	switch p[0] {
	case mysql.ErrHeader:
		return nil, false, mysql.ParseErr(p)
	case mysql.OKHeader:
		ok, state, err := c.ParseOK(p)
		if err != nil {
			c.broken = true
			return nil, false, err
		}
		res := &Result{OK: ok}
		if state != nil {
			res.State = append([]byte(nil), state...)
		}
		return res, ok.Status&mysql.StatusMoreResultsExists != 0, nil
	case mysql.LocalInfileHeader:
		c.broken = true
		return nil, false, errors.New("backend asked for a local file during an internal query")
	}
	n, _, k := mysql.ReadLenEncInt(p)
	if k == 0 {
		c.broken = true
		return nil, false, mysql.ErrBadPacket
	}
	res = &Result{}
	for i := uint64(0); i < n; i++ {
		p, err := c.ReadPacket()
		if err != nil {
			c.broken = true
			return nil, false, err
		}
		col, err := mysql.ParseColumnExt(p, c.ExtMetadata())
		if err != nil {
			c.broken = true
			return nil, false, err
		}
		res.Columns = append(res.Columns, col)
	}
	if c.Caps&mysql.ClientDeprecateEOF == 0 {
		if _, err := c.ReadPacket(); err != nil {
			c.broken = true
			return nil, false, err
		}
	}
	for {
		p, err := c.ReadPacket()
		if err != nil {
			c.broken = true
			return nil, false, err
		}
		if mysql.IsEOF(p) {
			st, _ := mysql.ResultStatus(p)
			res.OK.Status = st
			return res, st&mysql.StatusMoreResultsExists != 0, nil
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			return nil, false, mysql.ParseErr(p)
		}
		row, err := mysql.ParseTextRow(p, len(res.Columns), nil)
		if err != nil {
			c.broken = true
			return nil, false, err
		}
		cp := make([][]byte, len(row))
		for i, v := range row {
			if v != nil {
				cp[i] = append([]byte{}, v...)
			}
		}
		res.Rows = append(res.Rows, cp)
	}
}

// KillQuery asks the server to stop the statement running on thread id
// (KILL QUERY), or to close that connection when query is false.
func (c *Conn) KillQuery(threadID uint32, query bool) error {
	q := "KILL QUERY " + strconv.FormatUint(uint64(threadID), 10)
	if !query {
		q = "KILL CONNECTION " + strconv.FormatUint(uint64(threadID), 10)
	}
	_, err := c.Exec(q)
	return err
}

// ExecPair sends two statements whose answers are OK or ERR (XA END and
// XA PREPARE, say) in one write and reads both answers: one round trip
// instead of two. first and second are each statement's error; ok is the
// second's OK. On a compressed connection the two go one after the other.
func (c *Conn) ExecPair(q1, q2 string) (ok mysql.OK, first, second error) {
	if c.Compressed() {
		if _, first = c.Exec(q1); c.broken {
			return ok, first, first
		}
		res, err := c.Exec(q2)
		if res != nil {
			ok = res.OK
		}
		return ok, first, err
	}
	c.bound()
	defer c.unbound()
	for _, q := range [2]string{q1, q2} {
		c.ResetSeq()
		b := make([]byte, 0, 1+len(q))
		b = append(append(b, mysql.ComQuery), q...)
		if err := c.WritePacket(b); err != nil {
			c.broken = true
			return ok, err, err
		}
	}
	if err := c.Flush(); err != nil {
		c.broken = true
		return ok, err, err
	}
	c.SetSeq(1)
	if _, first = c.readOK(); c.broken {
		return ok, first, first
	}
	c.SetSeq(1)
	ok, second = c.readOK()
	return ok, first, second
}

// ExtMetadata reports whether the connection's column definitions carry
// MariaDB's extended metadata (VariantExtMetadata).
func (c *Conn) ExtMetadata() bool { return c.ExtCaps&mysql.MariaDBClientExtendedMetadata != 0 }
