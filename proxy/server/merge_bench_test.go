package server_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/server"
)

// fakeBackend is a minimal MySQL server for in-process benchmarks: it
// accepts any login and answers every COM_QUERY with a canned response
// chosen by answer. Responses are encoded once, so the backend side adds
// almost nothing to the allocations a benchmark measures.
type fakeBackend struct {
	l      net.Listener
	answer func(query []byte) *canned
	wg     sync.WaitGroup
}

// canned is a pre-encoded result set: column definitions and text rows.
type canned struct {
	cols [][]byte
	rows [][]byte
}

// newCanned encodes a result set whose columns are all BIGINT except
// those named in decimals, which are DECIMAL.
func newCanned(names []string, decimals map[string]bool, rows [][]string) *canned {
	c := &canned{}
	for _, n := range names {
		col := &mysql.Column{Catalog: "def", Schema: "bench", Table: "t", OrgTable: "t", Name: n, OrgName: n,
			Charset: 63, Length: 20, Type: mysql.TypeLongLong, Flags: mysql.FlagNotNull}
		if decimals[n] {
			col.Type, col.Length, col.Flags = mysql.TypeNewDecimal, 42, 0
		}
		c.cols = append(c.cols, mysql.AppendColumn(nil, col))
	}
	for _, r := range rows {
		vals := make([][]byte, len(r))
		for i, v := range r {
			vals[i] = []byte(v)
		}
		c.rows = append(c.rows, mysql.AppendTextRow(nil, vals))
	}
	return c
}

func startFakeBackend(tb testing.TB, answer func([]byte) *canned) *fakeBackend {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakeBackend{l: l, answer: answer}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for id := uint32(1); ; id++ {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer nc.Close()
				f.serve(nc, id)
			}()
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		f.wg.Wait()
	})
	return f
}

const fakeCaps = mysql.ClientLongPassword | mysql.ClientLongFlag | mysql.ClientConnectWithDB |
	mysql.ClientProtocol41 | mysql.ClientTransactions | mysql.ClientSecureConnection |
	mysql.ClientMultiStatements | mysql.ClientMultiResults | mysql.ClientPSMultiResults |
	mysql.ClientPluginAuth | mysql.ClientPluginAuthLenencClientData | mysql.ClientDeprecateEOF |
	mysql.ClientFoundRows | mysql.ClientLocalFiles

func (f *fakeBackend) serve(nc net.Conn, id uint32) {
	c := mysql.NewConn(nc, 16<<10, 16<<10)
	salt := bytes.Repeat([]byte{'s'}, 20)
	if c.WritePacket(mysql.AppendHandshake(nil, &mysql.Handshake{ServerVersion: "10.11.0-MariaDB-fake", ConnectionID: id,
		Salt: salt, Capabilities: fakeCaps, Charset: 45, Status: mysql.StatusAutocommit, AuthPlugin: mysql.AuthNativePassword})) != nil ||
		c.Flush() != nil {
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
		if err != nil || len(p) == 0 {
			return
		}
		switch p[0] {
		case mysql.ComQuit:
			return
		case mysql.ComSetOption:
			err = c.WritePacket(eof)
		case mysql.ComQuery:
			r := f.answer(p[1:])
			if r == nil {
				err = c.WritePacket(ok) // SET NAMES, DO, ...
				break
			}
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
		default: // COM_PING, COM_INIT_DB, COM_RESET_CONNECTION, COM_CHANGE_USER
			err = c.WritePacket(ok)
		}
		if err != nil || c.Flush() != nil {
			return
		}
	}
}

// benchClient is a bare protocol client: it reads result rows without
// decoding them, so what a benchmark allocates is the proxy's.
type benchClient struct {
	c *mysql.Conn
}

