package mysql

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// testBuf is the buffer size of the Conns in framing tests: small enough
// that packets larger than the read buffer are cheap to build.
const testBuf = 4096

// framingSizes are payload sizes at every boundary of the framing code: the
// read buffer (a payload fits when 4+len <= buffer size) and the 16 MiB
// physical packet limit.
var framingSizes = []int{
	0, 1,
	testBuf - 4, testBuf - 3, testBuf, testBuf + 1,
	MaxPacketPayload - 1, MaxPacketPayload, MaxPacketPayload + 1,
	2 * MaxPacketPayload,
}

// physicalPackets is the number of physical packets a payload of n bytes
// takes: a payload of exactly k*MaxPacketPayload bytes ends with an empty
// packet.
func physicalPackets(n int) int { return n/MaxPacketPayload + 1 }

func TestPacketRoundTrip(t *testing.T) {
	for _, n := range framingSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w, r := pipeConns(t, testBuf)
			// Start near the top so the sequence number wraps.
			const start = 250
			w.SetSeq(start)
			r.SetSeq(start)
			payload := pattern(n, byte(n))
			want := uint8(start + physicalPackets(n))
			wait := goAsync(t, func() error {
				if err := w.WritePacket(payload); err != nil {
					return err
				}
				if w.Seq() != want {
					return fmt.Errorf("writer sequence after the packet = %d, want %d", w.Seq(), want)
				}
				if err := w.WritePacket([]byte("next")); err != nil {
					return err
				}
				return w.Flush()
			}, w, r)

			got, err := r.ReadPacket()
			if err != nil {
				t.Fatalf("ReadPacket: %v", err)
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("ReadPacket returned %d bytes, not the %d written", len(got), n)
			}
			if r.Seq() != want {
				t.Errorf("reader sequence = %d, want %d", r.Seq(), want)
			}
			// The following packet must start exactly where this one ended.
			got, err = r.ReadPacket()
			if err != nil || string(got) != "next" {
				t.Fatalf("second ReadPacket = %q, %v; want \"next\"", got, err)
			}
			if r.Seq() != want+1 {
				t.Errorf("reader sequence after the second packet = %d, want %d", r.Seq(), want+1)
			}
			if err := wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWritePacketWire(t *testing.T) {
	for _, n := range []int{0, 1, testBuf + 1, MaxPacketPayload - 1, MaxPacketPayload, MaxPacketPayload + 1, 2 * MaxPacketPayload} {
		payload := pattern(n, 7)
		var want []byte
		seq := uint8(3)
		for rest := payload; ; seq++ {
			k := min(len(rest), MaxPacketPayload)
			want = append(want, rawPacket(seq, rest[:k])...)
			rest = rest[k:]
			if k < MaxPacketPayload {
				break
			}
		}
		var out bytes.Buffer
		c := writerConn(&out, testBuf)
		c.SetSeq(3)
		if err := c.WritePacket(payload); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := out.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("WritePacket(%d bytes) wrote %d bytes, want %d; first header % x, want % x",
				n, len(got), len(want), got[:min(4, len(got))], want[:4])
		}
	}
}

func TestReadPacketContinuation(t *testing.T) {
	big := pattern(MaxPacketPayload, 1)
	tests := []struct {
		name   string
		stream []byte
		want   []byte
		seq    uint8
	}{
		{"exact multiple ends with an empty packet", cat(rawPacket(0, big), rawPacket(1, nil)), big, 2},
		{"three bytes more", cat(rawPacket(0, big), rawPacket(1, []byte("xyz"))), cat(big, []byte("xyz")), 2},
		{"two full packets", cat(rawPacket(0, big), rawPacket(1, big), rawPacket(2, nil)), cat(big, big), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := readerConn(tc.stream, testBuf)
			got, err := c.ReadPacket()
			if err != nil {
				t.Fatalf("ReadPacket: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("ReadPacket = %d bytes, want %d", len(got), len(tc.want))
			}
			if c.Seq() != tc.seq {
				t.Errorf("sequence = %d, want %d", c.Seq(), tc.seq)
			}
			if _, err := c.ReadPacket(); err != io.EOF {
				t.Errorf("ReadPacket at end = %v, want io.EOF", err)
			}
		})
	}
}

