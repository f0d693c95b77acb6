package server_test

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// zframe returns one compressed-protocol frame (seq) carrying data, deflated.
func zframe(seq uint8, data []byte) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write(data)
	w.Close()
	c := b.Bytes()
	h := []byte{byte(len(c)), byte(len(c) >> 8), byte(len(c) >> 16), seq, byte(len(data)), byte(len(data) >> 8), byte(len(data) >> 16)}
	return append(h, c...)
}

// zframes cuts a logical stream into frames of at most size bytes, with
// sequence numbers from seq on.
func zframes(seq uint8, logical []byte, size int) [][]byte {
	var out [][]byte
	for len(logical) > 0 {
		k := min(size, len(logical))
		out = append(out, zframe(seq, logical[:k]))
		seq++
		logical = logical[k:]
	}
	return out
}

// lengthQuery returns the payload of a COM_QUERY of n bytes,
// SELECT LENGTH('xx...x'), and the length it answers.
func lengthQuery(n int) ([]byte, int) {
	p := append([]byte{mysql.ComQuery}, "SELECT LENGTH('"...)
	x := n - len(p) - 2
	p = append(p, bytes.Repeat([]byte("x"), x)...)
	return append(p, "')"...), x
}

// hostileShape is how a hostile client sends its packet: the bytes (raw
// or compressed frames) it sends and then stops, and the bytes that
// would finish the packet (nil: it never does).
type hostileShape struct {
	name       string
	compressed bool
	sent, rest [][]byte
	respSeq    uint8 // the logical sequence number of the answer
	want       int   // LENGTH the finished query answers
}

// hostileShapes builds the shapes once: a 12 MiB query of which 8 MiB are
// sent (in one compressed frame of a few KiB, in 1 MiB frames, and
// uncompressed), and a query past 16 MiB (two physical packets, inflated
// from about 17 KiB) of which 16.5 MiB are sent.
func hostileShapes() []hostileShape {
	total, sent := 12<<20, 8<<20
	q, want := lengthQuery(total)
	logical := append([]byte{byte(total), byte(total >> 8), byte(total >> 16), 0}, q...)
	one := zframes(0, logical[:4+sent], len(logical))
	multi := zframes(0, logical[:4+sent], 1<<20)
	long, _ := lengthQuery(mysql.MaxPacketPayload + 1<<20)
	var ll []byte
	ll = append(ll, 0xff, 0xff, 0xff, 0)
	ll = append(ll, long[:mysql.MaxPacketPayload]...)
	rest := len(long) - mysql.MaxPacketPayload
	ll = append(ll, byte(rest), byte(rest>>8), byte(rest>>16), 1)
	ll = append(ll, long[mysql.MaxPacketPayload:mysql.MaxPacketPayload+512<<10]...)
	return []hostileShape{
		{name: "compressed, one frame", compressed: true, sent: one, rest: zframes(uint8(len(one)), logical[4+sent:], 1<<20), respSeq: 1, want: want},
		{name: "compressed, 1 MiB frames", compressed: true, sent: multi, rest: zframes(uint8(len(multi)), logical[4+sent:], 1<<20), respSeq: 1, want: want},
		{name: "uncompressed", sent: [][]byte{logical[:4+sent]}, rest: [][]byte{logical[4+sent:]}, respSeq: 1, want: want},
		{name: "compressed, two packets", compressed: true, sent: zframes(0, ll, 8<<20)},
	}
}

// readLength reads the answer to a lengthQuery: the length, or the ERR.
func (r *rawConn) readLength() (int, *mysql.SQLError) {
	r.t.Helper()
	p := r.read()
	if len(p) > 0 && p[0] == mysql.ErrHeader {
		return 0, mysql.ParseErr(p)
	}
	r.read() // the column
	n, err := strconv.Atoi(string(r.read()[1:]))
	if err != nil {
		r.t.Fatalf("the LENGTH row: %v", err)
	}
	if p := r.read(); !mysql.IsEOF(p) {
		r.t.Fatalf("got %s after the row, want the end", describe(p))
	}
	return n, nil
}

