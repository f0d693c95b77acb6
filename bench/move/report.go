package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// results is everything a run measured (results.json).
type results struct {
	Date         string         `json:"date"`
	Rows         int            `json:"rows"`
	Table        []tableSize    `json:"table"`
	DataBytes    int64          `json:"data_bytes"` // DATA_LENGTH of the source subtables
	RowBytes     int64          `json:"row_bytes"`  // 8 + LENGTH(c) + LENGTH(pad) per row
	Env          envBlock       `json:"env"`
	Settings     map[string]any `json:"settings"`
	Copy         []copyRun      `json:"copy"`
	Anchors      []anchorRun    `json:"anchors"`
	CatchUp      []catchRun     `json:"catchup"`
	Cutover      *cutoverResult `json:"cutover,omitempty"`
	RowsAfter    int            `json:"rows_after,omitempty"`
	Sections     []sectionTime  `json:"sections"`
	TotalSeconds float64        `json:"total_seconds"`
	// ScriptSeconds is from bench/move.sh's start (cluster, build, load)
	// to the end of the driver.
	ScriptSeconds float64 `json:"script_seconds,omitempty"`
}

type tableSize struct {
	Node       string `json:"node"`
	Subtable   string `json:"subtable"`
	Rows       int    `json:"rows"`
	DataLength int64  `json:"data_length"`
	RowBytes   int64  `json:"row_bytes"`
}

type envBlock struct {
	CPU             string   `json:"cpu"`
	CPUs            int      `json:"cpus"`
	Kernel          string   `json:"kernel"`
	Go              string   `json:"go"`
	MariaDB         string   `json:"mariadb"`
	Sysbench        string   `json:"sysbench"`
	Commit          string   `json:"commit"`
	Dirty           []string `json:"dirty,omitempty"` // git status of the proxy's packages when the run began
	Servers         []string `json:"servers"`
	ProxyGOMAXPROCS string   `json:"proxy_gomaxprocs"`
	ProxySource     string   `json:"proxy_source,omitempty"` // how bench/move.sh built the proxy, when not from the working tree
	LoadStart       string   `json:"loadavg_start"`
	LoadEnd         string   `json:"loadavg_end"`
}

// sectionTime is one section's time and who used the CPU in it (core
// seconds): the proxy, the two MariaDB servers, this driver with its
// children (sysbench, mariadb-dump, mariadb), and the rest of the machine.
type sectionTime struct {
	Name             string  `json:"name"`
	Seconds          float64 `json:"seconds"`
	ProxyCPUSeconds  float64 `json:"proxy_cpu_s"`
	DBCPUSeconds     float64 `json:"db_cpu_s"`
	DriverCPUSeconds float64 `json:"driver_cpu_s"`
	BusySeconds      float64 `json:"machine_busy_s"`
	OtherCPUSeconds  float64 `json:"other_cpu_s"`
}

// spread is a set of values and its median with the house's ±: half the
// min-max range over the median.
type spread struct {
	vals []float64
}

