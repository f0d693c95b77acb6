package server

import (
	"bytes"
	"fmt"
	"net"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// handshakeTimeout bounds the whole authentication exchange.
const handshakeTimeout = 10 * time.Second

// handshake greets the client, authenticates it and selects its database.
// On failure the client has been sent an ERR packet where possible.
func (ss *session) handshake() error {
	srv := ss.srv
	ss.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer ss.nc.SetDeadline(time.Time{})
	salt, err := mysql.NewSalt()
	if err != nil {
		return err
	}
	ss.salt = salt
	plugin := srv.cfg.DefaultAuthPlugin
	greeting := mysql.AppendHandshake(ss.buf[:0], &mysql.Handshake{
		ServerVersion: srv.version(),
		ConnectionID:  ss.id,
		Salt:          salt,
		Capabilities:  serverCaps,
		Charset:       srv.coll,
		Status:        mysql.StatusAutocommit,
		AuthPlugin:    plugin,
	})
	if err := ss.writeFlush(greeting); err != nil {
		return err
	}
	p, err := ss.c.ReadPacket()
	if err != nil {
		return err
	}
	hr, err := mysql.ParseHandshakeResponse(p)
	if err != nil {
		ss.writeErr(mysql.NewError(mysql.ErHandshake, "Bad handshake"))
		return err
	}
	ss.caps = hr.Capabilities & serverCaps
	ss.variant = ss.caps & (mysql.ClientDeprecateEOF | mysql.ClientFoundRows)
	ss.multiStmts = ss.caps&mysql.ClientMultiStatements != 0
	ss.coll = hr.Charset
	if _, ok := mysql.CollationByID(ss.coll); !ok {
		ss.coll = srv.coll
	}
	ss.handshakeColl = ss.coll
	clientPlugin := hr.AuthPlugin
	if hr.Capabilities&mysql.ClientPluginAuth == 0 || clientPlugin == "" {
		clientPlugin = mysql.AuthNativePassword
	}
	if err := ss.authenticate(hr.User, clientPlugin, hr.AuthResponse); err != nil {
		return err
	}
	ss.user = hr.User
	if _, ok := srv.router.DefaultNode(ss.user); !ok {
		e := mysql.NewError(mysql.ErDBAccessDenied, "Access denied for user '%s'@'%s': no schema in schema_list", ss.user, ss.host())
		ss.writeErr(e)
		return e
	}
	if hr.Database != "" {
		if err := ss.useDB(hr.Database); err != nil {
			ss.writeErr(err)
			return err
		}
	}
	if err := ss.writeFlush(mysql.AppendOK(ss.buf[:0], mysql.OKHeader, mysql.OK{Status: ss.status})); err != nil {
		return err
	}
	if ss.caps&mysql.ClientCompress != 0 {
		ss.c.EnableCompression()
	}
	return nil
}

func (ss *session) host() string {
	if h, _, err := net.SplitHostPort(ss.nc.RemoteAddr().String()); err == nil {
		return h
	}
	return ss.nc.RemoteAddr().String()
}

// authenticate checks a client's credentials, switching plugins or running
// caching_sha2_password's extra round trips as needed. It writes the ERR
// packet on failure but not the final OK.
func (ss *session) authenticate(user, plugin string, resp []byte) error {
	srv := ss.srv
	password, known := srv.users[user]
	if plugin != mysql.AuthNativePassword && plugin != mysql.AuthCachingSha2Password {
		// Ask the client to use the configured plugin instead.
		plugin = srv.cfg.DefaultAuthPlugin
		if err := ss.writeFlush(mysql.AppendAuthSwitch(ss.buf[:0], plugin, ss.salt)); err != nil {
			return err
		}
		p, err := ss.c.ReadPacket()
		if err != nil {
			return err
		}
		resp = append([]byte(nil), p...)
	}
	denied := func() error {
		used := "YES"
		if len(resp) == 0 {
			used = "NO"
		}
		e := mysql.NewError(mysql.ErAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", user, ss.host(), used)
		ss.writeErr(e)
		return e
	}
	switch plugin {
	case mysql.AuthNativePassword:
		if !known || !mysql.CheckScramble(resp, mysql.ScrambleNative(ss.salt, password)) {
			return denied()
		}
		return nil
	default: // caching_sha2_password
		if len(resp) == 0 && password == "" && known {
			return nil
		}
		if known && srv.sha2Cached(user, password) {
			if !mysql.CheckScramble(resp, mysql.ScrambleCachingSha2(ss.salt, password)) {
				return denied()
			}
			return ss.writeFlush([]byte{mysql.AuthMoreData, mysql.CachingSha2FastAuthOK})
		}
		// Full authentication: the password itself is needed, so without
		// TLS it travels RSA-encrypted with the proxy's public key.
		if err := ss.writeFlush([]byte{mysql.AuthMoreData, mysql.CachingSha2FullAuth}); err != nil {
			return err
		}
		p, err := ss.c.ReadPacket()
		if err != nil {
			return err
		}
		if len(p) != 1 || p[0] != mysql.CachingSha2RequestPublicKey {
			// A cleartext password over an unencrypted connection is
			// refused, as MySQL refuses it.
			e := mysql.NewError(mysql.ErAccessDenied, "Access denied for user '%s'@'%s': caching_sha2_password needs the RSA public key exchange on connections without TLS", user, ss.host())
			ss.writeErr(e)
			return e
		}
		key, pub, err := srv.rsaKeys()
		if err != nil {
			return fmt.Errorf("generating RSA key: %w", err)
		}
		if err := ss.writeFlush(append([]byte{mysql.AuthMoreData}, pub...)); err != nil {
			return err
		}
		p, err = ss.c.ReadPacket()
		if err != nil {
			return err
		}
		got, err := mysql.DecryptPassword(p, ss.salt, key)
		if err != nil || !known || !bytes.Equal([]byte(got), []byte(password)) {
			resp = p
			return denied()
		}
		srv.sha2Remember(user, password)
		return nil
	}
}
