package mysql

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
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
	b := NewBudget(768 << 10)
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
	if held != 512<<10 {
		t.Errorf("held %d KiB for a 300 KiB packet, want 512 (its buffer's capacity)", held>>10)
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

// TestBudgetRefusedAcrossPackets: a packet refused inside its first,
// full physical packet is dropped with the packets that continue it, and
// the next packet reads normally.
func TestBudgetRefusedAcrossPackets(t *testing.T) {
	stream := cat(rawPacket(0, zeros(MaxPacketPayload)), rawPacket(1, zeros(100<<10)), rawPacket(2, []byte("next")))
	for _, tc := range []struct {
		name string
		set  func(c *Conn)
		want error
	}{
		{"budget", func(c *Conn) { c.Budget = NewBudget(1 << 20) }, ErrPacketMemory},
		{"MemLimit", func(c *Conn) { c.MemLimit = 1 << 20 }, ErrPacketTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := readerConn(stream, testBuf)
			c.DiscardOversized = true
			tc.set(c)
			if _, err := c.ReadPacket(); !errors.Is(err, tc.want) {
				t.Fatalf("ReadPacket: %v, want %v", err, tc.want)
			}
			if p, err := c.ReadPacket(); err != nil || string(p) != "next" {
				t.Fatalf("the next packet: %q, %v", p, err)
			}
		})
	}
}

// TestBudgetGrowsWithArrivals: a packet that announces 12 MiB and sends
// 1 MiB holds at most twice what arrived, compressed (a frame of a few
// KiB that inflates to the 1 MiB) or not.
func TestBudgetGrowsWithArrivals(t *testing.T) {
	n := 12 << 20
	logical := cat([]byte{byte(n), byte(n >> 8), byte(n >> 16), 0}, zeros(1<<20))
	for _, compressed := range []bool{false, true} {
		t.Run(fmt.Sprint("compressed=", compressed), func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			c := NewConn(b, testBuf, testBuf)
			c.Budget = NewBudget(0)
			sent := logical
			if compressed {
				c.EnableCompression()
				sent = compressedFrame(0, logical, true)
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.ReadPacket()
				done <- err
			}()
			// net.Pipe is unbuffered: once Write returns, the reader has
			// taken every byte (and inflates them as it reads on).
			if _, err := a.Write(sent); err != nil {
				t.Fatal(err)
			}
			for end := time.Now().Add(5 * time.Second); c.Budget.InUse() < 1<<20 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			if held := c.Budget.InUse(); held < 1<<20 || held > 2<<20 {
				t.Errorf("held %d KiB after 1 MiB of a 12 MiB packet arrived, want 1024 to 2048", held>>10)
			}
			a.Close()
			if err := <-done; err == nil {
				t.Errorf("ReadPacket of a cut packet succeeded")
			}
			if c.Release(); c.Budget.InUse() != 0 {
				t.Errorf("held %d after Release", c.Budget.InUse())
			}
		})
	}
}