func dialBench(tb testing.TB, addr, db string) *benchClient {
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
	caps := uint32(mysql.ClientProtocol41 | mysql.ClientSecureConnection | mysql.ClientPluginAuth |
		mysql.ClientConnectWithDB | mysql.ClientDeprecateEOF | mysql.ClientTransactions | mysql.ClientLongPassword)
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
			return &benchClient{c: c}
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

// query runs a text query and returns the number of rows (DEPRECATE_EOF
// framing: column count, definitions, rows, OK/EOF).
func (bc *benchClient) query(q []byte) (int, error) {
	bc.c.ResetSeq()
	if err := bc.c.WritePacket(q); err != nil {
		return 0, err
	}
	if err := bc.c.Flush(); err != nil {
		return 0, err
	}
	p, err := bc.c.ReadPacket()
	if err != nil {
		return 0, err
	}
	if p[0] == mysql.ErrHeader {
		return 0, mysql.ParseErr(p)
	}
	n, _, _ := mysql.ReadLenEncInt(p)
	for range n {
		if _, err := bc.c.ReadPacket(); err != nil {
			return 0, err
		}
	}
	rows := 0
	for {
		p, err := bc.c.ReadPacket()
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

// mergeBenchProxy starts the proxy with table bench.t hash-sharded into 8
// subtables (4 per node).
func mergeBenchProxy(b *testing.B, answer func([]byte) *canned) *benchClient {
	return benchProxy(b, answer, []config.ShardRule{{DB: "bench", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{4, 4}}})
}

// benchProxy starts the proxy over one fake backend that plays two nodes,
// with the given shard rules, and returns a client logged in to bench.
func benchProxy(b *testing.B, answer func([]byte) *canned, rules []config.ShardRule) *benchClient {
	f := startFakeBackend(b, answer)
	return dialBench(b, serveBenchProxy(b, f.l.Addr().String(), rules), "bench")
}

// serveBenchProxy starts the proxy over the server at backendAddr, which
// plays two nodes, with the given shard rules, and returns its address.
func serveBenchProxy(b *testing.B, backendAddr string, rules []config.ShardRule) string {
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Users = []config.User{{User: appUser, Password: appPassword}}
	for _, n := range []string{"node1", "node2"} {
		cfg.Nodes = append(cfg.Nodes, config.Node{Name: n, Master: backendAddr, User: "u", Password: "p",
			MaxConnsLimit: 16, DownAfterNoalive: 30})
	}
	cfg.Schemas = []config.Schema{{User: appUser, Nodes: []string{"node1", "node2"}, Default: "node1", Shard: rules}}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(cfg, server.Options{Log: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	b.Cleanup(func() {
		srv.Shutdown(b.Context())
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, server.ErrServerClosed) {
			b.Error(err)
		}
	})
	return l.Addr().String()
}

// runtimeAllocs counts heap allocations of the whole process between start
// and stop (runtime.MemStats.Mallocs).
type runtimeAllocs struct{ before uint64 }

func (r *runtimeAllocs) start() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.before = ms.Mallocs
}

func (r *runtimeAllocs) stop() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs - r.before
}

// BenchmarkMerge measures cross-shard merges over 8 subtables, each
// returning perTarget rows, with allocations per row read from the
// backends ("allocs/row") alongside the usual per-query figures.
func BenchmarkMerge(b *testing.B) {
	const perTarget = 1000
	num := func(i int) string { return strconv.Itoa(i) }
	var sorted, grouped, distinct [][]string
	for i := range perTarget {
		sorted = append(sorted, []string{num(i*8 + 1), num(i * 3)})
		grouped = append(grouped, []string{num(i), "3", num(i * 10)})
		distinct = append(distinct, []string{num(i)})
	}
	cases := []struct {
		name, sql string
		answer    *canned
		rows      int // rows the client gets
	}{
		{"concat", "SELECT id, k FROM t", newCanned([]string{"id", "k"}, nil, sorted), 8 * perTarget},
		{"sort", "SELECT id, k FROM t ORDER BY k", newCanned([]string{"id", "k"}, nil, sorted), 8 * perTarget},
		{"sort+limit", "SELECT id, k FROM t ORDER BY k LIMIT 10", newCanned([]string{"id", "k"}, nil, sorted[:10]), 10},
		{"group+aggregates", "SELECT g, COUNT(*), SUM(v) FROM t GROUP BY g",
			newCanned([]string{"g", "COUNT(*)", "SUM(v)"}, map[string]bool{"SUM(v)": true}, grouped), perTarget},
		{"distinct", "SELECT DISTINCT g FROM t", newCanned([]string{"g"}, nil, distinct), perTarget},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			bc := mergeBenchProxy(b, func(q []byte) *canned {
				if bytes.HasPrefix(q, []byte("SELECT")) {
					return tc.answer
				}
				return nil
			})
			q := append([]byte{mysql.ComQuery}, tc.sql...)
			n, err := bc.query(q)
			if err != nil {
				b.Fatal(err)
			}
			if n != tc.rows {
				b.Fatalf("%s: %d rows, want %d", tc.sql, n, tc.rows)
			}
			var ms runtimeAllocs
			ms.start()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := bc.query(q); err != nil && !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			backendRows := float64(len(tc.answer.rows) * 8)
			b.ReportMetric(float64(ms.stop())/float64(b.N)/backendRows, "allocs/row")
		})
	}
}
