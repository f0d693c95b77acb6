package main

import (
	"compress/gzip"
	"context"
	"database/sql"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// stmt is one statement of the load client.
type stmt struct {
	start  time.Duration // since the load began
	lat    time.Duration
	update bool
	failed bool
}

// loadClient runs point SELECTs and UPDATEs by id through the proxy on
// -load-conns connections, paced to -load-rate in all, recording each.
type loadClient struct {
	base  time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
	per   [][]stmt
	errMu sync.Mutex
	errs  map[string]int
}

func (b *bench) startLoad() *loadClient {
	l := &loadClient{base: time.Now(), stop: make(chan struct{}), per: make([][]stmt, *loadConns), errs: map[string]int{}}
	b.proxy.SetMaxOpenConns(*loadConns + 2)
	b.proxy.SetMaxIdleConns(*loadConns + 2)
	var every time.Duration
	if *loadRate > 0 {
		every = time.Duration(float64(time.Second) * float64(*loadConns) / float64(*loadRate))
	}
	for g := range *loadConns {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			var conn *sql.Conn
			defer func() {
				if conn != nil {
					conn.Close()
				}
			}()
			next := time.Now()
			recs := make([]stmt, 0, 1<<16)
			for {
				select {
				case <-l.stop:
					l.per[g] = recs
					return
				default:
				}
				if every > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					} else if -d > every {
						next = time.Now() // behind (held, or slow): no burst to catch up
					}
					next = next.Add(every)
				}
				if conn == nil {
					c, err := b.proxy.Conn(context.Background())
					if err != nil {
						l.fail(err)
						time.Sleep(10 * time.Millisecond)
						continue
					}
					conn = c
				}
				id := 1 + rng.IntN(*rows)
				upd := rng.IntN(2) == 0
				t0 := time.Now()
				var err error
				if upd {
					_, err = conn.ExecContext(context.Background(), "UPDATE sbtest1 SET k = k + 1 WHERE id = ?", id)
				} else {
					var c string
					err = conn.QueryRowContext(context.Background(), "SELECT c FROM sbtest1 WHERE id = ?", id).Scan(&c)
					if err == sql.ErrNoRows {
						err = nil // a row sysbench deleted and has not inserted yet
					}
				}
				lat := time.Since(t0)
				recs = append(recs, stmt{start: t0.Sub(l.base), lat: lat, update: upd, failed: err != nil})
				if err != nil {
					l.fail(err)
					conn.Close()
					conn = nil
				}
			}
		})
	}
	return l
}

func (l *loadClient) fail(err error) {
	l.errMu.Lock()
	l.errs[err.Error()]++
	l.errMu.Unlock()
}

// finish stops the load and returns every statement, by start time.
func (l *loadClient) finish() []stmt {
	close(l.stop)
	l.wg.Wait()
	var all []stmt
	for _, p := range l.per {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(a, b stmt) int { return int(a.start - b.start) })
	return all
}

// pauseEvent is one cutover or rollback.
type pauseEvent struct {
	Workflow string  `json:"workflow"`
	Kind     string  `json:"kind"` // cutover or rollback
	PauseMS  float64 `json:"pause_ms"`
	// PostMS is how long the POST took (the window statements are
	// judged in); Start is when it was sent, in seconds since the load
	// began.
	PostMS   float64 `json:"post_ms"`
	Start    float64 `json:"start_s"`
	Attempts int     `json:"cutover_attempts,omitempty"`
	// Statements that started within the window, and the baseline: those
	// that started in the 2 s before it.
	Window   latStats `json:"window"`
	Baseline latStats `json:"baseline"`
}

// latStats summarizes statement latencies (milliseconds).
type latStats struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// cutoverResult is the cutover section.
type cutoverResult struct {
	Events []pauseEvent `json:"events"`
	Verify []verifyRun  `json:"verify"`
	Window latStats     `json:"window_all"` // statements of every window
	// The same, cutovers' windows and rollbacks' apart.
	CutoverWindow  latStats       `json:"window_cutovers"`
	RollbackWindow latStats       `json:"window_rollbacks"`
	Baseline       latStats       `json:"baseline_all"` // statements of every baseline
	Whole          latStats       `json:"whole_run"`    // every statement of the section
	Statements     int            `json:"statements"`
	Seconds        float64        `json:"load_seconds"`
	Errors         map[string]int `json:"errors,omitempty"`
}

// verifyRun is one workflow's verify figures.
type verifyRun struct {
	Workflow string  `json:"workflow"`
	Context  string  `json:"context"`
	Rows     int64   `json:"rows"`
	Seconds  float64 `json:"seconds"`
	RowsSec  float64 `json:"rows_per_s"`
}

