package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/session"
)

// handshakeTimeout bounds the whole authentication exchange (MariaDB's
// connect_timeout default), unless the proxy is under pressure
// (handshakeBusyTimeout).
const handshakeTimeout = 10 * time.Second

// auth is the login of a client connection: the handshake, the check of
// its account (by the proxy, or by a backend for a backend account), and
// the same check again for COM_CHANGE_USER. It holds nothing but its
// connection, which owns it.
type auth struct {
	c *conn
}

// handshake greets the client, authenticates it and selects its database,
// reading from the client for at most timeout in all. On failure the
// client has been sent an ERR packet where possible.
func (a auth) handshake(timeout time.Duration) error {
	c := a.c
	srv := c.srv
	// Reads only: writes have client_write_timeout, whose deadline the
	// writer keeps (a deadline cleared here would leave them without one).
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	defer c.nc.SetReadDeadline(time.Time{})
	hr, err := a.greet()
	if err != nil {
		return err
	}
	c.caps = hr.Capabilities & srv.caps
	coll := hr.Charset
	if _, ok := mysql.CollationByID(coll); !ok {
		coll = srv.coll
	}
	variant := c.caps & backend.VariantCaps
	if hr.ExtCapabilities&mysql.MariaDBClientExtendedMetadata != 0 {
		variant |= backend.VariantExtMetadata
	}
	c.st = session.New(srv.nodeMap(), srv.cfg().TransactionMode == config.TransactionSingle, coll,
		variant, c.caps&mysql.ClientMultiStatements != 0)
	c.st.SetContext(c.ctx)
	c.st.TrackClient(c.caps&mysql.ClientSessionTrack != 0)
	c.st.SetKnobs(srv.knobs)
	c.st.SetNodeSource(srv.nodeMap) // nodes a reload adds
	clientPlugin := hr.AuthPlugin
	if hr.Capabilities&mysql.ClientPluginAuth == 0 || clientPlugin == "" {
		clientPlugin = mysql.AuthNativePassword
	}
	if _, listed := srv.lv().users[hr.User]; !listed && srv.cfg().BackendLogins != "" {
		if err := a.backendLogin(hr.User, hr.Database, coll); err != nil {
			return err
		}
		c.user = srv.cfg().BackendLogins // its schema routes the session
		c.act.setUser(hr.User)
	} else {
		if err := a.authenticate(hr.User, clientPlugin, hr.AuthResponse); err != nil {
			return err
		}
		c.user = hr.User
		c.act.setUser(c.user)
	}
	c.st.SetTxnMode(srv.cfg().TxnMode(c.user), srv.xa)
	most, share := srv.cfg().BackendQuota(c.user)
	c.st.SetContext(backend.WithQuota(c.ctx, backend.Quota{User: c.user, Max: most, Share: share}))
	if _, ok := srv.rt().DefaultNode(c.user); !ok {
		e := mysql.NewError(mysql.ErDBAccessDenied, "Access denied for user '%s'@'%s': no schema in schema_list", c.user, c.host())
		c.writeErr(e)
		return e
	}
	if hr.Database != "" {
		if c.st.TrackersUnknown() {
			// The login's OK reports the schema to a client that tracks
			// it, as MariaDB's does (track.go).
			if err := c.h.track.load(); err != nil {
				c.writeErr(err)
				return err
			}
		}
		if err := c.h.useDB(hr.Database); err != nil {
			c.writeErr(err)
			return err
		}
	}
	if err := c.writeFlush(mysql.AppendOKTracked(c.buf[:0], mysql.OKHeader, mysql.OK{Status: c.status()}, c.SessionState(nil))); err != nil {
		return err
	}
	if c.caps&mysql.ClientCompress != 0 {
		c.c.EnableCompression()
	}
	return nil
}

// greet sends the greeting and reads the client's handshake response,
// through TLS when the client asks for it (SSLRequest) and refusing a
// connection without TLS under require_secure_transport.
func (a auth) greet() (*mysql.HandshakeResponse, error) {
	c := a.c
	srv := c.srv
	salt, err := mysql.NewSalt()
	if err != nil {
		return nil, err
	}
	c.salt = salt
	plugin := srv.cfg().DefaultAuthPlugin
	caps, ext := srv.greetCaps()
	greeting := mysql.AppendHandshake(c.buf[:0], &mysql.Handshake{
		ServerVersion:   srv.version(),
		ConnectionID:    c.id,
		Salt:            salt,
		Capabilities:    caps,
		ExtCapabilities: ext,
		Charset:         srv.coll,
		Status:          mysql.StatusAutocommit,
		AuthPlugin:      plugin,
	})
	if err := c.writeFlush(greeting); err != nil {
		return nil, err
	}
	p, err := c.c.ReadPacket()
	if err != nil {
		return nil, err
	}
	if srv.tls != nil && mysql.IsSSLRequest(p) {
		// SSLRequest: the rest of the login, and the session, go
		// through TLS.
		raw := c.c.NetConn()
		tc := tls.Server(&prefixConn{raw, c.c.TakeBuffered()}, srv.tls)
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c.c.UseConn(srv.writeBounded(tc))
		c.tls = true
		if p, err = c.c.ReadPacket(); err != nil {
			return nil, err
		}
	}
	if srv.cfg().RequireSecureTransport && !c.tls && !c.local() {
		e := mysql.NewError(mysql.ErAccessDenied, "Access denied: connections without TLS are refused (require_secure_transport)")
		c.writeErr(e)
		return nil, e
	}
	hr, err := mysql.ParseHandshakeResponse(p)
	if err != nil {
		c.writeErr(mysql.NewError(mysql.ErHandshake, "Bad handshake"))
		return nil, err
	}
	hr.ExtCapabilities &= ext
	return hr, nil
}

