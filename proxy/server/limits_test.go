package server_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// heapInUse returns the bytes the Go heap holds after a collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	// Twice: the first collection moves sync.Pool contents to the pools'
	// victim caches, the second frees them (memory lent back is no
	// memory held).
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestLimitPreAuthPacket: before a client has logged in, a packet may be
// at most 64 KiB. 500 sockets that each announce a 16 MiB packet
// (ff ff ff 01) and trickle bytes used to cost 16 MiB each, allocated for
// the declared length; now each is closed at once, the proxy's heap grows
// by less than 100 MB while they are open, and a normal login works
// meanwhile.
func TestLimitPreAuthPacket(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	db := openDB(t, p.dsn("", ""))
	queryValue(t, db, "SELECT 1")
	before := heapInUse()
	var socks []*rawConn
	for range 500 {
		r := dialRaw(t, p.addr)
		if _, err := r.nc.Write(append([]byte{0xff, 0xff, 0xff, 0x01}, bytes.Repeat([]byte("x"), 100)...)); err != nil {
			t.Fatal(err)
		}
		socks = append(socks, r)
	}
	// Let the proxy read what the sockets sent.
	time.Sleep(time.Second)
	if got := queryValue(t, db, "SELECT 2"); got != "2" {
		t.Errorf("a logged-in client meanwhile: %s", got)
	}
	c := conn(t, openDB(t, p.dsn("", "")))
	if got := queryValue(t, c, "SELECT 3"); got != "3" {
		t.Errorf("a new login meanwhile: %s", got)
	}
	c.Close()
	grew := int64(heapInUse()) - int64(before)
	if grew > 100<<20 {
		t.Errorf("the proxy's heap grew by %d MiB for 500 unauthenticated sockets", grew>>20)
	}
	t.Logf("heap growth with 500 sockets announcing 16 MiB: %d KiB", grew>>10)
	eventually(t, 5*time.Second, "the packets to be counted", func() bool { return p.srv.Stats().PacketsTooLarge == 500 })
	for _, r := range socks[:5] {
		r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 512)
		var err error
		for err == nil {
			_, err = r.nc.Read(buf)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("an unauthenticated socket over the limit is still open after 5 s")
		}
	}
}

// TestLimitMaxAllowedPacket: a logged-in client's command is bounded by
// max_allowed_packet (error 1153, as the server answers), and so is the
// long data of one execution (error 1105 at the execution); within the
// bounds both work.
func TestLimitMaxAllowedPacket(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.MaxAllowedPacket = 1 << 20
	p := startProxy(t, cfg)

	r := dialRaw(t, p.addr)
	r.login(rawCaps)
	big := append([]byte{mysql.ComQuery}, "SELECT '"...)
	big = append(big, bytes.Repeat([]byte("y"), 2<<20)...)
	big = append(big, '\'')
	r.command(big)
	r.expectErr(mysql.ErNetPacketTooLarge)

	// go-sql-driver sends arguments larger than its maxAllowedPacket as
	// long data, in chunks.
	db := openDB(t, p.dsn("", "maxAllowedPacket=65536"))
	var n int
	if err := db.QueryRow("SELECT LENGTH(?)", bytes.Repeat([]byte("z"), 512<<10)).Scan(&n); err != nil || n != 512<<10 {
		t.Fatalf("512 KiB of long data: %d, %v", n, err)
	}
	err := db.QueryRow("SELECT LENGTH(?)", bytes.Repeat([]byte("z"), 2<<20)).Scan(&n)
	wantSQLError(t, err, mysql.ErUnknownError, "HY000")
	if err := db.QueryRow("SELECT LENGTH(?)", []byte("after")).Scan(&n); err != nil || n != 5 {
		t.Fatalf("the next execution: %d, %v", n, err)
	}
	if st := p.srv.Stats(); st.PacketsTooLarge != 1 || st.LongDataTooLarge != 1 {
		t.Errorf("counted %d packets and %d long data too large, want 1 and 1", st.PacketsTooLarge, st.LongDataTooLarge)
	}
}

