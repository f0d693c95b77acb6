package server_test

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// BenchmarkTrackedPointSelect is BenchmarkPointSelect for a client that
// negotiated CLIENT_SESSION_TRACK, as sysbench's libmariadb does (its
// statements take the client-tracking path: the OK and EOF packets that
// end them pass through the session's trackers, proxy/server/track.go),
// beside the same client without it, over both result-set endings
// (libmariadb asks for CLIENT_DEPRECATE_EOF no more than for compression:
// its results end with an EOF packet). The client's trackers are the
// server's defaults (MariaDB 10.11's, read at login as the proxy reads
// them), except in "all", where they report everything as the proxy's
// backend connections do. Unsharded, one fake backend; client and backend
// allocate nothing per query, so allocs/op is the proxy's.
func BenchmarkTrackedPointSelect(b *testing.B) {
	row := newCanned([]string{"c"}, nil, [][]string{{"83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330"}})
	defaults := newCanned([]string{"v", "s", "c", "t"}, nil, [][]string{{
		"autocommit,character_set_client,character_set_connection,character_set_results,time_zone", "1", "0", "OFF"}})
	all := newCanned([]string{"v", "s", "c", "t"}, nil, [][]string{{"*", "1", "1", "CHARACTERISTICS"}})
	queries := make([][]byte, 256)
	for i := range queries {
		queries[i] = append([]byte{mysql.ComQuery}, "SELECT c FROM t WHERE id="+strconv.Itoa(1+i*37)...)
	}
	for _, tc := range []struct {
		name     string
		caps     uint32
		trackers *canned
	}{
		{"eof/untracked", 0, defaults},
		{"eof/tracked", mysql.ClientSessionTrack, defaults},
		{"eof/tracked-all", mysql.ClientSessionTrack, all},
		{"okeof/untracked", mysql.ClientDeprecateEOF, defaults},
		{"okeof/tracked", mysql.ClientDeprecateEOF | mysql.ClientSessionTrack, defaults},
	} {
		b.Run(tc.name, func(b *testing.B) {
			answer := func(q []byte) *canned {
				switch {
				case bytes.HasPrefix(q, []byte("SELECT @@")):
					return tc.trackers
				case bytes.HasPrefix(q, []byte("SELECT")):
					return row
				}
				return nil
			}
			addr := serveBenchProxy(b, startFakeBackend(b, answer).l.Addr().String(), nil)
			tc := dialTracked(b, addr, "bench", tc.caps)
			for _, q := range queries[:16] { // warm the pool
				if n, err := tc.query(q); err != nil || n != 1 {
					b.Fatalf("%s: %d rows, %v", q[1:], n, err)
				}
			}
			b.ReportAllocs()
			cpu := startCPU()
			i := 0
			for b.Loop() {
				if _, err := tc.query(queries[i%len(queries)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			cpu.report(b)
		})
	}
}

// processCPU is the CPU time (user and system) the test process used
// from startCPU on: on a shared machine, a benchmark's cpu-ns/op moves
// less than its ns/op with what else runs. It counts the client and the
// fake backend too, alike for every case.
type processCPU struct{ start time.Duration }

func startCPU() processCPU { return processCPU{start: cpuTime()} }

// report adds cpu-ns/op to b's results.
func (p processCPU) report(b *testing.B) {
	b.ReportMetric(float64(cpuTime()-p.start)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// trackedClient is a bare protocol client like benchClient that logs in
// with capabilities of its choosing (CLIENT_SESSION_TRACK,
// CLIENT_DEPRECATE_EOF) and reads either result-set ending.
type trackedClient struct {
	c    *mysql.Conn
	caps uint32
}

func dialTracked(tb testing.TB, addr, db string, extra uint32) *trackedClient {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	c := mysql.NewConn(nc, 64<<10, 16<<10)
	p, err := c.ReadPacket()
	if err != nil {
		tb.Fatal(err)
	}
	hs, err := mysql.ParseHandshake(p)
	if err != nil {
		tb.Fatal(err)
	}
	caps := mysql.ClientProtocol41 | mysql.ClientSecureConnection | mysql.ClientPluginAuth |
		mysql.ClientConnectWithDB | mysql.ClientTransactions | mysql.ClientLongPassword | extra
	resp := mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{Capabilities: caps, MaxPacket: 1 << 24,
		Charset: 45, User: appUser, AuthResponse: mysql.ScrambleNative(hs.Salt, appPassword), Database: db,
		AuthPlugin: mysql.AuthNativePassword})
	if err := c.WritePacket(resp); err != nil || c.Flush() != nil {
		tb.Fatal("handshake response:", err)
	}
	for {
		p, err := c.ReadPacket()
		if err != nil {
			tb.Fatal(err)
		}
		switch {
		case len(p) > 0 && p[0] == mysql.OKHeader:
			return &trackedClient{c: c, caps: caps}
		case len(p) > 0 && p[0] == mysql.AuthSwitch:
			_, data, err := mysql.ParseAuthSwitch(p)
			if err != nil {
				tb.Fatal(err)
			}
			if err := c.WritePacket(mysql.ScrambleNative(data, appPassword)); err != nil || c.Flush() != nil {
				tb.Fatal(err)
			}
		default:
			tb.Fatalf("login: %v", mysql.ParseErr(p))
		}
	}
}

// query runs a text query and returns the number of rows, reading the
// EOF after the column definitions unless the client asked for
// CLIENT_DEPRECATE_EOF.
func (tc *trackedClient) query(q []byte) (int, error) {
	tc.c.ResetSeq()
	if err := tc.c.WritePacket(q); err != nil {
		return 0, err
	}
	if err := tc.c.Flush(); err != nil {
		return 0, err
	}
	p, err := tc.c.ReadPacket()
	if err != nil {
		return 0, err
	}
	switch p[0] {
	case mysql.ErrHeader:
		return 0, mysql.ParseErr(p)
	case mysql.OKHeader:
		return 0, nil
	}
	n, _, _ := mysql.ReadLenEncInt(p)
	if tc.caps&mysql.ClientDeprecateEOF == 0 {
		n++
	}
	for range n {
		if _, err := tc.c.ReadPacket(); err != nil {
			return 0, err
		}
	}
	rows := 0
	for {
		p, err := tc.c.ReadPacket()
		if err != nil {
			return rows, err
		}
		if p[0] == mysql.EOFHeader && len(p) < 0xffffff {
			return rows, nil
		}
		if p[0] == mysql.ErrHeader {
			return rows, mysql.ParseErr(p)
		}
		rows++
	}
}

// BenchmarkTrackedWrite is an autocommit UPDATE through the proxy to a
// backend that reports, as MariaDB with binary logs does to the proxy's
// connections (which track every system variable), the GTID the
// statement wrote (last_gtid) in its OK: the OK passes through the
// client's trackers, which report nothing of it (defaults, "tracked"),
// everything ("tracked-all"), or is relayed without state to a client
// without CLIENT_SESSION_TRACK ("untracked").
func BenchmarkTrackedWrite(b *testing.B) {
	defaults := newCanned([]string{"v", "s", "c", "t"}, nil, [][]string{{
		"autocommit,character_set_client,character_set_connection,character_set_results,time_zone", "1", "0", "OFF"}})
	all := newCanned([]string{"v", "s", "c", "t"}, nil, [][]string{{"*", "1", "1", "CHARACTERISTICS"}})
	ok := mysql.AppendOKTracked(nil, mysql.OKHeader, mysql.OK{AffectedRows: 1, Status: mysql.StatusAutocommit},
		mysql.AppendStateChange(nil, mysql.TrackSystemVariables,
			mysql.AppendLenEncString(mysql.AppendLenEncString(nil, "last_gtid"), "0-3307-1234567")))
	queries := make([][]byte, 256)
	for i := range queries {
		queries[i] = append([]byte{mysql.ComQuery}, "UPDATE t SET k=k+1 WHERE id="+strconv.Itoa(1+i*37)...)
	}
	for _, tc := range []struct {
		name     string
		caps     uint32
		trackers *canned
	}{
		{"untracked", 0, defaults},
		{"tracked", mysql.ClientSessionTrack, defaults},
		{"tracked-all", mysql.ClientSessionTrack, all},
	} {
		b.Run(tc.name, func(b *testing.B) {
			addr := trackingBackendProxy(b, func(q []byte) (*canned, []byte) {
				if bytes.HasPrefix(q, []byte("SELECT @@")) {
					return tc.trackers, nil
				}
				if bytes.HasPrefix(q, []byte("UPDATE")) {
					return nil, ok
				}
				return nil, nil
			})
			c := dialTracked(b, addr, "bench", tc.caps)
			for _, q := range queries[:16] {
				if _, err := c.query(q); err != nil {
					b.Fatalf("%s: %v", q[1:], err)
				}
			}
			b.ReportAllocs()
			cpu := startCPU()
			i := 0
			for b.Loop() {
				if _, err := c.query(queries[i%len(queries)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			cpu.report(b)
		})
	}
}

// trackingBackendProxy starts the proxy, unsharded, over a fake backend
// that negotiates CLIENT_SESSION_TRACK with it (fakeBackend does not)
// and answers each COM_QUERY with answer's result set, or its OK packet
// (nil: a plain OK), and returns the proxy's address.
func trackingBackendProxy(b *testing.B, answer func(q []byte) (*canned, []byte)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for id := uint32(1); ; id++ {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				serveTracking(nc, id, answer)
			})
		}
	})
	return serveBenchProxy(b, l.Addr().String(), nil)
}

// serveTracking is fakeBackend.serve for trackingBackendProxy's fake.
func serveTracking(nc net.Conn, id uint32, answer func(q []byte) (*canned, []byte)) {
	c := mysql.NewConn(nc, 16<<10, 16<<10)
	salt := bytes.Repeat([]byte{'s'}, 20)
	if c.WritePacket(mysql.AppendHandshake(nil, &mysql.Handshake{ServerVersion: "10.11.0-MariaDB-fake", ConnectionID: id,
		Salt: salt, Capabilities: fakeCaps | mysql.ClientSessionTrack, Charset: 45, Status: mysql.StatusAutocommit,
		AuthPlugin: mysql.AuthNativePassword})) != nil || c.Flush() != nil {
		return
	}
	p, err := c.ReadPacket()
	if err != nil {
		return
	}
	hr, err := mysql.ParseHandshakeResponse(p)
	if err != nil {
		return
	}
	deprecateEOF := hr.Capabilities&mysql.ClientDeprecateEOF != 0
	ok := mysql.AppendOK(nil, mysql.OKHeader, mysql.OK{Status: mysql.StatusAutocommit})
	eof := mysql.AppendEOF(nil, 0, mysql.StatusAutocommit)
	end := eof
	if deprecateEOF {
		end = mysql.AppendOK(nil, mysql.EOFHeader, mysql.OK{Status: mysql.StatusAutocommit})
	}
	if c.WritePacket(ok) != nil || c.Flush() != nil {
		return
	}
	var count []byte
	for {
		c.ResetSeq()
		p, err := c.ReadPacket()
		if err != nil || len(p) == 0 || p[0] == mysql.ComQuit {
			return
		}
		switch r, rok := answer(p[1:]); {
		case p[0] == mysql.ComSetOption:
			err = c.WritePacket(eof)
		case p[0] != mysql.ComQuery || r == nil && rok == nil:
			err = c.WritePacket(ok)
		case r == nil:
			err = c.WritePacket(rok)
		default:
			count = mysql.AppendLenEncInt(count[:0], uint64(len(r.cols)))
			err = c.WritePacket(count)
			for _, col := range r.cols {
				if err == nil {
					err = c.WritePacket(col)
				}
			}
			if err == nil && !deprecateEOF {
				err = c.WritePacket(eof)
			}
			for _, row := range r.rows {
				if err == nil {
					err = c.WritePacket(row)
				}
			}
			if err == nil {
				err = c.WritePacket(end)
			}
		}
		if err != nil || c.Flush() != nil {
			return
		}
	}
}