// dialLogin logs a client in with a backend account of the default node
// of backend_logins' schema: the proxy dials the node as that user and
// passes each authentication request of the server on to the client (an
// auth switch with the server's salt), so MariaDB checks the password and
// the proxy never learns it. A failure is written to the client.
func (a auth) dialLogin(user, db string, coll byte) (*backend.Conn, error) {
	c := a.c
	srv := c.srv
	node, _ := srv.rt().DefaultNode(srv.cfg().BackendLogins)
	n := srv.node(node)
	answer := func(plugin string, salt []byte) ([]byte, error) {
		// Plugins that answer the server's challenge in one packet are
		// passed on: mysql_old_password too (an account with a pre-4.1
		// hash, allowed when secure_auth is off on both sides).
		if plugin != mysql.AuthNativePassword && plugin != mysql.AuthOldPassword {
			return nil, mysql.NewError(mysql.ErAccessDenied, "Access denied for user '%s': the account uses the %s plugin, which shardgate does not pass on (mysql_native_password and mysql_old_password only)", user, plugin)
		}
		if err := c.writeFlush(mysql.AppendAuthSwitch(c.buf[:0], plugin, salt)); err != nil {
			return nil, err
		}
		p, err := c.c.ReadPacket()
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), p...), nil
	}
	// The session's context: a handshake evicted (closeNow) stops dialing.
	ctx, cancel := context.WithTimeout(c.ctx, handshakeTimeout)
	defer cancel()
	bc, err := n.DialAs(ctx, user, db, coll, c.st.Variant, answer)
	if err != nil {
		c.writeErr(err)
		return nil, err
	}
	return bc, nil
}

// backendLogin logs a client in with a backend account (dialLogin) and
// makes that connection the session's own.
func (a auth) backendLogin(user, db string, coll byte) error {
	c := a.c
	bc, err := a.dialLogin(user, db, coll)
	if err != nil {
		return err
	}
	c.st.Dedicate(bc)
	c.st.DB = db
	c.act.setDB(db)
	return nil
}

// authenticate checks a client's credentials, switching plugins or running
// caching_sha2_password's extra round trips as needed. It writes the ERR
// packet on failure but not the final OK.
func (a auth) authenticate(user, plugin string, resp []byte) error {
	c := a.c
	srv := c.srv
	password, known := srv.lv().users[user]
	if plugin != mysql.AuthNativePassword && plugin != mysql.AuthCachingSha2Password {
		// Ask the client to use the configured plugin instead.
		plugin = srv.cfg().DefaultAuthPlugin
		if err := c.writeFlush(mysql.AppendAuthSwitch(c.buf[:0], plugin, c.salt)); err != nil {
			return err
		}
		p, err := c.c.ReadPacket()
		if err != nil {
			return err
		}
		resp = append([]byte(nil), p...)
	}
	switch plugin {
	case mysql.AuthNativePassword:
		if !known || !mysql.CheckScramble(resp, mysql.ScrambleNative(c.salt, password)) {
			return a.denied(user, resp)
		}
		return nil
	default: // caching_sha2_password
		if len(resp) == 0 && password == "" && known {
			return nil
		}
		if known && srv.sha2Cached(user, password) {
			if !mysql.CheckScramble(resp, mysql.ScrambleCachingSha2(c.salt, password)) {
				return a.denied(user, resp)
			}
			return c.writeFlush([]byte{mysql.AuthMoreData, mysql.CachingSha2FastAuthOK})
		}
		return a.sha2Full(user, password, known)
	}
}

// denied answers a wrong password (or an unknown user) with MariaDB's
// 1045, saying whether the client sent one (resp).
func (a auth) denied(user string, resp []byte) error {
	used := "YES"
	if len(resp) == 0 {
		used = "NO"
	}
	e := mysql.NewError(mysql.ErAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", user, a.c.host(), used)
	a.c.writeErr(e)
	return e
}

// sha2Full is caching_sha2_password's full authentication: the password
// itself is needed. Over TLS (or a local socket) the client sends it as
// it is; without TLS it travels RSA-encrypted with the proxy's public key.
func (a auth) sha2Full(user, password string, known bool) error {
	c := a.c
	srv := c.srv
	if err := c.writeFlush([]byte{mysql.AuthMoreData, mysql.CachingSha2FullAuth}); err != nil {
		return err
	}
	p, err := c.c.ReadPacket()
	if err != nil {
		return err
	}
	if c.tls || c.local() {
		got := bytes.TrimSuffix(p, []byte{0})
		if !known || !bytes.Equal(got, []byte(password)) {
			return a.denied(user, p)
		}
		srv.sha2Remember(user, password)
		return nil
	}
	if len(p) != 1 || p[0] != mysql.CachingSha2RequestPublicKey {
		// A cleartext password over an unencrypted connection is
		// refused, as MySQL refuses it.
		e := mysql.NewError(mysql.ErAccessDenied, "Access denied for user '%s'@'%s': caching_sha2_password needs the RSA public key exchange on connections without TLS", user, c.host())
		c.writeErr(e)
		return e
	}
	key, pub, err := srv.rsaKeys()
	if err != nil {
		return fmt.Errorf("generating RSA key: %w", err)
	}
	if err := c.writeFlush(append([]byte{mysql.AuthMoreData}, pub...)); err != nil {
		return err
	}
	if p, err = c.c.ReadPacket(); err != nil {
		return err
	}
	got, err := mysql.DecryptPassword(p, c.salt, key)
	if err != nil || !known || !bytes.Equal([]byte(got), []byte(password)) {
		return a.denied(user, p)
	}
	srv.sha2Remember(user, password)
	return nil
}
