package engine

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// cannedConn is a net.Conn that answers every write (a command packet)
// with the same response bytes and discards what is written; it allocates
// nothing, so a benchmark over it counts the engine's allocations only.
type cannedConn struct {
	answer []byte
	left   []byte
}

func (c *cannedConn) Read(p []byte) (int, error) {
	if len(c.left) == 0 {
		return 0, errors.New("canned: read with no command sent")
	}
	n := copy(p, c.left)
	c.left = c.left[n:]
	return n, nil
}

func (c *cannedConn) Write(p []byte) (int, error) {
	if c.answer != nil {
		c.left = c.answer
	}
	return len(p), nil
}

func (c *cannedConn) Close() error                     { return nil }
func (c *cannedConn) LocalAddr() net.Addr              { return nil }
func (c *cannedConn) RemoteAddr() net.Addr             { return nil }
func (c *cannedConn) SetDeadline(time.Time) error      { return nil }
func (c *cannedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cannedConn) SetWriteDeadline(time.Time) error { return nil }
func (c *cannedConn) appendPacket(b []byte, seq byte, p []byte) []byte {
	return append(append(b, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq), p...)
}

// oneConn lends the one connection it holds.
type oneConn struct{ bc *backend.Conn }

func (o *oneConn) Acquire(string, bool) (*backend.Conn, error)  { return o.bc, nil }
func (o *oneConn) Release(*backend.Conn, bool, backend.Outcome) {}
func (o *oneConn) Shared(string) bool                           { return false }
func (o *oneConn) Running(*backend.Conn)                        {}
func (o *oneConn) RunningAll([]*backend.Conn)                   {}
func (o *oneConn) Interrupted() bool                            { return false }

// discardWriter is a Writer whose client discards what it is sent.
type discardWriter struct{ client *mysql.Conn }

func (w *discardWriter) Fields([]*mysql.Column, [][]byte) error { return nil }
func (w *discardWriter) Row([][]byte, []byte) error             { return nil }
func (w *discardWriter) End(uint16) error                       { return nil }
func (w *discardWriter) OK(mysql.OK) error                      { return nil }
func (w *discardWriter) TextRows() bool                         { return true }
func (w *discardWriter) Client() *mysql.Conn                    { return w.client }

// BenchmarkForwardPoint is the engine's part of a point select: Forward
// of a single-target plan relaying a one-row result set (column count,
// one column definition, one row, the OK that ends it) packet by packet.
// It must allocate nothing.
func BenchmarkForwardPoint(b *testing.B) {
	backendSide := &cannedConn{}
	var answer []byte
	answer = backendSide.appendPacket(answer, 1, []byte{1})
	answer = backendSide.appendPacket(answer, 2, mysql.AppendColumn(nil, &mysql.Column{Schema: "sbtest", Table: "sbtest1",
		OrgTable: "sbtest1", Name: "c", OrgName: "c", Charset: 45, Length: 480, Type: mysql.TypeString}))
	answer = backendSide.appendPacket(answer, 3, mysql.AppendTextRow(nil, [][]byte{
		[]byte("83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330")}))
	answer = backendSide.appendPacket(answer, 4, mysql.AppendOK(nil, mysql.EOFHeader, mysql.OK{Status: mysql.StatusAutocommit}))
	backendSide.answer = answer
	bc := &backend.Conn{Conn: mysql.NewConn(backendSide, 0, 0), Caps: mysql.ClientProtocol41 | mysql.ClientDeprecateEOF | mysql.ClientSessionTrack}
	client := mysql.NewConn(&cannedConn{}, 0, 0)
	x := New(nil, 0, 0).NewExecutor(&oneConn{bc}, &discardWriter{client})
	query := append([]byte{mysql.ComQuery}, "SELECT c FROM sbtest1 WHERE id=5000"...)
	b.ReportAllocs()
	for b.Loop() {
		res, err := x.Forward("node1", query, false, false, RelayResult)
		if err != nil || !res.OK {
			b.Fatal(res, err)
		}
		client.ResetSeq()
	}
	if x.Rows == 0 {
		b.Fatal("no rows relayed")
	}
}
