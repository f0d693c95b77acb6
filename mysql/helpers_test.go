package mysql

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when a test leaves a goroutine behind. Every
// goroutine a test starts is waited for through goAsync, so anything still
// running after m.Run is a leak in the test or in the code under test.
// The MariaDB server of the quoting round trips (quoteDB) is stopped here.
func TestMain(m *testing.M) {
	code := m.Run()
	stopQuoteServer()
	if code == 0 {
		if leaked := leakedGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of goroutines other than the main one
// that run code of this package. Goroutines that are already finishing get a
// short grace period: polling for a condition here is a leak check, not
// synchronisation between a test and its helpers.
func leakedGoroutines() string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		var leaked []string
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "shardgate/mysql.") && !strings.Contains(g, "mysql.TestMain") &&
				!strings.Contains(g, "mysql.leakedGoroutines") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
}

// goAsync runs f in a goroutine and returns a function that waits for its
// result. If the test ends before anyone waited, the cleanup closes cs (so a
// blocked f returns) and then waits, so no goroutine outlives its test.
func goAsync(t testing.TB, f func() error, cs ...io.Closer) func() error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	var (
		err  error
		done bool
	)
	wait := func() error {
		if !done {
			err, done = <-ch, true
		}
		return err
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
		wait()
	})
	return wait
}

// pipeConns returns two Conns joined by net.Pipe, with read and write buffers
// of bufSize bytes. Both are closed when the test ends.
func pipeConns(t testing.TB, bufSize int) (a, b *Conn) {
	t.Helper()
	na, nb := net.Pipe()
	t.Cleanup(func() {
		na.Close()
		nb.Close()
	})
	return NewConn(na, bufSize, bufSize), NewConn(nb, bufSize, bufSize)
}

// fakeConn is a net.Conn over an io.Reader and an io.Writer, for feeding a
// Conn fixed bytes and capturing exactly what it writes. A nil reader is at
// EOF; a nil writer discards.
type fakeConn struct {
	r io.Reader
	w io.Writer
}

func (c *fakeConn) Read(p []byte) (int, error) {
	if c.r == nil {
		return 0, io.EOF
	}
	return c.r.Read(p)
}

func (c *fakeConn) Write(p []byte) (int, error) {
	if c.w == nil {
		return len(p), nil
	}
	return c.w.Write(p)
}

func (c *fakeConn) Close() error                     { return nil }
func (c *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// readerConn returns a Conn that reads b and discards what it writes.
func readerConn(b []byte, readBuf int) *Conn {
	return NewConn(&fakeConn{r: bytes.NewReader(b)}, readBuf, 0)
}

// writerConn returns a Conn at EOF that writes into w.
func writerConn(w io.Writer, writeBuf int) *Conn {
	return NewConn(&fakeConn{w: w}, 0, writeBuf)
}

var (
	errTestWrite = errors.New("test: write refused")
	errTestRead  = errors.New("test: read refused")
)

// failWriter refuses every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errTestWrite }

// failReader refuses every read.
type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errTestRead }

// loopReader returns data over and over, for benchmarks that read an
// endless stream of packets.
type loopReader struct {
	data []byte
	pos  int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], r.data[r.pos:])
		n += k
		r.pos = (r.pos + k) % len(r.data)
	}
	return n, nil
}

// cat concatenates byte slices; tests use it to assemble expected packets
// field by field.
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// rawPacket returns one physical packet: a 4-byte header and the payload.
func rawPacket(seq uint8, payload []byte) []byte {
	n := len(payload)
	return cat([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload)
}

// pattern returns n bytes of a deterministic, mildly compressible pattern
// seeded by seed, so that a misplaced byte shows up in comparisons.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i/7) + seed
	}
	return b
}

// zeros returns n zero bytes.
func zeros(n int) []byte { return make([]byte, n) }