// TestPacketMemoryBudget (issue 32): 64 logged-in clients each send part
// of a large command and stop, in four shapes (a compressed frame of a
// few KiB that inflates to 8 MiB of an announced 12 MiB packet, the same
// in 1 MiB frames, 8 MiB uncompressed, and a 16.5 MiB start of a packet
// past 16 MiB inflated from about 17 KiB). Each used to make the proxy
// hold what it inflated to (64 such clients: 518 MiB); now the buffers
// of all of them take at most packet_memory_total (64 MiB here), the
// proxy's heap grows by less than twice that plus 32 MiB (buffers lent
// back wait for the collector), plain and compressed
// clients are served meanwhile, and a client whose packet did not fit
// gets 1041 once it has sent the rest, then its connection closes.
func TestPacketMemoryBudget(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.MaxAllowedPacket = 32 << 20
	cfg.PacketMemoryTotal = 64 << 20
	p := startProxy(t, cfg)
	shapes := hostileShapes()
	plain := openDB(t, p.dsn("", ""))
	zipped := openDB(t, p.dsn("", "compress=true"))
	queryValue(t, plain, "SELECT 1")
	queryValue(t, zipped, "SELECT 1")
	before := heapInUse()
	sysBefore := heapSys()

	const perShape = 16
	type client struct {
		r     *rawConn
		shape *hostileShape
	}
	var clients []client
	for i := range perShape * len(shapes) {
		sh := &shapes[i%len(shapes)]
		r := dialRaw(t, p.addr)
		caps := uint32(rawCaps)
		if sh.compressed {
			caps |= mysql.ClientCompress
		}
		r.login(caps)
		clients = append(clients, client{r, sh})
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for _, b := range c.shape.sent {
				c.r.nc.Write(b)
			}
		})
	}
	wg.Wait()
	// At most 64 MiB / 8 MiB clients can hold their packet; the others
	// are refused.
	eventually(t, 60*time.Second, "the packets that do not fit to be refused", func() bool {
		return p.srv.Stats().PacketMemoryRefused >= uint64(len(clients)-8)
	})
	grew := int64(heapInUse()) - int64(before)
	peak := int64(heapSys()) - int64(sysBefore)
	st := p.srv.Stats()
	inUse, refused := st.PacketMemoryInUse, st.PacketMemoryRefused
	t.Logf("%d hostile clients: heap in use +%d MiB, heap reserved +%d MiB, packet buffers %d MiB, %d refused", len(clients), grew>>20, peak>>20, inUse>>20, refused)
	if inUse > cfg.PacketMemoryTotal {
		t.Errorf("packet buffers hold %d MiB, over packet_memory_total", inUse>>20)
	}
	// The buffers in use, and as much again lent back and not yet
	// collected; the heap reserved, with the collector's slack (the race
	// detector's runs reserve more: 258 MiB seen at 64 MiB).
	if grew > 2*cfg.PacketMemoryTotal+32<<20 || peak > 4*cfg.PacketMemoryTotal+64<<20 {
		t.Errorf("the proxy's heap grew by %d MiB (reserved: %d MiB) under %d hostile clients (packet_memory_total %d MiB)", grew>>20, peak>>20, len(clients), cfg.PacketMemoryTotal>>20)
	}
	for _, db := range []querier{plain, zipped, openDB(t, p.dsn("", "compress=true"))} {
		if got := queryValue(t, db, "SELECT 'served'"); got != "served" {
			t.Errorf("a client meanwhile: %s", got)
		}
	}

	// Those that finish their packet: the answer, or 1041 and the end.
	answered, outOfMemory := 0, 0
	for _, c := range clients {
		if c.shape.rest == nil {
			c.r.nc.Close()
			continue
		}
		for _, b := range c.shape.rest {
			c.r.write0(b)
		}
		c.r.c.SetSeq(c.shape.respSeq)
		n, e := c.r.readLength()
		switch {
		case e == nil && n == c.shape.want:
			answered++
		case e != nil && e.Code == mysql.ErOutOfResources && e.State == "HY000":
			outOfMemory++
			c.r.expectClosed()
		default:
			t.Fatalf("%s: got %d, %v; want %d or ERR 1041", c.shape.name, n, e, c.shape.want)
		}
		c.r.nc.Close()
	}
	t.Logf("finished packets: %d answered, %d refused with 1041", answered, outOfMemory)
	if outOfMemory < 3*perShape-8 {
		t.Errorf("%d refused with 1041, want at least %d", outOfMemory, 3*perShape-8)
	}
	eventually(t, 10*time.Second, "the packet buffers to be given back", func() bool {
		return p.srv.Stats().PacketMemoryInUse == 0
	})
	// With the budget free again, a large command works, compressed too.
	for _, db := range []querier{plain, zipped} {
		big := string(bytes.Repeat([]byte("y"), 12<<20))
		if got := queryValue(t, db, "SELECT LENGTH('"+big+"')"); got != fmt.Sprint(len(big)) {
			t.Errorf("a 12 MiB command afterwards: %s", got)
		}
	}
}

// heapSys returns the bytes of address space the Go heap has reserved:
// it grows with the heap's peak, garbage included.
func heapSys() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapSys
}

// write0 sends bytes that already form frames or packets.
func (r *rawConn) write0(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}