// cutovers runs -cutovers workflows to ready under the load client, cuts
// each over and rolls it back a few seconds later.
func (b *bench) cutovers() error {
	l := b.startLoad()
	var evs []pauseEvent
	var vr []verifyRun
	stopLoad := func() []stmt { return l.finish() }
	time.Sleep(3 * time.Second) // warm the connections and the plan cache
	for i := 0; i < *cutovers; i++ {
		name := b.nextName()
		t0 := time.Now()
		if err := b.api.start(name, moveOptions{CopyWorkers: 4, BatchRows: 1000, ApplyWorkers: 4}); err != nil {
			stopLoad()
			return err
		}
		s, err := b.api.waitPhase(name, t0, func(s *status) bool { return s.State.Phase == "ready" }, nil, 10*time.Minute)
		if err != nil {
			stopLoad()
			return err
		}
		if len(s.State.Diffs) > 0 {
			stopLoad()
			return fmt.Errorf("workflow %s: verify found %d differing ranges", name, len(s.State.Diffs))
		}
		vr = append(vr, verifyRun{Workflow: name, Context: "cutover runs (load client)", Rows: s.State.VerifyRows, Seconds: s.State.VerifySeconds,
			RowsSec: float64(s.State.VerifyRows) / s.State.VerifySeconds})
		time.Sleep(2 * time.Second)
		for _, cmd := range []string{"cutover", "rollback"} {
			st, c0, c1, err := b.api.command(name, cmd)
			if err != nil {
				stopLoad()
				return fmt.Errorf("%s %s: %w", cmd, name, err)
			}
			want := map[string]string{"cutover": "switched", "rollback": "rolled-back"}[cmd]
			if st.State.Phase != want {
				stopLoad()
				return fmt.Errorf("%s %s: phase %s, want %s", cmd, name, st.State.Phase, want)
			}
			evs = append(evs, pauseEvent{Workflow: name, Kind: cmd, PauseMS: st.State.PauseMillis, PostMS: float64(c1.Sub(c0).Microseconds()) / 1000,
				Start: c0.Sub(l.base).Seconds(), Attempts: st.State.Cutovers})
			log.Printf("%s %s: pause %.1f ms (POST %.1f ms)", cmd, name, st.State.PauseMillis, float64(c1.Sub(c0).Microseconds())/1000)
			if cmd == "cutover" {
				time.Sleep(3 * time.Second)
			}
		}
		time.Sleep(time.Second)
		b.purgeBinlogs()
	}
	time.Sleep(2 * time.Second)
	all := stopLoad()
	res := &cutoverResult{Verify: vr, Statements: len(all), Seconds: time.Since(l.base).Seconds(), Errors: l.errs}
	var win, base []stmt
	kinds := map[string][]stmt{}
	for i := range evs {
		e := &evs[i]
		from := time.Duration(e.Start * float64(time.Second))
		to := from + time.Duration(e.PostMS*float64(time.Millisecond))
		w := between(all, from, to)
		bl := between(all, from-2*time.Second, from)
		e.Window, e.Baseline = summarize(w), summarize(bl)
		win, base = append(win, w...), append(base, bl...)
		kinds[e.Kind] = append(kinds[e.Kind], w...)
	}
	res.CutoverWindow, res.RollbackWindow = summarize(kinds["cutover"]), summarize(kinds["rollback"])
	res.Events, res.Window, res.Baseline, res.Whole = evs, summarize(win), summarize(base), summarize(all)
	b.res.Cutover = res
	var n int
	if err := b.proxy.QueryRow("SELECT COUNT(*) FROM sbtest1").Scan(&n); err != nil {
		return err
	}
	b.res.RowsAfter = n
	return writeStatements(all, evs)
}

// between returns the statements that started in [from, to).
func between(all []stmt, from, to time.Duration) []stmt {
	i, _ := slices.BinarySearchFunc(all, from, func(s stmt, t time.Duration) int { return int(s.start - t) })
	j, _ := slices.BinarySearchFunc(all, to, func(s stmt, t time.Duration) int { return int(s.start - t) })
	return all[i:j]
}

func summarize(ss []stmt) latStats {
	st := latStats{N: len(ss)}
	if len(ss) == 0 {
		return st
	}
	lat := make([]float64, 0, len(ss))
	for _, s := range ss {
		if s.failed {
			st.Errors++
		}
		lat = append(lat, float64(s.lat.Microseconds())/1000)
	}
	slices.Sort(lat)
	st.P50, st.P99, st.Max = pct(lat, 50), pct(lat, 99), lat[len(lat)-1]
	return st
}

// pct is the nearest-rank percentile of sorted values.
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

// writeStatements writes every statement within 3 s of an event to
// raw/statements.csv.gz (start s, latency ms, kind, failed, event).
func writeStatements(all []stmt, evs []pauseEvent) error {
	f, err := os.Create(filepath.Join(*out, "raw", "statements.csv.gz"))
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	fmt.Fprintln(zw, "start_s,latency_ms,kind,failed,event")
	for _, e := range evs {
		from := time.Duration((e.Start - 3) * float64(time.Second))
		to := time.Duration((e.Start + e.PostMS/1000 + 3) * float64(time.Second))
		for _, s := range between(all, from, to) {
			kind := "select"
			if s.update {
				kind = "update"
			}
			fmt.Fprintf(zw, "%.6f,%.3f,%s,%v,%s-%s\n", s.start.Seconds(), float64(s.lat.Microseconds())/1000, kind, s.failed, e.Workflow, e.Kind)
		}
	}
	return zw.Close()
}
