package server

import (
	"encoding/binary"
	"errors"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"go.uber.org/zap"
)

// userCmds runs the commands that change who the session is and how it
// talks: COM_CHANGE_USER (with the account checked by the proxy, or by
// the backend for a session logged in with a backend account) and
// COM_SET_OPTION. It is owned by its handler's goroutine.
type userCmds struct {
	h *handler
}

// changeUser implements COM_CHANGE_USER.
func (u *userCmds) changeUser(p []byte) error {
	h := u.h
	c := h.c
	cu, err := mysql.ParseChangeUser(p, c.caps)
	if err != nil {
		return err
	}
	plugin := cu.AuthPlugin
	if plugin == "" {
		plugin = mysql.AuthNativePassword
	}
	coll := c.st.HandshakeColl
	if _, ok := mysql.CollationByID(byte(cu.Charset)); ok && cu.Charset != 0 {
		coll = byte(cu.Charset)
	}
	if c.failedChangeUser >= 3 {
		// MariaDB's limit on guessing passwords this way (MDEV-3915).
		return mysql.NewError(mysql.ErUnknownComError, "Unknown command")
	}
	_, listed := c.srv.lv().users[cu.User]
	if bc := c.st.Dedicated(); bc != nil && !listed && c.srv.cfg().BackendLogins != "" {
		return h.cmds.changeUserRelayed(bc, cu, coll)
	}
	var bc *backend.Conn
	if !listed && c.srv.cfg().BackendLogins != "" {
		bc, err = auth{c}.dialLogin(cu.User, "", coll)
	} else {
		err = auth{c}.authenticate(cu.User, plugin, cu.AuthResponse)
	}
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) {
			// The client has its ERR; as on MariaDB, the session goes on
			// as it was, with the account it had.
			c.failedChangeUser++
			return engine.ErrAnswered
		}
		return errCloseSession
	}
	// The session's own backend connection (a backend account's login)
	// goes: the new user gets a new one, or pooled ones.
	c.h.ps.closeAll()
	c.st.Undedicate()
	c.st.Reset()
	if bc != nil {
		c.st.Dedicate(bc)
		c.user = c.srv.cfg().BackendLogins
	} else {
		c.user = cu.User
	}
	c.act.setUser(cu.User)
	c.st.SetTxnMode(c.srv.cfg().TxnMode(c.user), c.srv.xa)
	c.st.DB = ""
	c.act.setDB("")
	if cu.Charset != 0 {
		if _, ok := mysql.CollationByID(byte(cu.Charset)); ok {
			c.st.Coll, c.st.HandshakeColl = byte(cu.Charset), byte(cu.Charset)
		}
	}
	if _, ok := c.srv.rt().DefaultNode(c.user); !ok {
		c.writeErr(mysql.NewError(mysql.ErDBAccessDenied, "Access denied for user '%s'@'%s': no schema in schema_list", c.user, c.host()))
		return errCloseSession
	}
	if cu.Database != "" {
		if err := h.useDB(cu.Database); err != nil {
			return err
		}
	}
	return c.okStatus()
}

// changeUserRelayed changes the user of a session logged in with a
// backend account to another backend account, on the session's own
// connection: the client answered that connection's challenge at login,
// and answers COM_CHANGE_USER with it again (libmariadb does so even
// after a plugin switch), so only that connection's server can check it.
// The server decides as for its own clients: a wrong password leaves the
// session as it was (and a fourth attempt gets 1047).
func (u *userCmds) changeUserRelayed(bc *backend.Conn, cu *mysql.ChangeUser, coll byte) error {
	h := u.h
	c := h.c
	fwd := *cu
	fwd.Charset = uint16(coll)
	if fwd.AuthPlugin == "" {
		fwd.AuthPlugin = mysql.AuthNativePassword
	}
	err := bc.ChangeUserAs(&fwd, func(req []byte) ([]byte, error) {
		if err := c.writeFlush(req); err != nil {
			return nil, err
		}
		p, err := c.c.ReadPacket()
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), p...), nil
	})
	if err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && !bc.Broken() {
			c.failedChangeUser++
			return se
		}
		c.log.Info("backend connection lost during COM_CHANGE_USER", zap.Error(err))
		return errCloseSession
	}
	c.st.HandshakeColl = coll
	c.h.ps.closeAll()
	c.st.Reset()
	c.act.setUser(cu.User)
	c.st.DB = cu.Database
	c.act.setDB(cu.Database)
	return c.okStatus()
}

// setOption implements COM_SET_OPTION; the backend follows on next use.
func (u *userCmds) setOption(p []byte) error {
	h := u.h
	c := h.c
	if len(p) < 3 {
		return mysql.ErrBadPacket
	}
	switch binary.LittleEndian.Uint16(p[1:3]) {
	case mysql.OptionMultiStatementsOn:
		c.st.MultiStmts = true
	case mysql.OptionMultiStatementsOff:
		c.st.MultiStmts = false
	default:
		return mysql.NewError(mysql.ErUnknownComError, "Unknown command")
	}
	if c.caps&mysql.ClientDeprecateEOF != 0 {
		return c.c.WritePacket(mysql.AppendOK(c.buf[:0], mysql.EOFHeader, mysql.OK{Status: c.st.Status}))
	}
	return c.c.WritePacket(mysql.AppendEOF(c.buf[:0], 0, c.st.Status))
}