// TestLimitAcceptEMFILE: when the process runs out of file descriptors,
// Accept fails with EMFILE; the proxy used to return from Serve and shut
// down. It now waits and retries: with the limit lowered and idle
// sockets holding every descriptor, it keeps listening, and once they
// close a login works.
func TestLimitAcceptEMFILE(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	db := openDB(t, p.dsn("", ""))
	queryValue(t, db, "SELECT 1") // the pool's connection is open before the limit

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(fds) + 40)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restore := func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }
	defer restore()
	var socks []net.Conn
	for range 300 {
		nc, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			break // this process is out of descriptors too
		}
		socks = append(socks, nc)
	}
	eventually(t, 5*time.Second, "Accept to fail for lack of descriptors", func() bool { return p.srv.Stats().AcceptErrors > 0 })
	for _, nc := range socks {
		nc.Close()
	}
	restore()
	select {
	case <-p.serveDone:
		t.Fatalf("Serve returned: %v", p.serveErr)
	case <-time.After(100 * time.Millisecond):
	}
	c := conn(t, openDB(t, p.dsn("", "")))
	if got := queryValue(t, c, "SELECT 2"); got != "2" {
		t.Errorf("a login after the sockets closed: %s", got)
	}
	t.Logf("%d sockets opened; %d accept errors waited out", len(socks), p.srv.Stats().AcceptErrors)
}

