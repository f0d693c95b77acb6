// Command conns measures what client connections cost the proxy: the
// resident memory of many idle sessions, and whether many short-lived
// sessions (connect, one query, quit) leave goroutines, file descriptors or
// memory behind. It reads the proxy process from /proc and the proxy's
// /stats from its admin listener, and prints a Markdown report.
//
// Usage:
//
//	conns -addr 127.0.0.1:9694 -user root -password '' -db sbtest \
//	      -pid $(pidof proxy) -admin http://127.0.0.1:9794 \
//	      [-idle 5000] [-cycles 100000] [-workers 8]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

type sample struct {
	RSSKiB     int64
	FDs        int
	Goroutines int
	Sessions   int
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9694", "proxy address")
	user := flag.String("user", "root", "user")
	password := flag.String("password", "", "password")
	db := flag.String("db", "", "database")
	pid := flag.Int("pid", 0, "proxy process id (for RSS and file descriptors)")
	admin := flag.String("admin", "", "proxy admin base URL (for goroutines and sessions), e.g. http://127.0.0.1:9794")
	idle := flag.Int("idle", 5000, "idle connections to hold open at once")
	cycles := flag.Int("cycles", 100000, "connect-query-quit cycles")
	workers := flag.Int("workers", 8, "concurrent cycles and dials")
	query := flag.String("query", "SELECT 1", "the query each cycle runs")
	settle := flag.Duration("settle", 5*time.Second, "wait after each phase before measuring")
	flag.Parse()
	if *pid == 0 {
		fatal(errors.New("-pid is required"))
	}
	m := &meter{pid: *pid, admin: *admin}
	opts := backend.DialOptions{User: *user, Password: *password, DB: *db, DialTimeout: 10 * time.Second, NoDelay: true}

	// Warm up (the proxy's backend pool, its buffers) so that the
	// baseline is the proxy at work, not the proxy just started.
	var firstErr atomic.Value
	var cycleFailed atomic.Int64
	cycle := func(int) {
		c, err := backend.Dial(context.Background(), *addr, opts)
		if err == nil {
			_, err = c.Exec(*query)
			c.ResetSeq()
			if c.WritePacket([]byte{mysql.ComQuit}) == nil {
				c.Flush()
			}
			c.Close()
		}
		if err != nil {
			cycleFailed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		}
	}
	parallel(1000, *workers, cycle)
	time.Sleep(*settle)
	base := m.sample()
	fmt.Printf("## Client connections\n\n")
	fmt.Printf("Proxy pid %d, %s; client: %d workers, GOMAXPROCS %d.\n\n", *pid, *addr, *workers, runtime.GOMAXPROCS(0))
	fmt.Printf("| phase | proxy RSS MiB | fds | goroutines | sessions | note |\n|---|---:|---:|---:|---:|---|\n")
	row := func(phase string, s sample, note string) {
		fmt.Printf("| %s | %.1f | %d | %d | %d | %s |\n", phase, float64(s.RSSKiB)/1024, s.FDs, s.Goroutines, s.Sessions, note)
	}
	row("baseline", base, "after 1000 warm-up cycles")

	// Short-lived sessions.
	start := time.Now()
	parallel(*cycles, *workers, cycle)
	took := time.Since(start)
	after, waited := m.settled(*settle, time.Minute)
	row(fmt.Sprintf("%d cycles", *cycles), after, fmt.Sprintf("%.0f cycles/s, %d failed; measured %.0f s after the last one, when RSS had settled", float64(*cycles)/took.Seconds(), cycleFailed.Load(), waited.Seconds()))
	// Idle connections: dial them all, run one query on each, hold them.
	conns := make([]*backend.Conn, *idle)
	start = time.Now()
	var failed atomic.Int64
	parallel(*idle, *workers, func(i int) {
		c, err := backend.Dial(context.Background(), *addr, opts)
		if err == nil {
			_, err = c.Exec(*query)
		}
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			if c != nil {
				c.Close()
			}
			return
		}
		conns[i] = c
	})
	took = time.Since(start)
	time.Sleep(*settle)
	peak := m.sample()
	per := float64(peak.RSSKiB-base.RSSKiB) / float64(*idle)
	row(fmt.Sprintf("%d idle", *idle), peak, fmt.Sprintf("opened in %.1f s, %d failed, %.1f KiB RSS per connection", took.Seconds(), failed.Load(), per))
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	time.Sleep(*settle)
	row("idle closed", m.sample(), "")

	fmt.Println()
	fmt.Printf("After the cycles against the baseline: goroutines %+d, fds %+d, RSS %+.1f MiB.\n",
		after.Goroutines-base.Goroutines, after.FDs-base.FDs, float64(after.RSSKiB-base.RSSKiB)/1024)
	if e := firstErr.Load(); e != nil {
		fmt.Printf("First error: %s\n", e)
	}
	if failed.Load() > 0 || cycleFailed.Load() > 0 {
		os.Exit(1)
	}
}

// parallel runs f(0..n-1) on w goroutines.
func parallel(n, w int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

type meter struct {
	pid   int
	admin string
}

// settled waits at least min, then samples every 2 s until RSS changes by
// less than 1% between samples or max has passed (the Go runtime returns
// freed memory to the OS gradually).
func (m *meter) settled(min, max time.Duration) (sample, time.Duration) {
	start := time.Now()
	time.Sleep(min)
	s := m.sample()
	for time.Since(start) < max {
		time.Sleep(2 * time.Second)
		n := m.sample()
		d := n.RSSKiB - s.RSSKiB
		s = n
		if d < 0 {
			d = -d
		}
		if d*100 < s.RSSKiB {
			break
		}
	}
	return s, time.Since(start)
}

func (m *meter) sample() sample {
	var s sample
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.pid)); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				s.RSSKiB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.pid)); err == nil {
		s.FDs = len(ents)
	}
	if m.admin != "" {
		resp, err := http.Get(m.admin + "/stats")
		if err == nil {
			var st struct {
				Sessions   int `json:"sessions"`
				Goroutines int `json:"goroutines"`
			}
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			s.Sessions, s.Goroutines = st.Sessions, st.Goroutines
		}
	}
	return s
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "conns:", err)
	os.Exit(2)
}