func TestReadPacketOutOfOrder(t *testing.T) {
	big := pattern(MaxPacketPayload, 1)
	tests := []struct {
		name   string
		stream []byte
	}{
		{"first packet", rawPacket(1, []byte("x"))},
		{"first large packet", rawPacket(9, pattern(2*testBuf, 0))},
		{"continuation", cat(rawPacket(0, big), rawPacket(5, []byte("x")))},
		{"repeated sequence number", cat(rawPacket(0, big), rawPacket(0, []byte("x")))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := readerConn(tc.stream, testBuf)
			_, err := c.ReadPacket()
			if !errors.Is(err, ErrOutOfOrder) {
				t.Fatalf("ReadPacket = %v, want ErrOutOfOrder", err)
			}
			if se := AsSQLError(err); se.Code != 1156 || se.State != "08S01" {
				t.Errorf("error = %d (%s), want 1156 (08S01)", se.Code, se.State)
			}
		})
	}
}

func TestReadPacketMaxPacket(t *testing.T) {
	tests := []struct {
		name    string
		bufSize int
		max     int
		size    int
		tooBig  bool
	}{
		{"small packet at the limit", testBuf, 100, 100, false},
		{"small packet over the limit", testBuf, 100, 101, true},
		{"large packet at the limit", 256, 1000, 1000, false},
		{"large packet over the limit", 256, 1000, 1001, true},
		{"continued packet at the limit", testBuf, MaxPacketPayload + 10, MaxPacketPayload + 10, false},
		{"continued packet over the limit", testBuf, MaxPacketPayload + 10, MaxPacketPayload + 11, true},
		{"no limit", testBuf, 0, MaxPacketPayload + 11, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stream bytes.Buffer
			w := writerConn(&stream, testBuf)
			if err := w.WritePacket(pattern(tc.size, 0)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			c := readerConn(stream.Bytes(), tc.bufSize)
			c.MaxPacket = tc.max
			p, err := c.ReadPacket()
			if tc.tooBig {
				if !errors.Is(err, ErrPacketTooLarge) {
					t.Fatalf("ReadPacket(%d bytes, limit %d) = %d bytes, %v; want ErrPacketTooLarge", tc.size, tc.max, len(p), err)
				}
				if se := AsSQLError(err); se.Code != 1153 || se.State != "08S01" {
					t.Errorf("error = %d (%s), want 1153 (08S01)", se.Code, se.State)
				}
				return
			}
			if err != nil || len(p) != tc.size {
				t.Fatalf("ReadPacket(%d bytes, limit %d) = %d bytes, %v", tc.size, tc.max, len(p), err)
			}
		})
	}
}

func TestReadPacketTruncated(t *testing.T) {
	big := pattern(MaxPacketPayload, 1)
	tests := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"nothing", nil, io.EOF},
		{"inside the header", []byte{0x05, 0x00}, io.ErrUnexpectedEOF},
		{"inside a small payload", rawPacket(0, []byte("hello"))[:6], io.ErrUnexpectedEOF},
		{"inside a large payload", rawPacket(0, pattern(3*testBuf, 0))[:2*testBuf], io.ErrUnexpectedEOF},
		{"before the continuation", rawPacket(0, big), io.ErrUnexpectedEOF},
		{"inside the continuation header", cat(rawPacket(0, big), []byte{0x01}), io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := readerConn(tc.stream, testBuf)
			if p, err := c.ReadPacket(); err != tc.want {
				t.Errorf("ReadPacket = %d bytes, %v; want %v", len(p), err, tc.want)
			}
		})
	}

	c := NewConn(&fakeConn{r: failReader{}}, testBuf, 0)
	if _, err := c.ReadPacket(); !errors.Is(err, errTestRead) {
		t.Errorf("ReadPacket on a failing reader = %v, want %v", err, errTestRead)
	}
}

