// Command hostile measures the proxy's resident memory under hostile
// clients (issue 32): logged-in clients that send part of a large command
// in compressed frames that inflate to megabytes and then stall,
// compressed clients that read large results, sockets that never log in,
// and sessions that prepare statements without closing them. It starts
// its own MariaDB (internal/mariadbtest) and the proxy binary given with
// -proxy as a process of its own, reads the proxy's RSS and peak RSS
// (VmRSS, VmHWM, reset per phase through /proc/PID/clear_refs) and prints
// a Markdown report.
//
// Usage:
//
//	hostile -proxy bin/proxy [-compressed 64] [-readers 200] [-silent 1000] [-prepare 7x20000]
package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
)

func main() {
	proxyBin := flag.String("proxy", "bin/proxy", "the proxy binary to measure")
	extra := flag.String("config", "", "lines added to the proxy's configuration (YAML)")
	compressed := flag.Int("compressed", 64, "clients that send 8 MiB (inflated from a few KiB) of a 12 MiB command and stall")
	readers := flag.Int("readers", 200, "compressed clients that read 1 MiB results, then idle")
	silent := flag.Int("silent", 1000, "sockets that never log in")
	prepare := flag.String("prepare", "7x20000", "sessions x statements prepared and never closed")
	settle := flag.Duration("settle", 3*time.Second, "wait before measuring the settled RSS of a phase")
	flag.Parse()
	dir, err := os.MkdirTemp("", "hostile")
	check(err)
	defer os.RemoveAll(dir)
	cl, err := mariadbtest.Start(filepath.Join(dir, "db"), 1)
	check(err)
	defer cl.Stop()
	b := &bench{settle: *settle, start: func() *proc { return startProxy(*proxyBin, dir, cl.Servers[0], *extra) }}
	b.header(*proxyBin, *extra)
	b.phase("idle (100 logins and queries)", func() string { return "" })
	b.phase(fmt.Sprintf("%d compressed floods, stalled", *compressed), func() string { return b.floods(*compressed) })
	b.phase(fmt.Sprintf("%d compressed clients read 1 MiB results, then idle", *readers), func() string { return b.readers(*readers) })
	b.phase(fmt.Sprintf("%d silent sockets", *silent), func() string { return b.silent(*silent) })
	var sessions, stmts int
	fmt.Sscanf(*prepare, "%dx%d", &sessions, &stmts)
	b.phase(fmt.Sprintf("%d sessions prepare %d statements each, never close", sessions, stmts), func() string { return b.prepared(sessions, stmts) })
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

// proc is the proxy process and how to reach it.
type proc struct {
	cmd      *exec.Cmd
	log      string // its output
	addr     string
	web      string // admin listener, for /stats
	user, pw string
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().String()
}

// startProxy writes a configuration with one node on s and starts the
// proxy; it returns once a client can log in.
func startProxy(bin, dir string, s *mariadbtest.Server, extra string) *proc {
	p := &proc{addr: freeAddr(), web: freeAddr(), user: "app", pw: "hostile"}
	cfg := fmt.Sprintf(`addr: %s
web_addr: %s
user_list:
  - user: %s
    password: %s
log_level: warn
nodes:
  - name: node1
    master: %s
    user: %s
    password: %s
    max_conns_limit: 64
schema_list:
  - user: %s
    nodes: [node1]
    default: node1
%s
`, p.addr, p.web, p.user, p.pw, s.Addr, s.User, s.Password, p.user, extra)
	path := filepath.Join(dir, "ks.yaml")
	check(os.WriteFile(path, []byte(cfg), 0o600))
	log, err := os.Create(filepath.Join(dir, "proxy.log"))
	check(err)
	p.log = log.Name()
	p.cmd = exec.Command(bin, "-config", path)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	check(p.cmd.Start())
	for i := 0; ; i++ {
		c, err := backend.Dial(context.Background(), p.addr, p.opts(0))
		if err == nil {
			c.Close()
			return p
		}
		if i == 100 {
			p.stop()
			check(fmt.Errorf("the proxy does not answer: %v (see %s)", err, log.Name()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *proc) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

func (p *proc) opts(variant uint32) backend.DialOptions {
	return backend.DialOptions{User: p.user, Password: p.pw, DialTimeout: 10 * time.Second, NoDelay: true, Variant: variant}
}

// login returns a logged-in client (compressed when variant says so).
func (p *proc) login(variant uint32) *backend.Conn {
	c, err := backend.Dial(context.Background(), p.addr, p.opts(variant))
	check(err)
	return c
}

// status reads VmRSS and VmHWM in KiB.
func (p *proc) status() (rss, hwm int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	check(err)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			rss, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) >= 2 && f[0] == "VmHWM:" {
			hwm, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return rss, hwm
}

type bench struct {
	start  func() *proc
	p      *proc
	settle time.Duration
	held   []closer
}

// closer is something a phase leaves open until it has been measured.
type closer interface{ Close() error }

func (b *bench) header(bin, extra string) {
	fmt.Printf("## Proxy memory under hostile clients\n\n")
	fmt.Printf("Proxy `%s`, one MariaDB node, a fresh proxy process per phase; extra configuration: %q. RSS is VmRSS from /proc, the peak VmHWM.\n\n", bin, extra)
	fmt.Printf("| phase | RSS before MiB | peak RSS MiB | RSS held MiB | note |\n|---|---:|---:|---:|---|\n")
}

// phase starts a proxy, warms it up (100 logins and queries), runs f
// (which leaves its clients in b.held), and measures the RSS while they
// are held and the peak; then it stops the proxy.
func (b *bench) phase(name string, f func() string) {
	b.p = b.start()
	defer b.p.stop()
	for range 100 {
		c := b.p.login(0)
		c.Exec("SELECT 1")
		c.Close()
	}
	time.Sleep(b.settle)
	before, _ := b.p.status()
	note := f()
	time.Sleep(b.settle)
	held, peak := b.p.status()
	if held == 0 {
		out, _ := os.ReadFile(b.p.log)
		fmt.Fprintf(os.Stderr, "hostile: the proxy exited during %q; its log ends with:\n%s\n", name, out[max(0, len(out)-4000):])
		note = "the proxy exited: " + note
	}
	for _, c := range b.held {
		c.Close()
	}
	b.held = nil
	mib := func(k int64) float64 { return float64(k) / 1024 }
	fmt.Printf("| %s | %.1f | %.1f | %.1f | %s |\n", name, mib(before), mib(peak), mib(held), note)
}

// lengthQuery is the logical stream of a COM_QUERY of n bytes,
// SELECT LENGTH('xx...x'), with its packet header.
func lengthQuery(n int) []byte {
	p := []byte{byte(n), byte(n >> 8), byte(n >> 16), 0, mysql.ComQuery}
	p = append(p, "SELECT LENGTH('"...)
	p = append(p, bytes.Repeat([]byte("x"), n-len(p)+4-2)...)
	return append(p, "')"...)
}

// zframe returns one compressed-protocol frame carrying data.
func zframe(seq uint8, data []byte) []byte {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(data)
	w.Close()
	c := z.Bytes()
	return append([]byte{byte(len(c)), byte(len(c) >> 8), byte(len(c) >> 16), seq, byte(len(data)), byte(len(data) >> 8), byte(len(data) >> 16)}, c...)
}

// floods: n compressed clients send the first 8 MiB of a 12 MiB command,
// inflated from one frame of a few KiB, and stall.
func (b *bench) floods(n int) string {
	q := lengthQuery(12 << 20)
	frame := zframe(0, q[:4+8<<20])
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range n {
		wg.Go(func() {
			c := b.p.login(mysql.ClientCompress)
			c.NetConn().Write(frame)
			mu.Lock()
			b.held = append(b.held, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	time.Sleep(b.settle)
	var st struct {
		InUse   int64  `json:"packet_memory_in_use"`
		Refused uint64 `json:"packet_memory_refused"`
	}
	if resp, err := http.Get("http://" + b.p.web + "/stats"); err == nil {
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
	}
	return fmt.Sprintf("%d bytes on the wire each (%d KiB inflated); /stats: packet memory %d MiB, %d refused", len(frame), (8<<20)>>10, st.InUse>>20, st.Refused)
}

// readers: n compressed clients each read ten 1 MiB results, then idle.
func (b *bench) readers(n int) string {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed atomic.Int64
	var firstErr atomic.Value
	for range n {
		wg.Go(func() {
			c := b.p.login(mysql.ClientCompress)
			for range 10 {
				if _, err := c.Exec("SELECT REPEAT('x', 1048576)"); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
			mu.Lock()
			b.held = append(b.held, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	e, _ := firstErr.Load().(string)
	return fmt.Sprintf("%d queries failed %s", failed.Load(), e)
}

// silent: n sockets read the greeting and send nothing; meanwhile a real
// client logs in.
func (b *bench) silent(n int) string {
	for range n {
		nc, err := net.DialTimeout("tcp", b.p.addr, 10*time.Second)
		if err != nil {
			break
		}
		b.held = append(b.held, nc)
	}
	start := time.Now()
	c, err := backend.Dial(context.Background(), b.p.addr, b.p.opts(0))
	if err == nil {
		_, err = c.Exec("SELECT 1")
		c.Close()
	}
	return fmt.Sprintf("a real client's login and SELECT 1 meanwhile: %v, %v", time.Since(start).Round(time.Millisecond), errOr(err))
}

// prepared: sessions prepare distinct statements and never close them
// (go-sql-driver, one connection each).
func (b *bench) prepared(sessions, stmts int) string {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, refused atomic.Int64
	var firstErr atomic.Value
	for s := range sessions {
		wg.Go(func() {
			db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/", b.p.user, b.p.pw, b.p.addr))
			check(err)
			c, err := db.Conn(context.Background())
			check(err)
			for i := range stmts {
				_, err := c.PrepareContext(context.Background(), fmt.Sprintf("SELECT %d, ? /* session %d */", i, s))
				var me *gomysql.MySQLError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &me):
					refused.Add(1)
					firstErr.CompareAndSwap(nil, me.Error())
				default:
					firstErr.CompareAndSwap(nil, err.Error())
					return
				}
			}
			mu.Lock()
			b.held = append(b.held, c, db)
			mu.Unlock()
		})
	}
	wg.Wait()
	e, _ := firstErr.Load().(string)
	return fmt.Sprintf("%d prepared, %d refused (first: %s)", ok.Load(), refused.Load(), e)
}

func errOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