func (s spread) median() float64 {
	if len(s.vals) == 0 {
		return 0
	}
	v := slices.Clone(s.vals)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func (s spread) pm() float64 {
	m := s.median()
	if m == 0 || len(s.vals) < 2 {
		return 0
	}
	return (slices.Max(s.vals) - slices.Min(s.vals)) / 2 / m * 100
}

// fmtRate formats a median with its ± percentage.
func (s spread) fmt(prec int) string {
	if len(s.vals) == 0 {
		return "–"
	}
	if len(s.vals) < 2 {
		return fmt.Sprintf("%.*f", prec, s.median())
	}
	return fmt.Sprintf("%.*f ±%.0f%%", prec, s.median(), s.pm())
}

func (s spread) list(prec int) string {
	parts := make([]string, len(s.vals))
	for i, v := range s.vals {
		parts[i] = fmt.Sprintf("%.*f", prec, v)
	}
	return strings.Join(parts, " / ")
}

func (b *bench) write() error {
	r := b.res
	r.Settings = map[string]any{"rows": *rows, "rounds": *rounds, "copy_workers": *workers, "batch_rows": *batches,
		"apply_workers": *applyWs, "catchup_seconds": *writeSecs, "threads": *threads, "cutovers": *cutovers,
		"load_conns": *loadConns, "load_rate": *loadRate, "sections": *sections}
	if err := writeJSON(filepath.Join(*out, "results.json"), r); err != nil {
		return err
	}
	if err := b.writeCSV(); err != nil {
		return err
	}
	md := b.markdown()
	return os.WriteFile(filepath.Join(*out, "report.md"), []byte(md), 0o644)
}

// copyCells groups the sweep by setting, in sweep order.
type copyCell struct {
	w, b      int
	rate, mbs spread
	wall      spread
	proxyUS   spread // proxy CPU µs per row
	dbUS      spread // MariaDB CPU µs per row
}

func (b *bench) copyCells() []*copyCell {
	var cells []*copyCell
	find := func(w, bt int) *copyCell {
		for _, c := range cells {
			if c.w == w && c.b == bt {
				return c
			}
		}
		c := &copyCell{w: w, b: bt}
		cells = append(cells, c)
		return c
	}
	for _, r := range b.res.Copy {
		c := find(r.Workers, r.Batch)
		c.rate.vals = append(c.rate.vals, r.RowsPerSec)
		c.mbs.vals = append(c.mbs.vals, r.MBPerSec)
		c.wall.vals = append(c.wall.vals, r.WallSeconds)
		c.proxyUS.vals = append(c.proxyUS.vals, r.ProxyCPU*1e6/float64(r.Rows))
		c.dbUS.vals = append(c.dbUS.vals, r.DBCPU*1e6/float64(r.Rows))
	}
	return cells
}

func (b *bench) anchorSpread(kind string) (rate, mbs, dbUS spread, runs []anchorRun) {
	for _, a := range b.res.Anchors {
		if a.Kind == kind {
			rate.vals = append(rate.vals, a.RowsPerSec)
			mbs.vals = append(mbs.vals, a.MBPerSec)
			dbUS.vals = append(dbUS.vals, a.DBCPU*1e6/float64(a.Rows))
			runs = append(runs, a)
		}
	}
	return
}

// pairedRatio is, per round, the copy rate of setting w x bt over the
// rate of that round's anchor of kind.
func (b *bench) pairedRatio(w, bt int, kind string) spread {
	var out spread
	for _, c := range b.res.Copy {
		if c.Workers != w || c.Batch != bt {
			continue
		}
		for _, a := range b.res.Anchors {
			if a.Kind == kind && a.Round == c.Round && a.RowsPerSec > 0 {
				out.vals = append(out.vals, c.RowsPerSec/a.RowsPerSec)
			}
		}
	}
	return out
}

// verdict judges a median ratio against a goal (at least goal), saying
// when the rounds' range crosses it.
func verdict(med, lo, hi, goal float64) string {
	switch {
	case lo >= goal:
		return "met"
	case hi < goal:
		return "**not met**"
	case med >= goal:
		return "met by the median, not by every round"
	}
	return "**not met** by the median (some rounds reach it)"
}

// verifySpreads are the verify rates of the copy sweep (nothing written
// beside it), the catch-up runs and the cutover runs.
func (b *bench) verifySpreads() (idle, catch, cut spread) {
	for _, c := range b.res.Copy {
		if c.VerifySeconds > 0 {
			idle.vals = append(idle.vals, float64(c.VerifyRows)/c.VerifySeconds)
		}
	}
	for _, c := range b.res.CatchUp {
		if c.VerifySecs > 0 {
			catch.vals = append(catch.vals, float64(c.VerifyRows)/c.VerifySecs)
		}
	}
	if b.res.Cutover != nil {
		for _, v := range b.res.Cutover.Verify {
			cut.vals = append(cut.vals, v.RowsSec)
		}
	}
	return
}

// verifies lists every verify the run saw.
func (b *bench) verifies() []verifyRun {
	var out []verifyRun
	for _, c := range b.res.Copy {
		if c.VerifySeconds > 0 {
			out = append(out, verifyRun{Workflow: c.Workflow, Context: fmt.Sprintf("copy sweep (%d x %d), no writes to the table", c.Workers, c.Batch),
				Rows: c.VerifyRows, Seconds: c.VerifySeconds, RowsSec: float64(c.VerifyRows) / c.VerifySeconds})
		}
	}
	for _, c := range b.res.CatchUp {
		if c.VerifySecs > 0 {
			out = append(out, verifyRun{Workflow: c.Workflow, Context: fmt.Sprintf("catch-up run, apply workers %d (sysbench still writing as it began: %v)", c.ApplyWorkers, c.SysbenchEnd > c.CatchEnd),
				Rows: c.VerifyRows, Seconds: c.VerifySecs, RowsSec: float64(c.VerifyRows) / c.VerifySecs})
		}
	}
	if b.res.Cutover != nil {
		out = append(out, b.res.Cutover.Verify...)
	}
	return out
}

func (b *bench) markdown() string {
	r := b.res
	var m strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&m, format, a...) }
	p("# Online resharding (package move): copy, catch-up, verify, cutover — %s\n\n", r.Date)
	p("One run of `make bench-move` (`bench/move.sh`, driver `bench/move`): the proxy's admin API reshards `sbtest.sbtest1` (%d sysbench rows, ids 1..%d) from hash 1+1 subtables (`sbtest1_0000` on node1, `sbtest1_0001` on node2) to hash 4+4 (`sbtest1_g1_0000..0007`), again and again; every workflow but the cutover ones is cancelled (its new subtables dropped) once measured. ", r.Rows, r.Rows)
	p("Data: %.1f MB by DATA_LENGTH of the two source subtables after ANALYZE TABLE (%.1f MB of column bytes, %d B/row); every MB/s figure uses DATA_LENGTH. ", float64(r.DataBytes)/1e6, float64(r.RowBytes)/1e6, r.DataBytes/int64(max(r.Rows, 1)))
	p("Medians over rounds, interleaved (each round runs every setting once, in the same order); **±** is half the min–max range over the median%s. Everything shares 2 cores: MariaDB x2, the proxy, sysbench or the load client, and this driver.\n\n", map[bool]string{true: " (with 2 rounds the median is their mean)", false: ""}[*rounds == 2])

	e := r.Env
	p("## Environment\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s x %d |\n| kernel | %s |\n| Go | %s (proxy GOMAXPROCS %s) |\n| MariaDB | %s |\n| sysbench | %s |\n", e.CPU, e.CPUs, e.Kernel, e.Go, e.ProxyGOMAXPROCS, e.MariaDB, e.Sysbench)
	if e.ProxySource != "" {
		p("| proxy | %s; its config is `ks.yaml` here (log level info) |\n", e.ProxySource)
	} else {
		dirty := "no uncommitted changes in its packages"
		if len(e.Dirty) > 0 {
			dirty = "built from the working tree with uncommitted changes: " + strings.Join(e.Dirty, " ")
		}
		p("| proxy | commit %s (%s); its config is `ks.yaml` here (log level info) |\n", e.Commit, dirty)
	}
	for _, s := range e.Servers {
		p("| server | %s |\n", s)
	}
	p("| load average (1/5/15 min) | %s at the start, %s at the end |\n", e.LoadStart, e.LoadEnd)
	p("| run time | %.0f s of the driver", r.TotalSeconds)
	if r.ScriptSeconds > 0 {
		p("; %.0f s for all of bench/move.sh up to the report (start the servers, build, load the table, run)", r.ScriptSeconds)
	}
	p(" |\n\n")
	p("Who used the %d cores in each section (core-seconds, from /proc; **other** = the machine's busy time less the proxy, the two servers and this driver with its children: processes outside the benchmark, which compete for the same cores):\n\n", e.CPUs)
	p("| section | seconds | proxy | MariaDB x2 | driver + sysbench/dump | other | other, share of the machine |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Sections {
		p("| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.0f%% |\n", s.Name, s.Seconds, s.ProxyCPUSeconds, s.DBCPUSeconds, s.DriverCPUSeconds, s.OtherCPUSeconds, s.OtherCPUSeconds/(s.Seconds*float64(e.CPUs))*100)
	}
	p("\n")

	// Headline.
	cells := b.copyCells()
	var best *copyCell
	var def *copyCell
	for _, c := range cells {
		if best == nil || c.rate.median() > best.rate.median() {
			best = c
		}
		if c.w == 4 && c.b == 1000 {
			def = c
		}
	}
	dumpR, dumpM, dumpDB, dumpRuns := b.anchorSpread("dump")
	ofR, ofM, ofDB, ofRuns := b.anchorSpread("outfile")
	p("## Headline\n\n| figure | median | spread / range | note |\n|---|---:|---|---|\n")
	if best != nil {
		p("| copy, best setting (%d workers x %d rows) | %.0f rows/s, %.1f MB/s | ±%.0f%% (%s) | rows_copied / copy_seconds |\n", best.w, best.b, best.rate.median(), best.mbs.median(), best.rate.pm(), best.rate.list(0))
	}
	if def != nil {
		p("| copy, default setting (4 x 1000) | %.0f rows/s, %.1f MB/s | ±%.0f%% (%s) | |\n", def.rate.median(), def.mbs.median(), def.rate.pm(), def.rate.list(0))
	}
	if len(dumpRuns) > 0 {
		p("| anchor: mariadb-dump \\| mariadb | %.0f rows/s, %.1f MB/s | ±%.0f%% (%s) | same rows, same servers |\n", dumpR.median(), dumpM.median(), dumpR.pm(), dumpR.list(0))
	}
	if len(ofRuns) > 0 {
		p("| anchor: INTO OUTFILE + LOAD DATA INFILE | %.0f rows/s, %.1f MB/s | ±%.0f%% (%s) | |\n", ofR.median(), ofM.median(), ofR.pm(), ofR.list(0))
	}
	if best != nil && len(dumpRuns) > 0 {
		lo, hi := slices.Min(best.rate.vals)/slices.Max(dumpR.vals), slices.Max(best.rate.vals)/slices.Min(dumpR.vals)
		p("| copy best / dump anchor | %.2f | %.2f–%.2f | goal ≥ 1: %s |\n", best.rate.median()/dumpR.median(), lo, hi, verdict(best.rate.median()/dumpR.median(), lo, hi, 1))
	}
	// The machine's load moves between rounds: a round's copy against the
	// same round's dump, then the median of those ratios, is steadier.
	for i, c := range []*copyCell{best, def} {
		if c == nil || len(dumpRuns) == 0 || (i == 1 && def == best) {
			continue
		}
		if r := b.pairedRatio(c.w, c.b, "dump"); len(r.vals) > 0 {
			p("| copy %d x %d / dump, paired by round | %.2f | ±%.0f%% (%s) | goal ≥ 1: %s |\n", c.w, c.b, r.median(), r.pm(), r.list(2),
				verdict(r.median(), slices.Min(r.vals), slices.Max(r.vals), 1))
		}
	}
	// CPU per row does not depend on how much of the machine a run got:
	// the copy's proxy and servers against the dump's servers and its two
	// client processes.
	if def != nil && len(dumpRuns) > 0 {
		var dumpAll spread
		for _, a := range dumpRuns {
			dumpAll.vals = append(dumpAll.vals, (a.DBCPU+a.ClientCPU)*1e6/float64(a.Rows))
		}
		var copyAll spread
		for i := range def.dbUS.vals {
			copyAll.vals = append(copyAll.vals, def.dbUS.vals[i]+def.proxyUS.vals[i])
		}
		p("| CPU per row: copy (4 x 1000: proxy + MariaDB) / dump (MariaDB + mariadb-dump + mariadb) | %.1f / %.1f µs = %.2f | copy %s; dump %s | lower is cheaper |\n",
			copyAll.median(), dumpAll.median(), copyAll.median()/dumpAll.median(), copyAll.list(1), dumpAll.list(1))
	}
	if best != nil && len(ofRuns) > 0 {
		lo, hi := slices.Min(best.rate.vals)/slices.Max(ofR.vals), slices.Max(best.rate.vals)/slices.Min(ofR.vals)
		p("| copy best / outfile anchor | %.2f | %.2f–%.2f | goal ≥ 1: %s |\n", best.rate.median()/ofR.median(), lo, hi, verdict(best.rate.median()/ofR.median(), lo, hi, 1))
	}
	type awCell struct {
		aw                         int
		rate, ratio, write, maxLag spread
	}
	var aws []*awCell
	for _, c := range r.CatchUp {
		var a *awCell
		for _, x := range aws {
			if x.aw == c.ApplyWorkers {
				a = x
			}
		}
		if a == nil {
			a = &awCell{aw: c.ApplyWorkers}
			aws = append(aws, a)
		}
		a.rate.vals = append(a.rate.vals, c.AppliedRate)
		a.write.vals = append(a.write.vals, c.WriteRate)
		a.ratio.vals = append(a.ratio.vals, c.AppliedRate/c.WriteRate)
		a.maxLag.vals = append(a.maxLag.vals, c.MaxLag)
	}
	for _, a := range aws {
		p("| catch-up, %d apply workers | %.0f changes/s = %.2f x the write rate (%.0f/s) | ±%.0f%% (%s); ratio %s | keep up (ratio ≥ 1): %s; max lag %s s |\n", a.aw, a.rate.median(), a.ratio.median(), a.write.median(),
			a.rate.pm(), a.rate.list(0), a.ratio.list(2), verdict(a.ratio.median(), slices.Min(a.ratio.vals), slices.Max(a.ratio.vals), 1), a.maxLag.list(0))
	}
	vsIdle, vsCatch, vsCut := b.verifySpreads()
	if len(vsIdle.vals) > 0 {
		p("| verify, no writes to the table (copy sweep) | %.0f rows/s | ±%.0f%% over %d workflows (%.0f–%.0f) | verify_rows / verify_seconds |\n", vsIdle.median(), vsIdle.pm(), len(vsIdle.vals), slices.Min(vsIdle.vals), slices.Max(vsIdle.vals))
	}
	if len(vsCut.vals) > 0 {
		p("| verify, load client writing (cutover runs) | %.0f rows/s | ±%.0f%% over %d workflows (%s) | verify_rows / verify_seconds |\n", vsCut.median(), vsCut.pm(), len(vsCut.vals), vsCut.list(0))
	}
	if len(vsCatch.vals) > 0 {
		p("| verify, catch-up runs | %.0f rows/s | ±%.0f%% over %d workflows (%s) | includes the apply running on to the snapshot's position |\n", vsCatch.median(), vsCatch.pm(), len(vsCatch.vals), vsCatch.list(0))
	}
	if c := r.Cutover; c != nil {
		for _, kind := range []string{"cutover", "rollback"} {
			var ps []float64
			for _, ev := range c.Events {
				if ev.Kind == kind {
					ps = append(ps, ev.PauseMS)
				}
			}
			slices.Sort(ps)
			if len(ps) > 0 {
				goal := "goal < 1 s: met; stretch < 100 ms: met"
				switch {
				case pct(ps, 99) >= 1000:
					goal = "goal < 1 s: **not met**"
				case pct(ps, 99) >= 100:
					goal = "goal < 1 s: met; stretch < 100 ms: **not met**"
				}
				p("| %s pause (pause_ms) | p50 %.1f ms, p99 %.1f ms | max %.1f ms over %d | %s |\n", kind, pct(ps, 50), pct(ps, 99), ps[len(ps)-1], len(ps), goal)
			}
		}
		p("| statements started during a cutover or rollback | p50 %.2f ms, p99 %.2f ms, max %.2f ms | %d statements, %d errors | baseline (2 s before each): p50 %.2f, p99 %.2f ms |\n",
			c.Window.P50, c.Window.P99, c.Window.Max, c.Window.N, c.Window.Errors, c.Baseline.P50, c.Baseline.P99)
		p("| added latency during the pause | p50 %+.2f ms, p99 %+.2f ms | cutover windows alone: p50 %+.2f, p99 %+.2f ms | window minus baseline |\n", c.Window.P50-c.Baseline.P50, c.Window.P99-c.Baseline.P99,
			c.CutoverWindow.P50-c.Baseline.P50, c.CutoverWindow.P99-c.Baseline.P99)
	}
	p("\n")

	if len(cells) > 0 {
		p("## 1. Copy throughput by copy workers and batch rows\n\n")
		p("Each cell: a new workflow (options CopyWorkers, BatchRows, ApplyWorkers 4, ThrottleLatency 0 = no throttle), polled every 100 ms until its phase leaves `copying` (the copy figures are read there), then followed to `ready` (a catch-up with nothing written beside it, and a verify) and cancelled. Cancelling from `ready` gives a verify figure with nothing written beside it (section 4); before fc7516a a cancel during `catching-up` did not end a workflow (it went on to verify and saved `ready` over `cancelled`). rows/s = rows_copied / copy_seconds (the workflow's own copy time: from its first read to its last write and checkpoint; creating the 8 subtables, reading the start positions and counting rows come before it and are in `wall s`). The copy reads the 2 source subtables in key order in chunks of BatchRows x 8 rows (1 000 to 50 000), at most `workers` at a time (so never more than 2 readers here), streams each chunk, and writes batches of BatchRows rows per new subtable with `LOAD DATA LOCAL INFILE ... REPLACE` through `workers` writers while the read goes on (the next chunk is read while the writers finish the one before), checkpointing every chunk in the sidecar. CPU µs/row: utime+stime from /proc over POST to end of copy, / rows.\n\n")
		p("| workers | batch rows | rows/s (median ±) | MB/s | rounds rows/s | wall s | proxy CPU µs/row | MariaDB CPU µs/row |\n|---:|---:|---:|---:|---|---:|---:|---:|\n")
		for _, c := range cells {
			p("| %d | %d | %s | %.1f | %s | %.2f | %.2f | %.2f |\n", c.w, c.b, c.rate.fmt(0), c.mbs.median(), c.rate.list(0), c.wall.median(), c.proxyUS.median(), c.dbUS.median())
		}
		ws, bs := ints(*workers), ints(*batches)
		p("\nMedian rows/s as a matrix:\n\n| workers \\ batch rows |")
		for _, bt := range bs {
			p(" %d |", bt)
		}
		p("\n|---:|")
		for range bs {
			p("---:|")
		}
		p("\n")
		for _, w := range ws {
			p("| %d |", w)
			for _, bt := range bs {
				for _, c := range cells {
					if c.w == w && c.b == bt {
						p(" %.0f |", c.rate.median())
					}
				}
			}
			p("\n")
		}
		p("\n")
	}
	if len(dumpRuns)+len(ofRuns) > 0 {
		p("## 2. Anchors: the same rows copied by MariaDB's own tools\n\n")
		p("Same run, same servers, same rows, in each round after the sweep. Each node's source subtable is copied into `sbanchor.<subtable>` (CREATE TABLE ... LIKE, empty) on the same server, both nodes at once; rows/s = all %d rows / wall time of both. `dump`: `mariadb-dump --no-defaults --no-create-info --single-transaction sbtest <subtable> | mariadb sbanchor` (default --opt: extended inserts, LOCK TABLES, DISABLE KEYS). `outfile`: `SELECT * ... INTO OUTFILE` into the server's tmpdir, then `LOAD DATA INFILE` (export and load timed apart, both nodes at once in each). Unlike the workflow's copy, the anchors keep every row on its own server and do not redistribute rows to 8 subtables over both nodes; the workflow's copy also checkpoints every chunk.\n\n", r.Rows)
		p("| anchor | rows/s (median ±) | MB/s | rounds rows/s | seconds per round | MariaDB CPU µs/row |\n|---|---:|---:|---|---|---:|\n")
		for _, k := range []struct {
			name string
			rate spread
			mbs  spread
			db   spread
			runs []anchorRun
		}{{"mariadb-dump \\| mariadb", dumpR, dumpM, dumpDB, dumpRuns}, {"INTO OUTFILE + LOAD DATA INFILE", ofR, ofM, ofDB, ofRuns}} {
			if len(k.runs) == 0 {
				continue
			}
			var secs []string
			for _, a := range k.runs {
				if a.Kind == "outfile" {
					secs = append(secs, fmt.Sprintf("%.2f (export %.2f + load %.2f)", a.Seconds, a.Export, a.Load))
				} else {
					secs = append(secs, fmt.Sprintf("%.2f", a.Seconds))
				}
			}
			p("| %s | %s | %.1f | %s | %s | %.2f |\n", k.name, k.rate.fmt(0), k.mbs.median(), k.rate.list(0), strings.Join(secs, "; "), k.db.median())
		}
		if best != nil {
			p("\nRatios, copy (best setting, %d x %d) / anchor, medians (and the lowest and highest the rounds allow): ", best.w, best.b)
			if len(dumpRuns) > 0 {
				p("dump %.2f (%.2f–%.2f)", best.rate.median()/dumpR.median(), slices.Min(best.rate.vals)/slices.Max(dumpR.vals), slices.Max(best.rate.vals)/slices.Min(dumpR.vals))
			}
			if len(ofRuns) > 0 {
				p(", outfile %.2f (%.2f–%.2f)", best.rate.median()/ofR.median(), slices.Min(best.rate.vals)/slices.Max(ofR.vals), slices.Max(best.rate.vals)/slices.Min(ofR.vals))
			}
			if def != nil && len(dumpRuns) > 0 {
				p("; default setting (4 x 1000) / dump %.2f", def.rate.median()/dumpR.median())
			}
			p(".\n\n")
		}
	}
	if len(r.CatchUp) > 0 {
		p("## 3. Catch-up under sysbench oltp_write_only\n\n")
		p("Each run: sysbench `oltp_write_only` (%d threads, `--skip-trx=on`: single-row autocommit writes, 4 per event: UPDATE k, UPDATE c, DELETE, INSERT; errors 1062/1213/1205/1020 ignored) writes through the proxy for %d s; 1 s after it starts, a workflow starts (CopyWorkers 4, BatchRows 1000, ThrottleLatency 0, ApplyWorkers as given), so the copy runs under the writes and the catch-up begins with their backlog. Status polled every 100 ms. Times are seconds since the workflow's POST.\n\n", *threads, *writeSecs)
		p("- **copy end**: first status out of `copying`; **catch-up end** = first status `ready` less verify_seconds (the verify runs right after the apply has reached the positions read when the catch-up began); **applied/s** = changes_applied at catch-up end / (catch-up end − copy end). The apply starts at the position read before the copy, so it also reads past the copy's own REPLACEs into the new subtables in the binary log (filtered out, not counted).\n")
		p("- **write rate**: sysbench's write statements per second over its whole run (`queries performed: write` / total time); each changes one row, so it is row changes per second. **backlog** ≈ the writes sysbench reported per second from the workflow's start to copy end (what the copy left to the apply; an estimate to the second). **ratio** = applied/s / write rate: above 1 the apply gains on the writer.\n")
		p("- **copy end→ready applied/s**: changes_applied at the first `ready` status / (ready − copy end), the verify included (during it the apply is first held, then runs on to the snapshot's position).\n")
		p("- **live**: from catch-up end until sysbench stops (when it is still writing): seconds, the apply's rate, and sysbench's own per-second write reports for those seconds; **drain**: from sysbench's end to the last sample whose changes_applied moved, and the changes applied per second in it (the apply with no writer beside it); **max lag**: largest `lag_seconds` of any sample, and after catch-up end (age of the oldest change read but not yet applied, 1 s resolution; 0 while copying, before the apply starts).\n")
		p("- **applied / binlog**: changes_applied once everything settled, and the row changes of `sbtest1_0000/0001` in the binary logs from the workflow's start position to then, counted by `changestream` (each one change). They should match. **changes/REPLACE**: the inserts and updates among those changes over the REPLACE statements the two servers ran from copy end to the end (`Com_replace`; nothing else runs REPLACE then). The apply writes inserts and updates as REPLACEs, keeping only the last change of a row within a batch, so this says how well it batches.\n\n")
		p("| round | apply workers | copy rows/s | copy end s | catch-up end s | ready s | backlog | applied in catch-up | applied/s | copy end→ready applied/s | write rate | ratio | live s: applied/s vs writes/s | drain s: applied/s | max lag s (after catch-up) | applied / binlog | changes/REPLACE | sysbench ignored errors |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|---:|\n")
		for _, c := range r.CatchUp {
			live := "–"
			if c.LiveSeconds > 0 {
				live = fmt.Sprintf("%.1f: %.0f vs %.0f", c.LiveSeconds, c.LiveApplied, c.LiveWriteRate)
			}
			drain := "–"
			if c.DrainRate > 0 {
				drain = fmt.Sprintf("%.1f: %.0f", c.Drain, c.DrainRate)
			}
			perStmt := 0.0
			if c.ReplaceStmts > 0 {
				perStmt = float64(c.ReplaceRows) / float64(c.ReplaceStmts)
			}
			p("| %d | %d | %.0f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %s | %s | %.0f (%.0f) | %d / %d | %.2f | %d |\n", c.Round, c.ApplyWorkers, c.CopyRowsSec, c.CopyEnd, c.CatchEnd, c.Ready,
				c.Backlog, c.Applied, c.AppliedRate, c.ToReady, c.WriteRate, c.AppliedRate/c.WriteRate, live, drain, c.MaxLag, c.MaxLagLive, c.TotalApplied, c.BinlogChanges, perStmt, c.SysbenchErrs)
		}
		p("\n| apply workers | catch-up applied/s (median ±) | write rate | ratio (rounds) | live applied/s / writes/s (rounds) | drain applied/s (median ±) | max lag s (rounds) |\n|---:|---:|---:|---|---|---:|---|\n")
		for _, a := range aws {
			var live []string
			var drain spread
			for _, c := range r.CatchUp {
				if c.ApplyWorkers != a.aw {
					continue
				}
				if c.LiveSeconds > 0 && c.LiveWriteRate > 0 {
					live = append(live, fmt.Sprintf("%.2f", c.LiveApplied/c.LiveWriteRate))
				} else {
					live = append(live, "–")
				}
				if c.DrainRate > 0 {
					drain.vals = append(drain.vals, c.DrainRate)
				}
			}
			p("| %d | %s | %s | %s | %s | %s | %s |\n", a.aw, a.rate.fmt(0), a.write.fmt(0), a.ratio.list(2), strings.Join(live, " / "), drain.fmt(0), a.maxLag.list(0))
		}
		p("\nThe 100 ms samples of every run are in `catchup-timeline.csv` (t, phase, rows_copied, changes_applied, lag_seconds).\n\n")
	}
	if v := b.verifies(); len(v) > 0 {
		p("## 4. Verify\n\n")
		p("verify_rows / verify_seconds of every workflow that reached `ready`: per primary-key range of 1 000 ids, COUNT, the sum of CRC32s and the XOR of CRC32Cs of each row's canonical image (docs/data-movement.md) of the source rows (in a consistent snapshot per node) against the new subtables with the apply held at the snapshot's position; ranges that differ are compared once more. Rows = source rows compared.\n\n")
		p("| workflow | context | rows | seconds | rows/s |\n|---|---|---:|---:|---:|\n")
		for _, x := range v {
			p("| %s | %s | %d | %.3f | %.0f |\n", x.Workflow, x.Context, x.Rows, x.Seconds, x.RowsSec)
		}
		p("\nMedian rows/s: %s in the copy sweep (nothing written beside it), %s in the cutover runs (the load client's 1 000 updates/s beside it), %s in the catch-up runs. verify_seconds counts from the start of the verify to its end, so it includes holding the apply, taking the snapshots, and the apply running on to the snapshots' positions: the further the apply is behind, and the busier the cores, the longer.\n\n", vsIdle.fmt(0), vsCut.fmt(0), vsCatch.fmt(0))
	}
	if c := r.Cutover; c != nil {
		p("## 5. Cutover and rollback pause\n\n")
		p("A load client (Go, go-sql-driver, text protocol) runs %d connections through the proxy, paced to %d statements/s in all, each statement a point `SELECT c FROM sbtest1 WHERE id = ?` or `UPDATE sbtest1 SET k = k + 1 WHERE id = ?` (half each, uniform random ids), and records each statement's start and latency. Meanwhile %d times: a workflow (4 x 1000, ApplyWorkers 4, ThrottleLatency 0, CutoverTimeout default 1 s) is run to `ready`, 2 s later `POST .../cutover` (returns once switched), 3 s later `POST .../rollback` (a cutover back: the old rule again, the new subtables dropped). **pause_ms** is the workflow's own figure (statements on the table held: from holding them to releasing them under the new rule). **window**: statements that started while the POST was in flight (it contains the pause); **baseline**: those that started in the 2 s before the POST. Percentiles are nearest-rank; with %d events a p99 of pauses is their maximum.\n\n", *loadConns, *loadRate, *cutovers, *cutovers)
		p("| workflow | event | pause_ms | POST ms | window: statements | p50 ms | p99 ms | max ms | errors | baseline: statements | p50 ms | p99 ms |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, ev := range c.Events {
			p("| %s | %s | %.1f | %.1f | %d | %.2f | %.2f | %.2f | %d | %d | %.2f | %.2f |\n", ev.Workflow, ev.Kind, ev.PauseMS, ev.PostMS, ev.Window.N, ev.Window.P50, ev.Window.P99, ev.Window.Max, ev.Window.Errors,
				ev.Baseline.N, ev.Baseline.P50, ev.Baseline.P99)
		}
		p("\n| statements | n | p50 ms | p99 ms | max ms | errors |\n|---|---:|---:|---:|---:|---:|\n")
		for _, x := range []struct {
			name string
			s    latStats
		}{{"in a cutover or rollback window", c.Window}, {"in a cutover window", c.CutoverWindow}, {"in a rollback window (the POST also drops the 8 new subtables)", c.RollbackWindow},
			{"baseline (2 s before each)", c.Baseline}, {"whole section (copies and verifies included)", c.Whole}} {
			p("| %s | %d | %.2f | %.2f | %.2f | %d |\n", x.name, x.s.N, x.s.P50, x.s.P99, x.s.Max, x.s.Errors)
		}
		p("\nAdded latency of statements that started during a pause window: p50 %+.2f ms, p99 %+.2f ms (window minus baseline). %d statements in %.0f s; rows through the proxy afterwards: %d.",
			c.Window.P50-c.Baseline.P50, c.Window.P99-c.Baseline.P99, c.Statements, c.Seconds, r.RowsAfter)
		if len(c.Errors) > 0 {
			p(" **Errors:**")
			for k, n := range c.Errors {
				p(" %d x `%s`;", n, k)
			}
		} else {
			p(" No statement failed.")
		}
		p(" Statements within 3 s of each event: `raw/statements.csv.gz` (not committed).\n\n")
	}
	p("## Files\n\n`results.json` (everything but the samples), `copy.csv`, `anchors.csv`, `catchup.csv`, `catchup-timeline.csv`, `verify.csv`, `cutover.csv`, `ks.yaml` (the proxy's config), `proxy.log`, `prepare.log`, `move.log` (the driver's log); `raw/` (not committed): sysbench outputs, statements around each pause.\n")
	return m.String()
}