func TestReadTimeout(t *testing.T) {
	w, r := pipeConns(t, testBuf)
	r.ReadTimeout = 20 * time.Millisecond
	if _, err := r.ReadPacket(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadPacket with nothing to read = %v, want a deadline error", err)
	}
	// The Conn stays usable after a timeout: the next read arms a new
	// deadline.
	wait := goAsync(t, func() error {
		if err := w.WritePacket([]byte("late")); err != nil {
			return err
		}
		return w.Flush()
	}, w, r)
	r.ReadTimeout = time.Minute
	if p, err := r.ReadPacket(); err != nil || string(p) != "late" {
		t.Fatalf("ReadPacket = %q, %v", p, err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
}

func TestConnAccessors(t *testing.T) {
	nc := &fakeConn{r: bytes.NewReader(cat(rawPacket(0, []byte("a")), rawPacket(1, []byte("bc"))))}
	c := NewConn(nc, 0, 0)
	if c.NetConn() != net.Conn(nc) {
		t.Error("NetConn is not the wrapped connection")
	}
	if c.Compressed() {
		t.Error("a new Conn is compressed")
	}
	if c.rawBR.Size() != 16<<10 || c.rawBW.Size() != 16<<10 {
		t.Errorf("default buffers = %d, %d; want 16 KiB", c.rawBR.Size(), c.rawBW.Size())
	}
	if _, err := c.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	if c.Buffered() != 6 {
		t.Errorf("Buffered = %d, want 6", c.Buffered())
	}
	c.SetSeq(7)
	if _, err := c.ReadPacket(); !errors.Is(err, ErrOutOfOrder) {
		t.Errorf("ReadPacket after SetSeq(7) = %v, want ErrOutOfOrder", err)
	}
	c.ResetSeq()
	if c.Seq() != 0 {
		t.Errorf("Seq after ResetSeq = %d", c.Seq())
	}
}

func TestWriteRaw(t *testing.T) {
	var out bytes.Buffer
	c := writerConn(&out, testBuf)
	raw := cat(rawPacket(4, []byte("x")), rawPacket(5, nil))
	if err := c.WriteRaw(raw); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Error("WriteRaw wrote through the buffer before Flush")
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), raw) || c.Seq() != 0 {
		t.Errorf("WriteRaw wrote % x (seq %d), want % x (seq 0)", out.Bytes(), c.Seq(), raw)
	}
}

func TestForwardPacket(t *testing.T) {
	tests := []struct {
		name  string
		seq   uint8
		size  int
		small bool
	}{
		{"empty", 0, 0, true},
		{"small", 7, 10, true},
		{"fills the read buffer", 1, testBuf - 4, true},
		{"one byte over the read buffer", 2, testBuf - 3, false},
		{"100 KiB", 255, 100 << 10, false},
		{"maximal physical packet", 3, MaxPacketPayload, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload := pattern(tc.size, tc.seq+1)
			raw := rawPacket(tc.seq, payload)
			src, peer := pipeConns(t, testBuf)
			wait := goAsync(t, func() error {
				_, err := peer.NetConn().Write(raw)
				return err
			}, src, peer)
			var out bytes.Buffer
			dst := writerConn(&out, testBuf)

			p, err := src.ForwardPacket(dst)
			if err != nil {
				t.Fatalf("ForwardPacket: %v", err)
			}
			if p.Seq != tc.seq || p.Len != tc.size {
				t.Errorf("Packet = seq %d, len %d; want %d, %d", p.Seq, p.Len, tc.seq, tc.size)
			}
			var first byte
			if tc.size > 0 {
				first = payload[0]
			}
			if p.First != first {
				t.Errorf("Packet.First = %#x, want %#x", p.First, first)
			}
			if tc.small {
				if p.Small == nil || !bytes.Equal(p.Small, payload) {
					t.Errorf("Packet.Small = %d bytes (nil %v), want the %d-byte payload", len(p.Small), p.Small == nil, tc.size)
				}
			} else if p.Small != nil {
				t.Errorf("Packet.Small = %d bytes, want nil for a packet larger than the read buffer", len(p.Small))
			}
			if src.Seq() != tc.seq+1 || dst.Seq() != tc.seq+1 {
				t.Errorf("sequence after forwarding = src %d, dst %d; want %d", src.Seq(), dst.Seq(), tc.seq+1)
			}
			if err := dst.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), raw) {
				t.Errorf("forwarded %d bytes, not the %d-byte packet", out.Len(), len(raw))
			}
			if err := wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestForwardPacketStream forwards a result set packet by packet and checks
// the destination receives the same bytes, in the same order.
func TestForwardPacketStream(t *testing.T) {
	var raw []byte
	sizes := []int{1, 40, 0, testBuf * 3, 5, MaxPacketPayload, 0, testBuf - 4, 9}
	for i, n := range sizes {
		raw = append(raw, rawPacket(uint8(i), pattern(n, byte(i)))...)
	}
	src, peer := pipeConns(t, testBuf)
	wait := goAsync(t, func() error {
		_, err := peer.NetConn().Write(raw)
		return err
	}, src, peer)
	var out bytes.Buffer
	dst := writerConn(&out, testBuf)
	for i, n := range sizes {
		p, err := src.ForwardPacket(dst)
		if err != nil {
			t.Fatalf("ForwardPacket %d: %v", i, err)
		}
		if int(p.Seq) != i || p.Len != n {
			t.Fatalf("packet %d = seq %d, len %d; want %d, %d", i, p.Seq, p.Len, i, n)
		}
	}
	if err := dst.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Errorf("forwarded stream differs: %d bytes, want %d", out.Len(), len(raw))
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
}

func TestForwardPacketErrors(t *testing.T) {
	small := rawPacket(0, pattern(100, 0))
	large := rawPacket(0, pattern(3*testBuf, 0))
	tests := []struct {
		name    string
		src     io.Reader
		dst     io.Writer
		want    error
		dstSide bool
	}{
		{"destination refuses a small packet", bytes.NewReader(small), failWriter{}, errTestWrite, true},
		{"destination refuses a large packet", bytes.NewReader(large), failWriter{}, errTestWrite, true},
		{"source ends inside a small packet", bytes.NewReader(small[:50]), io.Discard, io.ErrUnexpectedEOF, false},
		{"source ends inside a large packet", bytes.NewReader(large[:2*testBuf]), io.Discard, io.ErrUnexpectedEOF, false},
		{"source ends inside the header", bytes.NewReader(small[:2]), io.Discard, io.ErrUnexpectedEOF, false},
		{"source at EOF", bytes.NewReader(nil), io.Discard, io.EOF, false},
		{"source fails", failReader{}, io.Discard, errTestRead, false},
		{"source fails inside a large packet", io.MultiReader(bytes.NewReader(large[:testBuf]), failReader{}), io.Discard, errTestRead, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := NewConn(&fakeConn{r: tc.src}, testBuf, 0)
			// A write buffer of 16 bytes sends every packet straight to
			// the network, so a refusing peer shows up at once.
			dst := NewConn(&fakeConn{w: tc.dst}, 0, 16)
			_, err := src.ForwardPacket(dst)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ForwardPacket = %v, want %v", err, tc.want)
			}
			var de *DstError
			if errors.As(err, &de) != tc.dstSide {
				t.Errorf("ForwardPacket error %v: DstError = %v, want %v", err, !tc.dstSide, tc.dstSide)
			}
			if tc.dstSide && (de.Unwrap() != tc.want || de.Error() != "forward write: "+tc.want.Error()) {
				t.Errorf("DstError = %q unwrapping to %v", de.Error(), de.Unwrap())
			}
		})
	}
}

