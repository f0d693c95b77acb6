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
	in    []byte // decompressed bytes not yet consumed
	inBuf bytes.Buffer
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

func (r zReader) Read(p []byte) (int, error) {
	z := r.z
	for len(z.in) == 0 {
		if err := z.readPacket(); err != nil {
			return 0, err
		}
	}
	n := copy(p, z.in)
	z.in = z.in[n:]
	return n, nil
}

func (z *compressState) readPacket() error {
	var h [7]byte
	if _, err := io.ReadFull(z.raw, h[:]); err != nil {
		return err
	}
	clen := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	z.seq = h[3] + 1
	ulen := int(h[4]) | int(h[5])<<8 | int(h[6])<<16
	z.inBuf.Reset()
	if ulen == 0 {
		if _, err := io.CopyN(&z.inBuf, z.raw, int64(clen)); err != nil {
			return unexpectedEOF(err)
		}
		z.in = z.inBuf.Bytes()
		return nil
	}
	lr := io.LimitReader(z.raw, int64(clen))
	var err error
	if z.zr == nil {
		z.zr, err = zlib.NewReader(lr)
	} else {
		err = z.zr.(zlib.Resetter).Reset(lr, nil)
	}
	if err != nil {
		return ErrMalformedPacket
	}
	z.inBuf.Grow(ulen)
	if _, err := io.CopyN(&z.inBuf, z.zr, int64(ulen)); err != nil {
		return ErrMalformedPacket
	}
	// Drain whatever is left of the compressed payload (e.g. the adler32
	// trailer) so the next header starts where it should.
	if _, err := io.Copy(io.Discard, lr); err != nil {
		return unexpectedEOF(err)
	}
	z.in = z.inBuf.Bytes()
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
