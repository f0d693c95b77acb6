package mysql

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"sync"
	"time"
)

// ErrPacketTooLarge is returned when a packet exceeds the Conn's limit.
var ErrPacketTooLarge = NewError(ErNetPacketTooLarge, "Got a packet bigger than 'max_allowed_packet' bytes")

// ErrOutOfOrder is returned when a packet's sequence number is not the one
// expected.
var ErrOutOfOrder = NewError(ErNetPacketsOutOfOrder, "Got packets out of order")

// Conn frames MySQL packets over a net.Conn with a buffered reader and
// writer. It is used for both the client side (the proxy as server) and the
// backend side (the proxy as client).
//
// A Conn is owned by one goroutine at a time. Payloads returned by ReadPacket
// and ForwardPacket alias internal buffers and are valid until the next read.
// Writes are buffered until Flush: the proxy flushes once per response.
type Conn struct {
	nc  net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	seq uint8

	// MaxPacket bounds the size of one logical packet read by ReadPacket
	// (0 = no limit beyond memory).
	MaxPacket int

	// DiscardOversized makes ReadPacket read and drop the rest of a packet
	// over MaxPacket before it returns ErrPacketTooLarge, so the peer, who
	// has sent it whole, can read the error that follows instead of a
	// reset connection. Memory stays bounded; the time is the peer's.
	DiscardOversized bool

	// ReadTimeout, when set, is a deadline for each read from the network
	// (armed only when the read buffer runs dry, so buffered packets cost
	// nothing).
	ReadTimeout time.Duration

	// Budget, when set, is the memory c shares with other Conns for
	// packets that do not fit in its read buffer: ReadPacket takes from it
	// as the packet's buffer grows with the bytes that arrive (never with
	// the length a header announces, nor with what a compressed frame
	// says it inflates to), and gives it back at the next read or at
	// Release. A packet the Budget cannot hold ends with ErrPacketMemory.
	Budget *Budget

	// MemLimit, when set, bounds the buffer c holds for one packet (its
	// capacity, not only its length); a packet past it ends with
	// ErrPacketTooLarge like one past MaxPacket.
	MemLimit int

	large []byte // reusable buffer for packets that do not fit in br
	held  int    // bytes of Budget held for the last packet read
	cur   []byte // its buffer, from packetBufs
	hdr   [4]byte

	rawBR *bufio.Reader
	rawBW *bufio.Writer
	z     *compressState

	// wpool, when set, lends the write buffer per response: it is taken on
	// the first write and given back once Flush has emptied it, so an idle
	// connection holds none (see LendWriteBuffer).
	wpool *sync.Pool
	wsize int

	hold *holder // set between Hold and Unhold
}

// NewConn wraps nc with buffers of the given sizes (defaults when <= 0).
func NewConn(nc net.Conn, readBuf, writeBuf int) *Conn {
	if readBuf <= 0 {
		readBuf = 16 << 10
	}
	if writeBuf <= 0 {
		writeBuf = 16 << 10
	}
	c := &Conn{nc: nc, wsize: writeBuf}
	c.rawBR = bufio.NewReaderSize(nc, readBuf)
	c.rawBW = bufio.NewWriterSize(nc, writeBuf)
	c.br, c.bw = c.rawBR, c.rawBW
	return c
}

// writerPools holds lent write buffers by size.
var writerPools sync.Map // int -> *sync.Pool

// LendWriteBuffer makes c borrow its write buffer for each response and
// give it back when Flush empties it, instead of owning one: a server with
// thousands of idle clients then holds write buffers only for the
// responses in flight. Call it before the first write.
func (c *Conn) LendWriteBuffer() {
	size := c.wsize
	p, ok := writerPools.Load(size)
	if !ok {
		p, _ = writerPools.LoadOrStore(size, &sync.Pool{New: func() any { return bufio.NewWriterSize(nil, size) }})
	}
	c.wpool = p.(*sync.Pool)
	if c.bw != nil && c.bw.Buffered() == 0 {
		c.bw.Reset(nil)
		c.wpool.Put(c.bw)
		c.rawBW, c.bw = nil, nil
	}
}

