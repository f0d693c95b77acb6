package backend_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// TestClearPasswordRefused: a server (or something posing as one) that
// switches the login to mysql_clear_password, or offers it first, does not
// get the password: the proxy refuses with 1045 and sends nothing more.
func TestClearPasswordRefused(t *testing.T) {
	const password = "s3cret-pw"
	for _, first := range []bool{false, true} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() {
			defer l.Close()
			nc, err := l.Accept()
			if err != nil {
				got <- nil
				return
			}
			defer nc.Close()
			c := mysql.NewConn(nc, 0, 0)
			plugin := mysql.AuthNativePassword
			if first {
				plugin = mysql.AuthClearPassword
			}
			c.WritePacket(mysql.AppendHandshake(nil, &mysql.Handshake{ServerVersion: "10.11.0-MariaDB", ConnectionID: 1,
				Salt: bytes.Repeat([]byte("s"), 20), Capabilities: 0xffffffff &^ mysql.ClientSSL &^ mysql.ClientCompress, Charset: 45, AuthPlugin: plugin}))
			c.Flush()
			var all []byte
			if p, err := c.ReadPacket(); err == nil {
				all = append(all, p...)
				if !first {
					c.WritePacket(append(append([]byte{mysql.AuthSwitch}, mysql.AuthClearPassword...), 0))
					c.Flush()
				}
			}
			nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			rest, _ := io.ReadAll(nc)
			got <- append(all, rest...)
		}()
		_, err = backend.Dial(context.Background(), l.Addr().String(), backend.DialOptions{User: "app", Password: password, DialTimeout: 3 * time.Second})
		var se *mysql.SQLError
		if !errors.As(err, &se) || se.Code != mysql.ErAccessDenied {
			t.Errorf("offered first=%v: %v, want 1045", first, err)
		}
		if b := <-got; bytes.Contains(b, []byte(password)) {
			t.Errorf("offered first=%v: the password was sent in clear", first)
		}
	}
}
