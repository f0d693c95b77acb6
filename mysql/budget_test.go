package mysql

import (
	"bytes"
	"errors"
	"testing"
)

// TestBudgetError: ErrPacketMemory is ER_OUT_OF_RESOURCES with MySQL's
// SQLSTATE.
func TestBudgetError(t *testing.T) {
	if ErOutOfResources != 1041 || ErrPacketMemory.Code != 1041 || ErrPacketMemory.State != "HY000" {
		t.Errorf("ErrPacketMemory = %v, want 1041 (HY000)", ErrPacketMemory)
	}
}

// TestBudgetSharedByConns: Conns sharing a Budget take from it as their
// packets' buffers grow and give it back at their next read (or Release);
// the packet that does not fit gets ErrPacketMemory, after its rest is
// read and dropped, and the Conn reads the next packet normally.
func TestBudgetSharedByConns(t *testing.T) {
	big := pattern(300<<10, 1)
	b := NewBudget(700 << 10)
	stream := cat(rawPacket(0, big), rawPacket(1, []byte("next")))
	a := readerConn(stream, testBuf)
	c := readerConn(stream, testBuf)
	for _, x := range []*Conn{a, c} {
		x.Budget, x.DiscardOversized = b, true
	}
	p, err := a.ReadPacket()
	if err != nil || !bytes.Equal(p, big) {
		t.Fatalf("first conn: %d bytes, %v", len(p), err)
	}
	held := b.InUse()
	if held < int64(len(big)) || held > 2*int64(len(big)) {
		t.Errorf("held %d KiB for a 300 KiB packet, want between 300 and 600", held>>10)
	}
	// The second Conn's buffer would pass the limit: refused.
	if _, err := c.ReadPacket(); !errors.Is(err, ErrPacketMemory) {
		t.Fatalf("second conn: %v, want ErrPacketMemory", err)
	}
	if b.InUse() != held || b.Refused() != 1 {
		t.Errorf("after the refusal: in use %d (want %d), refused %d (want 1)", b.InUse(), held, b.Refused())
	}
	if p, err := c.ReadPacket(); err != nil || string(p) != "next" {
		t.Fatalf("second conn's next packet: %q, %v", p, err)
	}
	if p, err := a.ReadPacket(); err != nil || string(p) != "next" {
		t.Fatalf("first conn's next packet: %q, %v", p, err)
	}
	if b.InUse() != 0 {
		t.Errorf("in use after both read on: %d, want 0", b.InUse())
	}
	// Release gives back what the last packet holds.
	a = readerConn(rawPacket(0, big), testBuf)
	a.Budget = b
	if _, err := a.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	a.Release()
	if b.InUse() != 0 {
		t.Errorf("in use after Release: %d, want 0", b.InUse())
	}
}

// TestBudgetMemLimit: MemLimit bounds one Conn's buffer (ErrPacketTooLarge
// past it) and caps its growth: a packet just under it fits.
func TestBudgetMemLimit(t *testing.T) {
	limit := 200 << 10
	ok := pattern(limit, 2)
	c := readerConn(cat(rawPacket(0, ok), rawPacket(1, pattern(limit+1, 3)), rawPacket(2, []byte("x"))), testBuf)
	c.MemLimit, c.DiscardOversized = limit, true
	if p, err := c.ReadPacket(); err != nil || !bytes.Equal(p, ok) {
		t.Fatalf("a packet of the limit: %d bytes, %v", len(p), err)
	}
	if _, err := c.ReadPacket(); !errors.Is(err, ErrPacketTooLarge) {
		t.Fatalf("a packet past the limit: %v, want ErrPacketTooLarge", err)
	}
	if p, err := c.ReadPacket(); err != nil || string(p) != "x" {
		t.Fatalf("the next packet: %q, %v", p, err)
	}
}

// TestBudgetCompressionBomb: a compressed frame that inflates to 12 MiB
// costs what the Budget lends, not 12 MiB: frames inflate into the
// packet's buffer as it grows.
func TestBudgetCompressionBomb(t *testing.T) {
	n := 12 << 20
	logical := cat([]byte{byte(n), byte(n >> 8), byte(n >> 16), 0}, zeros(n))
	stream := compressedFrame(0, logical, true)
	if len(stream) > 64<<10 {
		t.Fatalf("bomb of %d bytes", len(stream))
	}
	b := NewBudget(1 << 20)
	c := readerConn(stream, testBuf)
	c.Budget = b
	c.EnableCompression()
	if _, err := c.ReadPacket(); !errors.Is(err, ErrPacketMemory) {
		t.Fatalf("ReadPacket: %v, want ErrPacketMemory", err)
	}
	if b.InUse() != 0 {
		t.Errorf("in use after the refusal: %d, want 0", b.InUse())
	}
}