// packetStream returns 256 consecutive physical packets (sequence numbers
// 0..255) with payloads of n bytes, which a reader can loop over forever.
func packetStream(n int) []byte {
	var b []byte
	payload := pattern(n, 3)
	for seq := range 256 {
		b = append(b, rawPacket(uint8(seq), payload)...)
	}
	return b
}

func BenchmarkReadPacket(b *testing.B) {
	const n = 64
	c := NewConn(&fakeConn{r: &loopReader{data: packetStream(n)}}, 0, 0)
	b.SetBytes(n + 4)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ReadPacket(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWritePacket(b *testing.B) {
	for _, n := range []int{64, 8 << 10} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := writerConn(io.Discard, 0)
			payload := pattern(n, 0)
			b.SetBytes(int64(n + 4))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.WritePacket(payload); err != nil {
					b.Fatal(err)
				}
				if err := c.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkForwardPacket(b *testing.B) {
	for _, n := range []int{64, 8 << 10} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src := NewConn(&fakeConn{r: &loopReader{data: packetStream(n)}}, 0, 0)
			dst := writerConn(io.Discard, 0)
			b.SetBytes(int64(n + 4))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := src.ForwardPacket(dst); err != nil {
					b.Fatal(err)
				}
				if err := dst.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLendWriteBuffer checks that a Conn lending its write buffer writes
// the same bytes, holds no buffer between responses, and that two Conns
// sharing the pool never mix their output.
func TestLendWriteBuffer(t *testing.T) {
	var outA, outB, want bytes.Buffer
	a, b, ref := writerConn(&outA, testBuf), writerConn(&outB, testBuf), writerConn(&want, testBuf)
	a.LendWriteBuffer()
	b.LendWriteBuffer()
	if a.bw != nil || a.Flush() != nil {
		t.Fatal("a lending Conn holds a write buffer before writing, or fails an empty Flush")
	}
	for round, n := range []int{0, 10, testBuf - 4, testBuf + 100, 3 * testBuf} {
		for _, c := range []*Conn{a, b, ref} {
			c.ResetSeq()
			if err := c.WritePacket(pattern(n, byte(round))); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteRaw(rawPacket(1, pattern(5, 9))); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []*Conn{a, b, ref} {
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if a.bw != nil || b.bw != nil {
			t.Fatalf("round %d: a flushed Conn still holds its write buffer", round)
		}
	}
	if !bytes.Equal(outA.Bytes(), want.Bytes()) || !bytes.Equal(outB.Bytes(), want.Bytes()) {
		t.Fatalf("lending Conns wrote %d and %d bytes, want the %d bytes an owning Conn wrote", outA.Len(), outB.Len(), want.Len())
	}
}