// writer returns the write buffer, borrowing one if c has none.
func (c *Conn) writer() io.Writer {
	if c.hold != nil {
		return c.hold
	}
	return c.netWriter()
}

// netWriter is the buffer in front of the network.
func (c *Conn) netWriter() *bufio.Writer {
	if c.bw == nil {
		w := c.wpool.Get().(*bufio.Writer)
		w.Reset(c.nc)
		c.bw, c.rawBW = w, w
	}
	return c.bw
}

// TakeBuffered returns (a copy of) the bytes read from the network but not
// yet consumed, and drops them from c: a client that sends its TLS
// ClientHello right behind the SSLRequest has them here, and the TLS
// layer must read them first.
func (c *Conn) TakeBuffered() []byte {
	n := c.rawBR.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := c.rawBR.Peek(n)
	out := append([]byte(nil), b...)
	c.rawBR.Discard(n)
	return out
}

// UseConn makes c read and write through nc from now on: the TLS
// connection a client asked for, over the connection c had (see
// TakeBuffered for what c had buffered).
func (c *Conn) UseConn(nc net.Conn) {
	c.nc = nc
	c.rawBR.Reset(nc)
	if c.rawBW != nil {
		c.rawBW.Reset(nc)
	}
	c.br, c.bw = c.rawBR, c.rawBW
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the underlying connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Seq returns the sequence number the next packet will carry.
func (c *Conn) Seq() uint8 { return c.seq }

// SetSeq sets the sequence number of the next packet.
func (c *Conn) SetSeq(s uint8) { c.seq = s }

// ResetSeq starts a new command exchange: the next packet carries sequence
// number 0 (also for the compression layer).
func (c *Conn) ResetSeq() {
	c.seq = 0
	if c.z != nil {
		c.z.seq, c.z.turn = 0, false
	}
}

// turn starts the packets written after reading, under compression, at
// the frames' sequence number: MariaDB keeps the two equal (my_real_read
// sets pkt_nr from the frame, net_flush the frame's from pkt_nr), and
// clients expect the answer to a command sent in k frames to start at k
// (go-sql-driver's syncSequence warns otherwise).
func (c *Conn) turn() {
	if c.z != nil && c.z.turn {
		c.seq, c.z.turn = c.z.seq, false
	}
}

// WaitReadable blocks until the peer sends a byte (kept for the next
// read) or the connection fails: a watcher's view of a client that sends
// nothing while its statement runs. Only one goroutine may read c at a
// time: the owner must not read until WaitReadable has returned.
func (c *Conn) WaitReadable() error {
	_, err := c.br.Peek(1)
	return err
}

// Buffered reports how many bytes are waiting in the read buffer.
func (c *Conn) Buffered() int { return c.br.Buffered() }

// Compressed reports whether the compressed protocol is on.
func (c *Conn) Compressed() bool { return c.z != nil }

// arm sets the read deadline before a read that may reach the network.
func (c *Conn) arm(need int) {
	if c.ReadTimeout > 0 && c.br.Buffered() < need {
		c.nc.SetReadDeadline(time.Now().Add(c.ReadTimeout))
	}
}

// readHeader reads a packet header and checks its sequence number.
func (c *Conn) readHeader() (int, error) {
	c.arm(4)
	h, err := c.br.Peek(4)
	if err != nil {
		if len(h) > 0 {
			return 0, unexpectedEOF(err)
		}
		return 0, err
	}
	n := int(uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16)
	if h[3] != c.seq && c.z == nil {
		// Under compression the frames carry the sequence that counts:
		// MariaDB and its clients do not check the packets' own.
		return 0, ErrOutOfOrder
	}
	c.seq = h[3] + 1
	return n, nil
}

// ReadPacket reads one logical packet (joining continuation packets) and
// returns its payload. The payload is valid until the next read on c.
func (c *Conn) ReadPacket() ([]byte, error) {
	c.Release() // the last payload is no longer in use
	n, err := c.readHeader()
	if err != nil {
		return nil, err
	}
	if c.MaxPacket > 0 && n > c.MaxPacket {
		c.br.Discard(4)
		return nil, c.tooLarge(n, n == MaxPacketPayload, ErrPacketTooLarge)
	}
	if n < MaxPacketPayload && 4+n <= c.br.Size() {
		c.arm(4 + n)
		p, err := c.br.Peek(4 + n)
		if err != nil {
			return nil, unexpectedEOF(err)
		}
		c.br.Discard(4 + n)
		return p[4:], nil
	}
	c.br.Discard(4)
	buf, err := c.readLarge(n)
	if err != nil {
		c.Release()
		return nil, err
	}
	if cap(buf) <= maxKeptLarge {
		c.large, c.cur = buf, nil // keep moderate buffers for reuse; lend big ones
	}
	return buf, nil
}

// readLarge reads a logical packet that does not fit in the read buffer,
// whose first physical packet has n bytes (its header consumed).
func (c *Conn) readLarge(n int) ([]byte, error) {
	buf := c.large[:0]
	for {
		if c.MaxPacket > 0 && len(buf)+n > c.MaxPacket {
			return nil, c.tooLarge(n, n == MaxPacketPayload, ErrPacketTooLarge)
		}
		// The buffer grows with the bytes that arrive, not with the
		// length the header declares: it is filled with what the peer
		// has sent before it grows, so a peer that announces 16 MiB and
		// sends a trickle costs what it sent.
		for left := n; left > 0; {
			if len(buf) == cap(buf) {
				var err error
				if buf, err = c.grow(buf, left); err != nil {
					c.Release()
					return nil, c.tooLarge(left, n == MaxPacketPayload, err)
				}
			}
			if c.ReadTimeout > 0 {
				c.nc.SetReadDeadline(time.Now().Add(c.ReadTimeout))
			}
			k, err := c.br.Read(buf[len(buf):min(cap(buf), len(buf)+left)])
			buf, left = buf[:len(buf)+k], left-k
			if err != nil && left > 0 {
				return nil, unexpectedEOF(err)
			}
		}
		if n < MaxPacketPayload {
			return buf, nil
		}
		var err error
		if n, err = c.readHeader(); err != nil {
			return nil, unexpectedEOF(err)
		}
		c.br.Discard(4)
	}
}

// grow makes room in b, full, for more of a packet with left bytes to
// come: twice its capacity (so it holds at most twice what has arrived,
// and a 16 MiB packet is copied about once), within MaxPacket and
// MemLimit and with what the Budget lends. With a Budget, buffers come
// from and go back to packetBufs (a flood of refused packets would
// otherwise leave garbage faster than the collector frees it); without,
// the buffer never outgrows the packet.
func (c *Conn) grow(b []byte, left int) ([]byte, error) {
	need := len(b) + left
	size := max(2*cap(b), readChunk)
	if c.Budget == nil {
		size = min(max(size, len(b)+readChunk), need)
	}
	for _, limit := range [2]int{c.MaxPacket, c.MemLimit} {
		if limit > 0 && size > limit {
			if need > limit {
				return nil, ErrPacketTooLarge
			}
			size = limit
		}
	}
	if c.Budget == nil {
		nb := make([]byte, len(b), size)
		copy(nb, b)
		return nb, nil
	}
	if !c.Budget.take(int64(size - c.held)) {
		c.Budget.refused.Add(1)
		return nil, ErrPacketMemory
	}
	c.held = size
	nb := append(getPacketBuf(size), b...)
	if c.cur != nil {
		putPacketBuf(c.cur)
	}
	c.cur = nb
	return nb, nil
}

// Release gives back what c holds of its Budget for the last packet read
// (whose payload must no longer be used). ReadPacket calls it; the owner
// calls it once more when the connection ends.
func (c *Conn) Release() {
	if c.held > 0 {
		c.Budget.give(int64(c.held))
		c.held = 0
	}
	if c.cur != nil {
		putPacketBuf(c.cur)
		c.cur = nil
	}
}

// packetBufs lends the buffers of Conns with a Budget by capacity,
// readChunk << k for class k (up to 1 GiB). A buffer is lent until the
// next read: its payload's contract.
var packetBufs [15]sync.Pool // of *[]byte

// getPacketBuf returns an empty buffer of capacity size, lent when size is
// a class's.
func getPacketBuf(size int) []byte {
	k := bits.Len(uint(size-1) / readChunk)
	if k < len(packetBufs) && readChunk<<k == size {
		if p, ok := packetBufs[k].Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, size)
}

// putPacketBuf lends b again if its capacity is a class's.
func putPacketBuf(b []byte) {
	size := cap(b)
	k := bits.Len(uint(size-1) / readChunk)
	if k < len(packetBufs) && readChunk<<k == size {
		b = b[:0]
		packetBufs[k].Put(&b)
	}
}

// tooLarge returns err for a packet refused with left bytes of its
// current physical packet unread (more says that packet is full, so
// others continue it), after discarding them and the packets that
// continue it when DiscardOversized is set.
func (c *Conn) tooLarge(left int, more bool, err error) error {
	if !c.DiscardOversized {
		return err
	}
	for {
		if c.ReadTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(c.ReadTimeout))
		}
		if _, derr := c.br.Discard(left); derr != nil {
			return unexpectedEOF(derr)
		}
		if !more {
			return err
		}
		var herr error
		if left, herr = c.readHeader(); herr != nil {
			return unexpectedEOF(herr)
		}
		c.br.Discard(4)
		more = left == MaxPacketPayload
	}
}