// TestLimitStalledReaders: 64 clients that send a query with a large
// result and stop reading used to hold all 64 pooled connections for good
// (a new client got 1040 after the acquire timeout). client_write_timeout
// ends them: the backend connections are closed (the server stops the
// statements) and a new client's SELECT 1 succeeds.
func TestLimitStalledReaders(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.Nodes[0].MaxConnsLimit = 64
	cfg.ClientWriteTimeout = 5 * time.Second
	cfg.Backend.AcquireTimeout = 10 * time.Second
	p := startProxy(t, cfg)
	for range 64 {
		r := dialRaw(t, p.addr)
		r.login(rawCaps)
		r.command(append([]byte{mysql.ComQuery}, "SELECT REPEAT('x', 200000) FROM mysql.seq_1_to_5000"...))
		// and never read
	}
	most := 0
	eventually(t, 15*time.Second, "the stalled statements to hold most of the pool", func() bool {
		most = max(most, p.srv.Stats().Nodes[0].InUse)
		return most >= 48
	})
	db := openDB(t, p.dsn("", ""))
	start := time.Now()
	if got := queryValue(t, db, "SELECT 1"); got != "1" {
		t.Fatalf("a new client's SELECT 1: %s", got)
	}
	t.Logf("a new client's SELECT 1 answered after %v", time.Since(start).Round(time.Millisecond))
	direct := openDB(t, directDSN(s, "", ""))
	eventually(t, 20*time.Second, "the stalled statements to end on the server", func() bool {
		return queryValue(t, direct, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT REPEAT%'") == "0"
	})
	if n := p.srv.Stats().WriteTimeouts; n == 0 {
		t.Errorf("no client_write_timeout counted")
	}
}

// TestLimitIdleInTransaction: a client idle inside a transaction longer
// than idle_in_transaction_timeout is disconnected, its transaction rolled
// back and its connection returned: the next client gets the one pooled
// connection. A client idle outside a transaction stays.
func TestLimitIdleInTransaction(t *testing.T) {
	s := backends(t)[0]
	cfg := onePoolConfig(t)
	cfg.IdleInTransactionTimeout = time.Second
	cfg.Backend.AcquireTimeout = 10 * time.Second
	p := startProxy(t, cfg)
	dbSetup(t, s, "idle_t")
	direct := openDB(t, directDSN(s, "idle_t", ""))
	mustExec(t, direct, "CREATE TABLE t (id INT PRIMARY KEY)")

	idle := conn(t, openDB(t, p.dsn("idle_t", "")))
	queryValue(t, idle, "SELECT 1")
	inTxn := conn(t, openDB(t, p.dsn("idle_t", "")))
	mustExec(t, inTxn, "BEGIN", "INSERT INTO t VALUES (1)")
	start := time.Now()
	next := conn(t, openDB(t, p.dsn("idle_t", "")))
	if got := queryValue(t, next, "SELECT COUNT(*) FROM t"); got != "0" {
		t.Errorf("the next client sees %s rows of an open transaction", got)
	}
	t.Logf("the next client got the connection after %v", time.Since(start).Round(time.Millisecond))
	if _, err := inTxn.ExecContext(t.Context(), "COMMIT"); err == nil {
		t.Errorf("COMMIT after the idle timeout succeeded")
	}
	if got := queryValue(t, direct, "SELECT COUNT(*) FROM t"); got != "0" {
		t.Errorf("%s rows committed", got)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := queryValue(t, idle, "SELECT 2"); got != "2" {
		t.Errorf("a client idle outside a transaction: %s", got)
	}
	if n := p.srv.Stats().IdleTxnClosed; n != 1 {
		t.Errorf("idle_in_transaction_closed = %d, want 1", n)
	}
}

// TestLimitUnauthenticated: connections that have not logged in are
// capped (max_unauthenticated_connections): past it a new connection
// used to get 1040 for as long as the idle sockets held their 10 s; now
// it takes the place of the oldest, which the proxy closes
// (handshake_test.go has the flood); once the idle sockets are gone,
// logins work.
func TestLimitUnauthenticated(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.MaxUnauthenticated = 50
	p := startProxy(t, cfg)
	var idle []net.Conn
	for range 50 {
		r := dialRaw(t, p.addr) // reads the greeting, sends nothing
		idle = append(idle, r.nc)
	}
	eventually(t, 5*time.Second, "50 connections logging in", func() bool { return p.srv.Stats().Unauthenticated == 50 })
	r := dialRaw(t, p.addr) // the 51st gets the greeting
	waitClosed(t, idle[0], 5*time.Second)
	if st := p.srv.Stats(); st.Unauthenticated > 50 || st.UnauthenticatedEvicted != 1 || st.UnauthenticatedRejected != 0 {
		t.Errorf("unauthenticated %d, evicted %d, rejected %d; want at most 50, 1 and 0", st.Unauthenticated, st.UnauthenticatedEvicted, st.UnauthenticatedRejected)
	}
	for _, nc := range append(idle, r.nc) {
		nc.Close()
	}
	eventually(t, 5*time.Second, "the idle sockets to go", func() bool { return p.srv.Stats().Unauthenticated == 0 })
	if got := queryValue(t, openDB(t, p.dsn("", "")), "SELECT 1"); got != "1" {
		t.Errorf("a login afterwards: %s", got)
	}
}

// TestLimitServerPreparedCount: the proxy caches prepared statements on
// pooled connections (up to 256 each); the server's
// max_prepared_stmt_count, shared by all connections, can run out first.
// Error 1461 used to reach the client; the connection now gives back its
// oldest cached statements and prepares again.
func TestLimitServerPreparedCount(t *testing.T) {
	s := backends(t)[0]
	direct := openDB(t, directDSN(s, "", ""))
	before := queryValue(t, direct, "SELECT @@GLOBAL.max_prepared_stmt_count")
	mustExec(t, direct, "SET GLOBAL max_prepared_stmt_count = 20")
	defer direct.Exec("SET GLOBAL max_prepared_stmt_count = " + before)
	cfg := onePoolConfig(t)
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("", ""))
	// Statements the client keeps open (closed ones are closed on the
	// backend too, and never fill the server's count).
	for i := range 60 {
		var v int
		q := fmt.Sprintf("SELECT ? + %d", i)
		ps, err := db.Prepare(q)
		if err != nil {
			t.Fatalf("prepare %s: %v", q, err)
		}
		defer ps.Close()
		if err := ps.QueryRow(1).Scan(&v); err != nil || v != i+1 {
			t.Fatalf("%s: %d, %v", q, v, err)
		}
	}
	if n := p.srv.Stats().Nodes[0].StmtEvictions; n == 0 {
		t.Errorf("no eviction counted")
	}
}

// TestLimitConcurrentMerges: a merge over four subtables of one node
// holds four of its connections at once. Merges used to take them one by
// one, so with a pool of four, two merges could each hold two and wait for
// the rest until the acquire timeout (1040). They now gather a node's
// connections one merge at a time: 8 clients running merges concurrently
// all succeed.
func TestLimitConcurrentMerges(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.Nodes[0].MaxConnsLimit = 4
	cfg.Backend.AcquireTimeout = 3 * time.Second
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "merge_t", Table: "m", Key: "id", Type: "hash",
		Nodes: []string{"node1"}, Locations: []int{4}}}
	p := startProxy(t, cfg)
	dbSetup(t, s, "merge_t")
	db := openDB(t, p.dsn("merge_t", ""))
	mustExec(t, db, "CREATE TABLE m (id INT PRIMARY KEY)", "INSERT INTO m (id) VALUES (1), (2), (3), (4)")
	errs := make(chan error, 8*10)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				var n int
				if err := db.QueryRow("SELECT COUNT(*) FROM m WHERE SLEEP(0.02) = 0").Scan(&n); err != nil || n != 4 {
					errs <- fmt.Errorf("%d, %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
