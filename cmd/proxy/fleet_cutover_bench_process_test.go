package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/move"
)

// TestBenchCutover is make bench-cutover's driver (bench/cutover.sh), not a
// test: it runs only when SHARDGATE_BENCH_CUTOVER names the directory of
// its report. For each setting (1 proxy; 3 proxies; 3 proxies with one
// follower frozen across the cutover) it starts a fleet of proxy
// processes on a real etcd over three MariaDB nodes and reshards a table
// of 20000 rows from 2 subtables (node1, node2) to 8 (3+3+2 over the
// three nodes), once per round, a fresh table each time, while point
// selects (6 clients in all, spread over the live proxies) and
// autocommitted increments (3 clients) run. It reports, per round, the
// pause the workflow measured (State.PauseMillis), the buffer's
// shardgate_buffer_last_pause_seconds of each proxy, how long the
// cutover request took, and the point selects' latency p50/p99/max in the
// two seconds before the cutover (baseline) and over the cutover (every
// select that overlaps the request), then medians and ranges. The
// proxies' logs are kept beside the report (<setting>-proxy<n>.log, the
// leader first).
// ROUNDS (default 5) sets the rounds.
func TestBenchCutover(t *testing.T) {
	out := os.Getenv("SHARDGATE_BENCH_CUTOVER")
	if out == "" {
		t.Skip("benchmark driver: set SHARDGATE_BENCH_CUTOVER=<report directory> (make bench-cutover)")
	}
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	nodeSrv := threeServers(t)
	load0 := loadavg()
	t0 := time.Now()
	settings := []cutSetting{{"1 proxy", 1, false}, {"3 proxies", 3, false}, {"3 proxies, one frozen", 3, true}}
	var res [][]cutRound
	for _, st := range settings {
		var rs []cutRound
		t.Run(strings.ReplaceAll(st.name, " ", "_"), func(t *testing.T) { rs = benchCutover(t, nodeSrv, st, rounds) })
		res = append(res, rs)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	report := cutReport(settings, res, load0, loadavg(), time.Since(t0), nodeSrv)
	if err := os.WriteFile(filepath.Join(out, "report.md"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + report)
}

type cutSetting struct {
	name    string
	proxies int
	freeze  bool
}

// cutRound is what one round measured.
type cutRound struct {
	pauseMillis   float64   // the workflow's own measure
	bufferPause   []float64 // shardgate_buffer_last_pause_seconds of each proxy (leader first), ms
	request       time.Duration
	base, window  latencies
	errs, retries int
	acksMissing   float64
}

type latencies struct {
	n              int
	p50, p99, max_ time.Duration
}

func latenciesOf(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	slices.Sort(ds)
	return latencies{n: len(ds), p50: ds[len(ds)/2], p99: ds[min(len(ds)-1, len(ds)*99/100)], max_: ds[len(ds)-1]}
}

// sample is one point select: when it started and how long it took.
type sample struct {
	at time.Time
	d  time.Duration
}

func benchCutover(t *testing.T, nodeSrv []*mariadbtest.Server, st cutSetting, rounds int) []cutRound {
	f := newFleetEnv(t)
	const db, rows = "benchcut", 20000
	ds := freshDatabase(t, db, nodeSrv...)
	var shard strings.Builder
	shard.WriteString("    shard:\n")
	for r := range rounds {
		shard.WriteString(hashRule(db, fmt.Sprintf("r%d", r)))
	}
	rev0 := f.put(t, topoYAML(fleetNodes(nodeSrv...), []fleetSchema{{user: appUser, nodes: []string{"node1", "node2", "node3"}, shard: shard.String()}}))
	var ms []fleetMember
	for range st.proxies {
		ms = append(ms, f.launchAdmin(t, f.etcd.ClientURL))
	}
	procs := procsOf(ms)
	for _, p := range procs {
		waitServing(t, p, 20*time.Second)
	}
	waitApplied(t, procs, rev0, 10*time.Second)
	lp := f.memberProc(t, procs, f.waitLeader(t, 20*time.Second, ""))
	slices.SortStableFunc(ms, func(a, b fleetMember) int { // the leader first
		if a.p == lp {
			return -1
		}
		if b.p == lp {
			return 1
		}
		return 0
	})
	leader := ms[0]
	h := leader.p.openDB(t, db)
	for r := range rounds {
		execAll(t, h, fmt.Sprintf("CREATE TABLE r%d (id BIGINT PRIMARY KEY, c BIGINT NOT NULL)", r))
		preloadRows(t, ds[0], ds[1], db, fmt.Sprintf("r%d", r), "0", rows)
	}

	var out []cutRound
	var retries0 int
	var acks0 float64
	for r := range rounds {
		table := fmt.Sprintf("r%d", r)
		name := fmt.Sprintf("benchcut_%d_%d", time.Now().UnixNano(), r)
		adminOK(t, leader.web, "POST", "/admin/workflows", map[string]any{"table": db + "." + table, "name": name, "nodes": []string{"node1", "node2", "node3"},
			"locations": []int{3, 3, 2}})
		waitPhase(t, leader.web, name, move.PhaseReady, 60*time.Second)
		frozen := -1
		if st.freeze {
			frozen = len(ms) - 1
		}
		// The load: 6 readers over the live proxies, 3 writers.
		var live []int
		for i := range ms {
			if i != frozen {
				live = append(live, i)
			}
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		samples := make([][]sample, 6)
		var mu sync.Mutex
		errs := 0
		for k := range 9 {
			via := ms[live[k%len(live)]].p
			if k >= 6 { // writers through every proxy, the frozen one too
				via = ms[k%len(ms)].p
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				hh, err := sql.Open("mysql", via.dsn(db))
				if err != nil {
					t.Error(err)
					return
				}
				defer hh.Close()
				hh.SetMaxOpenConns(1)
				rnd := rand.New(rand.NewPCG(uint64(k), uint64(r)))
				for ctx.Err() == nil {
					id := rnd.IntN(rows)
					if k >= 6 {
						if _, err := hh.Exec(fmt.Sprintf("UPDATE %s SET c = c + 1 WHERE id = %d", table, id)); err != nil {
							mu.Lock()
							errs++
							mu.Unlock()
						}
						continue
					}
					at := time.Now()
					var c int64
					err := hh.QueryRow(fmt.Sprintf("SELECT c FROM %s WHERE id = %d", table, id)).Scan(&c)
					if err != nil {
						mu.Lock()
						errs++
						mu.Unlock()
						continue
					}
					samples[k] = append(samples[k], sample{at, time.Since(at)})
				}
			}()
		}
		time.Sleep(2500 * time.Millisecond) // 0.5 s to start, 2 s of baseline
		if frozen >= 0 {
			if err := ms[frozen].p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		cutStart := time.Now()
		s := adminOK(t, leader.web, "POST", "/admin/workflows/"+name+"/cutover", nil)
		cutEnd := time.Now()
		if frozen >= 0 {
			time.Sleep(300 * time.Millisecond)
			ms[frozen].p.cmd.Process.Signal(syscall.SIGCONT)
		}
		time.Sleep(time.Second)
		stop()
		wg.Wait()
		if s.State.Phase != move.PhaseSwitched {
			t.Fatalf("round %d: after cutover: %s (%s)", r, s.State.Phase, s.State.Error)
		}
		var base, win []time.Duration
		for _, ss := range samples {
			for _, x := range ss {
				end := x.at.Add(x.d)
				switch {
				case x.at.After(cutStart.Add(-2*time.Second)) && end.Before(cutStart):
					base = append(base, x.d)
				case x.at.Before(cutEnd) && end.After(cutStart):
					win = append(win, x.d)
				}
			}
		}
		cr := cutRound{pauseMillis: s.State.PauseMillis, request: cutEnd.Sub(cutStart), base: latenciesOf(base), window: latenciesOf(win), errs: errs}
		for _, m := range ms {
			cr.bufferPause = append(cr.bufferPause, m.p.metric(t, "shardgate_buffer_last_pause_seconds")*1000)
			cr.retries += int(m.p.metric(t, "shardgate_fence_retries_total"))
		}
		cr.retries -= retries0
		retries0 += cr.retries
		cr.acksMissing = leader.p.metric(t, "shardgate_cutover_acks_missing_total") - acks0
		acks0 += cr.acksMissing
		out = append(out, cr)
		t.Logf("%s round %d: pause %.1f ms (buffer %v ms), request %v; point selects p50/p99/max baseline %v/%v/%v (%d), cutover %v/%v/%v (%d); %d errors",
			st.name, r+1, cr.pauseMillis, cr.bufferPause, cr.request.Round(time.Millisecond), cr.base.p50, cr.base.p99, cr.base.max_, cr.base.n,
			cr.window.p50, cr.window.p99, cr.window.max_, cr.window.n, errs)
		// complete stops its reverse stream, which would load the later rounds.
		if resp, err := http.Post("http://"+leader.web+"/admin/workflows/"+name+"/complete", "application/json", nil); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Logf("round %d: complete: %s", r, resp.Status)
			}
		}
	}
	// The proxies' logs (the cutover's own lines: the pause, the
	// acknowledgements) beside the report.
	if dir := os.Getenv("SHARDGATE_BENCH_CUTOVER"); dir != "" {
		for i, m := range ms {
			if b, err := os.ReadFile(m.p.logPath); err == nil {
				os.MkdirAll(dir, 0o755)
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-proxy%d.log", strings.ReplaceAll(st.name, " ", "_"), i+1)), b, 0o644)
			}
		}
	}
	return out
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func millis(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// medRange is the median of xs with its min and max.
func medRange(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("%.1f (%.1f–%.1f)", median(s), s[0], s[len(s)-1])
}

func cutReport(settings []cutSetting, res [][]cutRound, load0, load1 string, took time.Duration, nodeSrv []*mariadbtest.Server) string {
	var b strings.Builder
	cmd := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	cpu := "?"
	if c, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(c), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	rev := cmd("git", "rev-parse", "--short=12", "HEAD")
	fmt.Fprintf(&b, "## Environment\n\n| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s x %d |\n| kernel | %s |\n| Go | %s (proxy GOMAXPROCS default) |\n| MariaDB | %s, 3 servers (mariadbtest: binlog ROW) |\n| etcd | %s (internal/etcdtest) |\n",
		cpu, runtime.NumCPU(), cmd("uname", "-r"), runtime.Version(), cmd("mariadbd", "--version"), cmd("etcd", "--version"))
	fmt.Fprintf(&b, "| proxy | commit %s plus the working tree's uncommitted changes of the moment (other agents'); fleet mode, defaults: cutover_timeout 1s, cutover_ack_wait 500ms, buffer_size 1000; log level info |\n", rev)
	fmt.Fprintf(&b, "| load average (1/5/15 min) | %s at the start, %s at the end |\n| run time | %v |\n\n", load0, load1, took.Round(time.Second))
	for i, st := range settings {
		fmt.Fprintf(&b, "## %s\n\n| round | pause (workflow) ms | buffer last pause ms (leader first) | cutover request ms | baseline p50 / p99 / max ms (n) | cutover p50 / p99 / max ms (n) | fence retries | acks missing | client errors |\n|---:|---:|---|---:|---|---|---:|---:|---:|\n", st.name)
		var pause, req, bp99, wp99, wmax, buf []float64
		for r, cr := range res[i] {
			var bufs []string
			for _, v := range cr.bufferPause {
				bufs = append(bufs, fmt.Sprintf("%.1f", v))
			}
			fmt.Fprintf(&b, "| %d | %.1f | %s | %s | %s / %s / %s (%d) | %s / %s / %s (%d) | %d | %.0f | %d |\n", r+1, cr.pauseMillis, strings.Join(bufs, ", "), millis(cr.request),
				millis(cr.base.p50), millis(cr.base.p99), millis(cr.base.max_), cr.base.n, millis(cr.window.p50), millis(cr.window.p99), millis(cr.window.max_), cr.window.n, cr.retries, cr.acksMissing, cr.errs)
			pause = append(pause, cr.pauseMillis)
			req = append(req, float64(cr.request)/1e6)
			bp99 = append(bp99, float64(cr.base.p99)/1e6)
			wp99 = append(wp99, float64(cr.window.p99)/1e6)
			wmax = append(wmax, float64(cr.window.max_)/1e6)
			buf = append(buf, cr.bufferPause[0])
		}
		fmt.Fprintf(&b, "\nMedian (min–max) over %d rounds: pause %s ms (leader's buffer %s ms), request %s ms; point-select p99 baseline %s ms, during the cutover %s ms (max %s ms).\n\n",
			len(res[i]), medRange(pause), medRange(buf), medRange(req), medRange(bp99), medRange(wp99), medRange(wmax))
	}
	return b.String()
}
