package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/shardgate/shardgate/changestream"
)

// catchRun is one workflow started while sysbench oltp_write_only writes
// through the proxy, followed until its apply has caught up and settled.
// Times are seconds since the workflow was started.
type catchRun struct {
	Round        int     `json:"round"`
	Workflow     string  `json:"workflow"`
	ApplyWorkers int     `json:"apply_workers"`
	CopyRowsSec  float64 `json:"copy_rows_per_s"` // the copy, under the write load
	CopyEnd      float64 `json:"copy_end_s"`      // first status out of "copying"
	Ready        float64 `json:"ready_s"`         // first status "ready"
	VerifyRows   int64   `json:"verify_rows"`
	VerifySecs   float64 `json:"verify_seconds"`
	// CatchEnd is Ready less the verify: when the apply had reached the
	// positions read as the catch-up began (the verify runs next).
	CatchEnd float64 `json:"catchup_end_s"`
	// Applied is changes_applied at CatchEnd (interpolated between
	// samples); AppliedRate is Applied / (CatchEnd - CopyEnd).
	Applied     float64 `json:"catchup_applied"`
	AppliedRate float64 `json:"catchup_applied_per_s"`
	// Backlog is an estimate of the changes waiting when the copy ended:
	// sysbench's writes in its per-second reports from the workflow's
	// start to then.
	Backlog float64 `json:"backlog_estimate"`
	// The writer: sysbench's write statements per second over its whole
	// run (each changes one row), and its window relative to the workflow.
	WriteRate     float64 `json:"write_rate"`
	Writes        int64   `json:"sysbench_writes"`
	SysbenchStart float64 `json:"sysbench_start_s"`
	SysbenchEnd   float64 `json:"sysbench_end_s"`
	SysbenchErrs  int64   `json:"sysbench_ignored_errors"`
	// Live: from CatchEnd to sysbench's end (when positive), the apply's
	// rate and sysbench's in the same seconds.
	LiveSeconds   float64 `json:"live_seconds"`
	LiveApplied   float64 `json:"live_applied_per_s"`
	LiveWriteRate float64 `json:"live_write_rate"`
	MaxLag        float64 `json:"max_lag_s"`      // largest lag_seconds of any sample
	MaxLagLive    float64 `json:"max_lag_live_s"` // after CatchEnd
	// Drain is from sysbench's end to the last sample whose
	// changes_applied moved; DrainRate the changes applied in it per
	// second (the apply alone, no writer beside it).
	Drain     float64 `json:"drain_s"`
	DrainRate float64 `json:"drain_applied_per_s"`
	// ToReady is changes_applied at the first "ready" status over the time
	// from copy end to then (verify included).
	ToReady float64 `json:"copy_end_to_ready_applied_per_s"`
	// TotalApplied is changes_applied once settled; BinlogChanges the row
	// changes of sbtest.sbtest1 in the binary logs from the workflow's
	// start position to then (they should be equal).
	TotalApplied  int64 `json:"total_applied"`
	BinlogChanges int64 `json:"binlog_changes"`
	// ReplaceRows are the inserts and updates among BinlogChanges (the
	// apply writes each as a row of a REPLACE); ReplaceStmts the REPLACE
	// statements the servers ran from copy end to the end (Com_replace:
	// only the apply runs REPLACE then).
	ReplaceRows  int64  `json:"replace_rows"`
	ReplaceStmts int64  `json:"replace_statements"`
	Samples      []poll `json:"-"` // catchup-timeline.csv
	sysbench     []byte
}

// catchUp runs every apply-workers setting once per round.
func (b *bench) catchUp() error {
	for round := 1; round <= *rounds; round++ {
		for _, aw := range ints(*applyWs) {
			r, err := b.catchOnce(round, aw)
			if err != nil {
				return err
			}
			b.res.CatchUp = append(b.res.CatchUp, r)
		}
	}
	return nil
}

var (
	sbInterval = regexp.MustCompile(`\[ *(\d+)s \] thds: \d+ tps: [\d.]+ qps: [\d.]+ \(r/w/o: [\d.]+/([\d.]+)/[\d.]+\)`)
	sbWrites   = regexp.MustCompile(`write:\s+(\d+)`)
	sbIgnored  = regexp.MustCompile(`ignored errors:\s+(\d+)`)
	sbTime     = regexp.MustCompile(`total time:\s+([\d.]+)s`)
)