func (b *bench) writeCSV() error {
	r := b.res
	files := map[string]*strings.Builder{}
	w := func(name, format string, a ...any) {
		if files[name] == nil {
			files[name] = &strings.Builder{}
		}
		fmt.Fprintf(files[name], format, a...)
	}
	w("copy.csv", "round,workflow,copy_workers,batch_rows,rows_copied,copy_seconds,rows_per_s,mb_per_s,wall_seconds,proxy_cpu_s,db_cpu_s,ready_seconds,verify_rows,verify_seconds,cancel_seconds\n")
	for _, c := range r.Copy {
		w("copy.csv", "%d,%s,%d,%d,%d,%.3f,%.0f,%.2f,%.3f,%.2f,%.2f,%.3f,%d,%.3f,%.3f\n", c.Round, c.Workflow, c.Workers, c.Batch, c.Rows, c.Seconds, c.RowsPerSec, c.MBPerSec, c.WallSeconds, c.ProxyCPU, c.DBCPU,
			c.ReadySeconds, c.VerifyRows, c.VerifySeconds, c.CancelSeconds)
	}
	w("anchors.csv", "round,kind,rows,seconds,export_seconds,load_seconds,rows_per_s,mb_per_s,db_cpu_s,client_cpu_s\n")
	for _, a := range r.Anchors {
		w("anchors.csv", "%d,%s,%d,%.3f,%.3f,%.3f,%.0f,%.2f,%.2f,%.2f\n", a.Round, a.Kind, a.Rows, a.Seconds, a.Export, a.Load, a.RowsPerSec, a.MBPerSec, a.DBCPU, a.ClientCPU)
	}
	w("catchup.csv", "round,workflow,apply_workers,copy_rows_per_s,copy_end_s,ready_s,verify_seconds,catchup_end_s,catchup_applied,applied_per_s,copy_end_to_ready_applied_per_s,backlog_estimate,write_rate,ratio,sysbench_writes,sysbench_start_s,sysbench_end_s,live_seconds,live_applied_per_s,live_write_rate,max_lag_s,max_lag_live_s,drain_s,drain_applied_per_s,total_applied,binlog_changes,replace_rows,replace_statements,sysbench_ignored_errors\n")
	w("catchup-timeline.csv", "workflow,apply_workers,t_s,phase,rows_copied,changes_applied,lag_s\n")
	for _, c := range r.CatchUp {
		w("catchup.csv", "%d,%s,%d,%.0f,%.2f,%.2f,%.3f,%.2f,%.0f,%.0f,%.0f,%.0f,%.0f,%.3f,%d,%.2f,%.2f,%.2f,%.0f,%.0f,%.1f,%.1f,%.2f,%.0f,%d,%d,%d,%d,%d\n", c.Round, c.Workflow, c.ApplyWorkers, c.CopyRowsSec, c.CopyEnd, c.Ready, c.VerifySecs,
			c.CatchEnd, c.Applied, c.AppliedRate, c.ToReady, c.Backlog, c.WriteRate, c.AppliedRate/c.WriteRate, c.Writes, c.SysbenchStart, c.SysbenchEnd, c.LiveSeconds, c.LiveApplied, c.LiveWriteRate,
			c.MaxLag, c.MaxLagLive, c.Drain, c.DrainRate, c.TotalApplied, c.BinlogChanges, c.ReplaceRows, c.ReplaceStmts, c.SysbenchErrs)
		for _, s := range c.Samples {
			w("catchup-timeline.csv", "%s,%d,%.3f,%s,%d,%d,%.0f\n", c.Workflow, c.ApplyWorkers, s.T, s.Phase, s.Copied, s.Applied, s.Lag)
		}
	}
	w("verify.csv", "workflow,context,rows,seconds,rows_per_s\n")
	for _, v := range b.verifies() {
		w("verify.csv", "%s,%q,%d,%.3f,%.0f\n", v.Workflow, v.Context, v.Rows, v.Seconds, v.RowsSec)
	}
	if c := r.Cutover; c != nil {
		w("cutover.csv", "workflow,event,pause_ms,post_ms,start_s,window_n,window_p50_ms,window_p99_ms,window_max_ms,window_errors,baseline_n,baseline_p50_ms,baseline_p99_ms,baseline_max_ms\n")
		for _, ev := range c.Events {
			w("cutover.csv", "%s,%s,%.3f,%.3f,%.3f,%d,%.3f,%.3f,%.3f,%d,%d,%.3f,%.3f,%.3f\n", ev.Workflow, ev.Kind, ev.PauseMS, ev.PostMS, ev.Start, ev.Window.N, ev.Window.P50, ev.Window.P99, ev.Window.Max,
				ev.Window.Errors, ev.Baseline.N, ev.Baseline.P50, ev.Baseline.P99, ev.Baseline.Max)
		}
	}
	for name, sb := range files {
		if err := os.WriteFile(filepath.Join(*out, name), []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
