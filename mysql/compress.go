package mysql

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"io"
	"sync"
)

// minCompressLength is the payload size below which a compressed-protocol
// packet is sent uncompressed, as libmysqlclient does.
const minCompressLength = 50

// maxFrameData is the most logical bytes one frame the Conn writes
// carries. The protocol allows up to 16 MiB, and a packet may span frames
// (the server cuts its frames at its net buffer, 16 KiB by default): small
// frames keep what a connection holds while it writes to the frame size,
// whatever the response, and cost little compression (zlib's window is
// 32 KiB).
const maxFrameData = 64 << 10

// A zlib writer holds about 800 KiB and a reader about 40 KiB: they are
// lent per frame rather than kept per connection, so thousands of idle
// compressed connections hold none.
var (
	zWriters = sync.Pool{New: func() any { return &deflater{} }}
	zReaders sync.Pool // io.ReadCloser from zlib.NewReader
	zOuts    = sync.Pool{New: func() any { return new([maxFrameData]byte) }}
)

// deflater is a zlib writer with the buffer it writes into.
type deflater struct {
	zw  *zlib.Writer
	buf bytes.Buffer
}

// compressState implements the compressed protocol (CLIENT_COMPRESS) under
// the logical packet stream: 7-byte headers (compressed length, sequence
// number, uncompressed length) around zlib data. It has its own sequence
// counter, shared by both directions of one command exchange.
type compressState struct {
	raw  io.Reader // the connection's raw buffered reader
	rawW interface {
		Write([]byte) (int, error)
		Flush() error
	}
	seq   uint8
	turn  bool             // a frame was read since the last write (Conn.turn)
	lr    io.LimitedReader // the current frame's payload as sent
	frame io.Reader        // the current frame's payload as data (lr, or zr over lr)
	left  int              // bytes of data left in the current frame
	zr    io.ReadCloser    // lent from zReaders while a compressed frame is read
	out   []byte           // logical bytes waiting to be compressed, lent from zOuts between flushes
}

// EnableCompression switches c to the compressed protocol for everything
// after the current point. Call it right after the handshake's final OK
// packet has been flushed (or read, on the client side).
func (c *Conn) EnableCompression() {
	if c.wpool != nil {
		c.writer() // a compressed connection keeps its buffers
		c.wpool = nil
	}
	z := &compressState{raw: c.rawBR, rawW: c.rawBW}
	c.z = z
	c.br = bufio.NewReaderSize(zReader{z}, c.rawBR.Size())
	c.bw = bufio.NewWriterSize(zWriter{z}, c.rawBW.Size())
}

type zReader struct{ z *compressState }

// Read decompresses the current frame straight into p: nothing holds a
// whole frame, so a frame that declares (or inflates to) 16 MiB costs the
// zlib window and what the logical packet reader keeps of it, which
// max_allowed_packet bounds.
func (r zReader) Read(p []byte) (int, error) {
	z := r.z
	for z.left == 0 {
		if err := z.nextFrame(); err != nil {
			return 0, err
		}
	}
	if len(p) > z.left {
		p = p[:z.left]
	}
	n, err := z.frame.Read(p)
	z.left -= n
	switch {
	case z.left == 0:
		// Drain whatever is left of the compressed payload (the adler32
		// trailer) so the next header starts where it should.
		if _, derr := io.Copy(io.Discard, &z.lr); derr != nil {
			return n, unexpectedEOF(derr)
		}
		z.endFrame()
		err = nil
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if z.lr.N > 0 {
			return n, unexpectedEOF(err) // the connection ended inside the frame
		}
		return n, ErrBadPacket // the frame is shorter than it says
	case err != nil && z.frame != io.Reader(&z.lr):
		return n, ErrBadPacket
	}
	return n, err
}

// nextFrame reads a frame header and sets up the reading of its payload.
func (z *compressState) nextFrame() error {
	var h [7]byte
	if _, err := io.ReadFull(z.raw, h[:]); err != nil {
		return err
	}
	clen := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	z.seq, z.turn = h[3]+1, true
	ulen := int(h[4]) | int(h[5])<<8 | int(h[6])<<16
	z.lr = io.LimitedReader{R: z.raw, N: int64(clen)}
	if ulen == 0 {
		// Sent uncompressed.
		z.frame, z.left = &z.lr, clen
		return nil
	}
	var err error
	if zr, ok := zReaders.Get().(io.ReadCloser); ok {
		z.zr, err = zr, zr.(zlib.Resetter).Reset(&z.lr, nil)
	} else {
		z.zr, err = zlib.NewReader(&z.lr)
	}
	if err != nil {
		z.endFrame()
		return ErrBadPacket
	}
	z.frame, z.left = z.zr, ulen
	return nil
}

// endFrame lends the frame's zlib reader back, if it had one. A frame
// that fails midway keeps it: the connection ends.
func (z *compressState) endFrame() {
	if z.zr != nil {
		zReaders.Put(z.zr)
		z.zr = nil
	}
	z.frame = nil
}

type zWriter struct{ z *compressState }

// Write compresses p in frames of at most maxFrameData logical bytes; the
// last, partial frame waits for more or for flush.
func (w zWriter) Write(p []byte) (int, error) {
	z := w.z
	n := len(p)
	for len(p) > 0 {
		if z.out == nil {
			z.out = zOuts.Get().(*[maxFrameData]byte)[:0]
		}
		k := min(len(p), maxFrameData-len(z.out))
		z.out = append(z.out, p[:k]...)
		p = p[k:]
		if len(z.out) == maxFrameData {
			if err := z.writePacket(z.out); err != nil {
				return 0, err
			}
			z.out = z.out[:0]
		}
	}
	return n, nil
}

func (z *compressState) flush() error {
	if z.out != nil {
		if len(z.out) > 0 {
			if err := z.writePacket(z.out); err != nil {
				return err
			}
		}
		zOuts.Put((*[maxFrameData]byte)(z.out[:maxFrameData]))
		z.out = nil
	}
	return z.rawW.Flush()
}

func (z *compressState) writePacket(p []byte) error {
	var h [7]byte
	if len(p) < minCompressLength {
		return z.writeStored(p)
	}
	d := zWriters.Get().(*deflater)
	defer zWriters.Put(d)
	d.buf.Reset()
	if d.zw == nil {
		d.zw = zlib.NewWriter(&d.buf)
	} else {
		d.zw.Reset(&d.buf)
	}
	d.zw.Write(p)
	if err := d.zw.Close(); err != nil {
		return err
	}
	c := d.buf.Bytes()
	if len(c) >= len(p) {
		// Incompressible data: send it as is, as libmysqlclient does.
		return z.writeStored(p)
	}
	h = [7]byte{byte(len(c)), byte(len(c) >> 8), byte(len(c) >> 16), z.seq, byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16)}
	z.seq++
	z.rawW.Write(h[:])
	_, err := z.rawW.Write(c)
	return err
}

// writeStored writes p as a frame sent uncompressed.
func (z *compressState) writeStored(p []byte) error {
	h := [7]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), z.seq, 0, 0, 0}
	z.seq++
	z.rawW.Write(h[:])
	_, err := z.rawW.Write(p)
	return err
}