func (b *bench) catchOnce(round, aw int) (catchRun, error) {
	name := b.nextName()
	r := catchRun{Round: round, Workflow: name, ApplyWorkers: aw}
	host, port, _ := net.SplitHostPort(*proxyAddr)
	cmd := exec.Command("sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host="+host, "--mysql-port="+port,
		"--mysql-user="+*user, "--mysql-password="+*password, "--mysql-db=sbtest", "--tables=1", "--table-size="+strconv.Itoa(*rows),
		"--threads="+strconv.Itoa(*threads), "--time="+strconv.Itoa(*writeSecs), "--report-interval=1", "--rand-type=uniform",
		"--skip-trx=on", "--mysql-ignore-errors=1062,1213,1205,1020", "run")
	var sbOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &sbOut, &sbOut
	sbStart := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	sbDone := make(chan error, 1)
	var sbEnd time.Time
	go func() { err := cmd.Wait(); sbEnd = time.Now(); sbDone <- err }()
	// One second of writes first, so the copy starts under load.
	time.Sleep(time.Second)
	t0 := time.Now()
	r.SysbenchStart = sbStart.Sub(t0).Seconds()
	if err := b.api.start(name, moveOptions{CopyWorkers: 4, BatchRows: 1000, ApplyWorkers: aw}); err != nil {
		cmd.Process.Kill()
		<-sbDone
		return r, err
	}
	var sbErr error
	running := true
	var lastMove time.Time
	var last int64 = -1
	var st status
	var replace0 int64 = -1
	deadline := time.Now().Add(10 * time.Minute)
	for {
		s, err := b.api.status(name)
		if err != nil {
			return r, err
		}
		st = s
		now := time.Now()
		p := poll{T: now.Sub(t0).Seconds(), Phase: s.State.Phase, Copied: s.State.RowsCopied, Applied: s.State.ChangesApplied, Lag: s.LagSeconds}
		r.Samples = append(r.Samples, p)
		if p.Applied != last {
			last, lastMove = p.Applied, now
		}
		if replace0 < 0 && p.Phase != "copying" {
			if replace0, err = b.comReplace(); err != nil {
				return r, err
			}
		}
		if running {
			select {
			case sbErr = <-sbDone:
				running = false
			default:
			}
		}
		// Settled: sysbench is done, the workflow ready, the apply idle
		// for a second.
		if !running && s.State.Phase == "ready" && s.LagSeconds == 0 && now.Sub(lastMove) > time.Second {
			break
		}
		if !s.Running || now.After(deadline) {
			if running {
				cmd.Process.Kill()
				<-sbDone
			}
			return r, fmt.Errorf("catch-up workflow %s: phase %s, running %v, error %q", name, s.State.Phase, s.Running, s.State.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.sysbench = sbOut.Bytes()
	if err := os.WriteFile(filepath.Join(*out, "raw", fmt.Sprintf("sysbench-%s-apply%d.log", name, aw)), r.sysbench, 0o644); err != nil {
		return r, err
	}
	if sbErr != nil {
		return r, fmt.Errorf("sysbench: %v\n%s", sbErr, r.sysbench)
	}
	r.SysbenchEnd = sbEnd.Sub(t0).Seconds()
	r.VerifyRows, r.VerifySecs = st.State.VerifyRows, st.State.VerifySeconds
	r.TotalApplied = st.State.ChangesApplied
	if st.State.CopySeconds > 0 {
		r.CopyRowsSec = float64(st.State.RowsCopied) / st.State.CopySeconds
	}
	if m := sbWrites.FindSubmatch(r.sysbench); m != nil {
		r.Writes, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := sbIgnored.FindSubmatch(r.sysbench); m != nil {
		r.SysbenchErrs, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := sbTime.FindSubmatch(r.sysbench); m != nil {
		secs, _ := strconv.ParseFloat(string(m[1]), 64)
		r.WriteRate = float64(r.Writes) / secs
	}
	for _, p := range r.Samples {
		if r.CopyEnd == 0 && p.Phase != "copying" {
			r.CopyEnd = p.T
		}
		if r.Ready == 0 && p.Phase == "ready" {
			r.Ready = p.T
		}
		r.MaxLag = max(r.MaxLag, p.Lag)
	}
	r.CatchEnd = r.Ready - r.VerifySecs
	if r.CatchEnd < r.CopyEnd {
		r.CatchEnd = r.CopyEnd
	}
	r.Applied = appliedAt(r.Samples, r.CatchEnd)
	if d := r.CatchEnd - r.CopyEnd; d > 0 {
		r.AppliedRate = r.Applied / d
	}
	r.Backlog = intervalRate(r.sysbench, -r.SysbenchStart, r.CopyEnd-r.SysbenchStart) * r.CopyEnd
	if r.SysbenchEnd > r.CatchEnd {
		r.LiveSeconds = r.SysbenchEnd - r.CatchEnd
		r.LiveApplied = (appliedAt(r.Samples, r.SysbenchEnd) - r.Applied) / r.LiveSeconds
		r.LiveWriteRate = intervalRate(r.sysbench, r.CatchEnd-r.SysbenchStart, r.SysbenchEnd-r.SysbenchStart)
	}
	for _, p := range r.Samples {
		if p.T >= r.CatchEnd {
			r.MaxLagLive = max(r.MaxLagLive, p.Lag)
		}
	}
	r.Drain = max(0, lastMove.Sub(t0).Seconds()-r.SysbenchEnd)
	if r.Drain > 0.2 {
		r.DrainRate = (float64(r.TotalApplied) - appliedAt(r.Samples, r.SysbenchEnd)) / r.Drain
	}
	if d := r.Ready - r.CopyEnd; d > 0 {
		r.ToReady = appliedAt(r.Samples, r.Ready) / d
	}
	replace1, err := b.comReplace()
	if err != nil {
		return r, err
	}
	r.ReplaceStmts = replace1 - replace0
	n, ups, err := b.binlogChanges(st.State.Start)
	if err != nil {
		return r, err
	}
	r.BinlogChanges, r.ReplaceRows = n, ups
	if _, _, err := b.cancel(name); err != nil {
		return r, err
	}
	log.Printf("catch-up round %d apply workers %d: copy end %.1f s, catch-up end %.1f s, %.0f changes at %.0f/s; writes %.0f/s; max lag %.1f s; applied %d, binlog %d",
		round, aw, r.CopyEnd, r.CatchEnd, r.Applied, r.AppliedRate, r.WriteRate, r.MaxLag, r.TotalApplied, r.BinlogChanges)
	b.purgeBinlogs()
	return r, nil
}

// appliedAt interpolates changes_applied at time t.
func appliedAt(s []poll, t float64) float64 {
	for i := 1; i < len(s); i++ {
		if s[i].T >= t {
			a, z := s[i-1], s[i]
			if z.T == a.T {
				return float64(z.Applied)
			}
			f := (t - a.T) / (z.T - a.T)
			return float64(a.Applied) + f*float64(z.Applied-a.Applied)
		}
	}
	if len(s) == 0 {
		return 0
	}
	return float64(s[len(s)-1].Applied)
}

// intervalRate is sysbench's mean write statements per second over the
// whole report intervals inside [from, to) (seconds since it started).
func intervalRate(out []byte, from, to float64) float64 {
	var sum float64
	var n int
	for _, m := range sbInterval.FindAllSubmatch(out, -1) {
		end, _ := strconv.ParseFloat(string(m[1]), 64)
		if end-1 >= from && end <= to+0.5 {
			w, _ := strconv.ParseFloat(string(m[2]), 64)
			sum += w
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// comReplace is the REPLACE statements the nodes have run (Com_replace).
func (b *bench) comReplace() (int64, error) {
	var sum int64
	for _, nd := range b.nodes {
		var name string
		var n int64
		if err := nd.db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_replace'").Scan(&name, &n); err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// binlogChanges counts the row changes of sbtest.sbtest1 (the source
// subtables) in the nodes' binary logs from start to their positions now,
// and the inserts and updates among them.
func (b *bench) binlogChanges(start map[string]string) (n, upserts int64, err error) {
	until := map[string]string{}
	for _, nd := range b.nodes {
		var p string
		if err := nd.db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			return 0, 0, err
		}
		until[nd.Name] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	changes, errc, err := changestream.Subscribe(ctx, changestream.Sources(b.cfg), changestream.Names(b.cfg),
		changestream.Options{Tables: []string{"sbtest.sbtest1"}, From: start, Until: until, Buffer: 4096})
	if err != nil {
		return 0, 0, err
	}
	for ch := range changes {
		n++
		if ch.Op != "delete" {
			upserts++
		}
	}
	return n, upserts, <-errc
}
