package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/server"
)

// FuzzSession sends raw command packets from a logged-in client to an
// in-process proxy (as Vitess's FuzzHandleNextCommand does): whatever the
// bytes, no session may panic, and the proxy must still log a new client
// in and answer its COM_PING. The backend node is down (nothing listens),
// so commands that need a server end with its error; the decoding and
// dispatch of every command, prepared statements included, run. The
// input is a sequence of packets, each a length byte and its payload.
func FuzzSession(f *testing.F) {
	cmd := func(b ...byte) []byte { return append([]byte{byte(len(b))}, b...) }
	q := func(s string) []byte { return cmd(append([]byte{mysql.ComQuery}, s...)...) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	stmtID := binary.LittleEndian.AppendUint32(nil, 1<<31)
	f.Add(cat(q("SELECT 1"), cmd(mysql.ComPing)))
	f.Add(cat(cmd(append([]byte{mysql.ComStmtPrepare}, "SELECT ?"...)...), cmd(append(append([]byte{mysql.ComStmtExecute}, stmtID...), 0, 1, 0, 0, 0, 1, 1, 8, 0)...)))
	f.Add(cat(cmd(append(append([]byte{mysql.ComStmtSendLongData}, stmtID...), 0, 0, 'x')...), cmd(append([]byte{mysql.ComStmtClose}, stmtID...)...)))
	f.Add(cat(cmd(append([]byte{mysql.ComStmtFetch}, stmtID...)...), cmd(append([]byte{mysql.ComStmtReset}, stmtID...)...)))
	f.Add(cat(q("SET NAMES latin1"), q("USE x"), q("BEGIN"), q("SAVEPOINT a"), q("ROLLBACK TO a"), q("COMMIT")))
	f.Add(cat(q("PREPARE s FROM 'SELECT 1'"), q("EXECUTE s"), q("DEALLOCATE PREPARE s"), q("KILL 1")))
	f.Add(cat(cmd(mysql.ComSetOption, 0, 0), cmd(mysql.ComFieldList, 't', 0), cmd(mysql.ComInitDB, 'd'), cmd(mysql.ComResetConnection)))
	f.Add(cat(cmd(mysql.ComChangeUser, 'a', 'p', 'p', 0, 0), cmd(mysql.ComStatistics), cmd(mysql.ComProcessInfo)))
	f.Add(cat(q("SHOW PROCESSLIST"), q("SELECT 1; SELECT 2"), cmd(0xff), cmd()))

	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.ServerVersion = "10.11.0-MariaDB-shardgate"
	cfg.Users = []config.User{{User: appUser, Password: appPassword}}
	cfg.Nodes = []config.Node{{Name: "node1", Master: "127.0.0.1:1", User: "u", MaxConnsLimit: 2, DownAfterNoalive: 1}}
	cfg.Schemas = []config.Schema{{User: appUser, Nodes: []string{"node1"}, Default: "node1"}}
	cfg.Backend.DialTimeout = 100 * time.Millisecond
	cfg.Backend.AcquireTimeout = 100 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		f.Fatal(err)
	}
	srv, err := server.New(cfg, server.Options{Log: zap.NewNop()})
	if err != nil {
		f.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go srv.Serve(l)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	addr := l.Addr().String()

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := fuzzLogin(addr)
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		defer c.Close()
		for len(data) > 0 {
			n := int(data[0])
			data = data[1:]
			if n > len(data) {
				n = len(data)
			}
			p := data[:n]
			data = data[n:]
			c.ResetSeq()
			if c.WritePacket(p) != nil || c.Flush() != nil {
				break
			}
			// Read whatever answers come, until the proxy is quiet.
			for {
				c.NetConn().SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				if _, err := c.ReadPacket(); err != nil {
					var ne net.Error
					if !errors.As(err, &ne) || !ne.Timeout() {
						return // the proxy closed the session: fine
					}
					break
				}
			}
		}
		if n := srv.Stats().Panics; n > 0 {
			t.Fatalf("%d sessions panicked", n)
		}
		// The proxy still serves.
		c2, err := fuzzLogin(addr)
		if err != nil {
			t.Fatalf("a new login after the input: %v", err)
		}
		defer c2.Close()
		c2.ResetSeq()
		c2.WritePacket([]byte{mysql.ComPing})
		c2.Flush()
		c2.NetConn().SetReadDeadline(time.Now().Add(5 * time.Second))
		if p, err := c2.ReadPacket(); err != nil || len(p) == 0 || p[0] != mysql.OKHeader {
			t.Fatalf("COM_PING after the input: %v %v", p, err)
		}
	})
}

// fuzzLogin logs the app user in over a new connection.
func fuzzLogin(addr string) (*mysql.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	c := mysql.NewConn(nc, 0, 0)
	p, err := c.ReadPacket()
	if err != nil {
		nc.Close()
		return nil, err
	}
	hs, err := mysql.ParseHandshake(p)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.WritePacket(mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
		Capabilities: rawCaps | mysql.ClientMultiStatements, MaxPacket: mysql.MaxPacketPayload, Charset: 45,
		User: appUser, AuthResponse: mysql.ScrambleNative(hs.Salt, appPassword), AuthPlugin: mysql.AuthNativePassword,
	}))
	if err := c.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	if p, err = c.ReadPacket(); err != nil || len(p) == 0 || p[0] != mysql.OKHeader {
		nc.Close()
		return nil, errors.New("login refused")
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}
