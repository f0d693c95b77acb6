package mysql

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"io"
)

// minCompressLength is the payload size below which a compressed-protocol
// packet is sent uncompressed, as libmysqlclient does.
const minCompressLength = 50

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
	lr    io.LimitedReader // the current frame's payload as sent
	frame io.Reader        // the current frame's payload as data (lr, or zr over lr)
	left  int              // bytes of data left in the current frame
	zr    io.ReadCloser
	out   []byte // logical bytes waiting to be compressed
	zbuf  bytes.Buffer
	zw    *zlib.Writer
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
	z.seq = h[3] + 1
	ulen := int(h[4]) | int(h[5])<<8 | int(h[6])<<16
	z.lr = io.LimitedReader{R: z.raw, N: int64(clen)}
	if ulen == 0 {
		// Sent uncompressed.
		z.frame, z.left = &z.lr, clen
		return nil
	}
	var err error
	if z.zr == nil {
		z.zr, err = zlib.NewReader(&z.lr)
	} else {
		err = z.zr.(zlib.Resetter).Reset(&z.lr, nil)
	}
	if err != nil {
		return ErrBadPacket
	}
	z.frame, z.left = z.zr, ulen
	return nil
}

type zWriter struct{ z *compressState }

func (w zWriter) Write(p []byte) (int, error) {
	z := w.z
	z.out = append(z.out, p...)
	for len(z.out) >= MaxPacketPayload {
		if err := z.writePacket(z.out[:MaxPacketPayload]); err != nil {
			return 0, err
		}
		z.out = z.out[MaxPacketPayload:]
	}
	return len(p), nil
}

func (z *compressState) flush() error {
	if len(z.out) > 0 {
		if err := z.writePacket(z.out); err != nil {
			return err
		}
		z.out = z.out[:0]
	}
	return z.rawW.Flush()
}

func (z *compressState) writePacket(p []byte) error {
	var h [7]byte
	if len(p) < minCompressLength {
		h = [7]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), z.seq, 0, 0, 0}
		z.seq++
		z.rawW.Write(h[:])
		_, err := z.rawW.Write(p)
		return err
	}
	z.zbuf.Reset()
	if z.zw == nil {
		z.zw = zlib.NewWriter(&z.zbuf)
	} else {
		z.zw.Reset(&z.zbuf)
	}
	z.zw.Write(p)
	if err := z.zw.Close(); err != nil {
		return err
	}
	c := z.zbuf.Bytes()
	if len(c) >= len(p) {
		// Incompressible data: send it as is, as libmysqlclient does (the
		// zlib output could also overflow the 3-byte length).
		h = [7]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), z.seq, 0, 0, 0}
		z.seq++
		z.rawW.Write(h[:])
		_, err := z.rawW.Write(p)
		return err
	}
	h = [7]byte{byte(len(c)), byte(len(c) >> 8), byte(len(c) >> 16), z.seq, byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16)}
	z.seq++
	z.rawW.Write(h[:])
	_, err := z.rawW.Write(c)
	return err
}