// readChunk is the least step by which ReadPacket's buffer for a large
// packet grows.
const readChunk = 64 << 10

// maxKeptLarge bounds the buffer a Conn keeps for packets larger than its
// read buffer: thousands of connections that each once read a big packet
// must not each keep it.
const maxKeptLarge = 64 << 10

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WritePacket writes payload as one logical packet (splitting it into
// physical packets of at most MaxPacketPayload bytes) into the write buffer.
func (c *Conn) WritePacket(payload []byte) error {
	c.turn()
	for {
		n := len(payload)
		if n > MaxPacketPayload {
			n = MaxPacketPayload
		}
		c.hdr = [4]byte{byte(n), byte(n >> 8), byte(n >> 16), c.seq}
		c.seq++
		c.writer().Write(c.hdr[:])
		if _, err := c.writer().Write(payload[:n]); err != nil {
			return err
		}
		payload = payload[n:]
		if n < MaxPacketPayload {
			return nil
		}
	}
}

// Flush writes buffered packets to the network (while Hold holds them,
// nothing: Unhold decides).
func (c *Conn) Flush() error {
	if c.hold != nil && !c.hold.over {
		return nil
	}
	if c.bw == nil {
		return nil // nothing written since the last Flush
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	if c.z != nil {
		return c.z.flush()
	}
	if c.wpool != nil {
		w := c.bw
		w.Reset(nil)
		c.bw, c.rawBW = nil, nil
		c.wpool.Put(w)
	}
	return nil
}

// Packet describes one physical packet moved by ForwardPacket.
type Packet struct {
	Seq   uint8
	Len   int    // payload length
	First byte   // first payload byte (0 for an empty payload)
	Small []byte // the whole payload when it fit in the read buffer, else nil; valid until the next read
}

// ForwardPacket moves one physical packet from c to dst's write buffer
// without decoding it: the header is kept, including its sequence number,
// and both connections' expected sequence numbers advance past it. Payloads
// larger than the read buffer are streamed in pieces, so memory stays bounded
// by the buffer sizes whatever the packet size.
func (c *Conn) ForwardPacket(dst *Conn) (Packet, error) {
	return c.forward(dst, false)
}

// ForwardPacketRenumbered is ForwardPacket with the packet's sequence
// number replaced by dst's next one: for merging several backends'
// responses into one client response.
func (c *Conn) ForwardPacketRenumbered(dst *Conn) (Packet, error) {
	return c.forward(dst, true)
}

func (c *Conn) forward(dst *Conn, renumber bool) (Packet, error) {
	c.arm(4)
	h, err := c.br.Peek(4)
	if err != nil {
		if len(h) > 0 {
			return Packet{}, unexpectedEOF(err)
		}
		return Packet{}, err
	}
	p := Packet{Len: int(uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16), Seq: h[3]}
	c.seq = p.Seq + 1
	dst.turn()
	// A compressed side numbers its packets from its frames: the other
	// side's numbers are not this side's.
	if renumber || c.z != nil || dst.z != nil {
		// The header lives in c's read buffer, which is consumed below:
		// rewriting it in place saves a copy.
		h[3] = dst.seq
		dst.seq++
	} else {
		dst.seq = p.Seq + 1
	}
	if 4+p.Len <= c.br.Size() {
		c.arm(4 + p.Len)
		b, err := c.br.Peek(4 + p.Len)
		if err != nil {
			return p, unexpectedEOF(err)
		}
		if p.Len > 0 {
			p.First = b[4]
		}
		p.Small = b[4:]
		_, err = dst.writer().Write(b)
		c.br.Discard(4 + p.Len)
		return p, dstErr(err)
	}
	if _, err := dst.writer().Write(h); err != nil {
		return p, dstErr(err)
	}
	c.br.Discard(4)
	if f, err := c.br.Peek(1); err == nil {
		p.First = f[0]
	}
	// Copy through a bounded chunk loop so read and write failures stay
	// distinguishable.
	for left := p.Len; left > 0; {
		n := min(left, c.br.Size())
		c.arm(n)
		chunk, err := c.br.Peek(n)
		if len(chunk) == 0 {
			return p, fmt.Errorf("%w: %w", ErrForwardCut, unexpectedEOF(err))
		}
		if _, werr := dst.writer().Write(chunk); werr != nil {
			return p, dstErr(werr)
		}
		c.br.Discard(len(chunk))
		left -= len(chunk)
	}
	return p, nil
}

// PeekPacket returns the next packet's payload length and first byte
// without consuming it (first is 0 for an empty payload). It does not check
// the sequence number.
func (c *Conn) PeekPacket() (first byte, length int, err error) {
	c.arm(4)
	h, err := c.br.Peek(4)
	if err != nil {
		return 0, 0, err
	}
	length = int(uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16)
	if length == 0 {
		return 0, 0, nil
	}
	c.arm(5)
	h, err = c.br.Peek(5)
	if err != nil {
		return 0, 0, unexpectedEOF(err)
	}
	return h[4], length, nil
}

// PeekErrCode returns the error code of the next packet when it is an ERR
// packet, without consuming it; ok is false for any other packet.
func (c *Conn) PeekErrCode() (code uint16, ok bool, err error) {
	first, length, err := c.PeekPacket()
	if err != nil || first != ErrHeader || length < 3 {
		return 0, false, err
	}
	c.arm(7)
	h, err := c.br.Peek(7)
	if err != nil {
		return 0, false, unexpectedEOF(err)
	}
	return uint16(h[5]) | uint16(h[6])<<8, true, nil
}

// ErrForwardCut is wrapped by ForwardPacket's error when the source failed
// after part of a large packet was written to the destination: the
// destination's stream now ends inside a packet, so nothing more can be
// sent on it and the only clean answer is to close it.
var ErrForwardCut = errors.New("source failed in the middle of a forwarded packet")

// DstError wraps a failure to write to the destination in ForwardPacket, so
// callers can tell a vanished peer on the write side from a failing source.
type DstError struct{ Err error }

func (e *DstError) Error() string { return "forward write: " + e.Err.Error() }
func (e *DstError) Unwrap() error { return e.Err }

func dstErr(err error) error {
	if err == nil {
		return nil
	}
	return &DstError{Err: err}
}

// WriteRaw writes bytes that already form whole packets into the write
// buffer.
func (c *Conn) WriteRaw(b []byte) error {
	_, err := c.writer().Write(b)
	return err
}
