package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// baselinePath is the path bench/run.sh gives the proxy built from BASELINE
// (an older commit): "before", against which proxy is "after".
const baselinePath = "baseline"

// roundRatios is, for every round in which both paths ran successfully, f of
// num's run over f of den's run in the same test, mode, threads and round.
// Pairing by round cancels the drift between rounds that the medians of
// each path leave in.
func (rp *Report) roundRatios(test, mode string, threads int, num, den string, f func(Record) float64) []float64 {
	runs := map[string]map[int]Record{}
	for _, r := range rp.Records {
		if r.Test == test && r.Mode == mode && r.Threads == threads && r.OK() && (r.Path == num || r.Path == den) {
			if runs[r.Path] == nil {
				runs[r.Path] = map[int]Record{}
			}
			runs[r.Path][r.Round] = r
		}
	}
	var out []float64
	rounds := make([]int, 0, len(runs[num]))
	for n := range runs[num] {
		rounds = append(rounds, n)
	}
	slices.Sort(rounds)
	for _, n := range rounds {
		d, ok := runs[den][n]
		if !ok {
			continue
		}
		if v := ratio(f(runs[num][n]), f(d)); !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// pairedRatio is the median of per-round ratios with their min and max, as a
// spreadRatio (whose String and verdict render it), and how many rounds it
// rests on.
func pairedRatio(vs []float64) (spreadRatio, int) {
	if len(vs) == 0 {
		return spreadRatio{math.NaN(), math.NaN(), math.NaN()}, 0
	}
	return spreadRatio{median(vs), slices.Min(vs), slices.Max(vs)}, len(vs)
}

// format renders "1.002 (0.998–1.010)" with prec decimals, or only the
// median when the bounds round to it (one round) or are missing.
func (r spreadRatio) format(prec int) string {
	if !r.valid() {
		return "–"
	}
	s := fmtNum(r.Med, prec)
	if !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi) && (fmtNum(r.Lo, prec) != s || fmtNum(r.Hi, prec) != s) {
		s += " (" + fmtNum(r.Lo, prec) + "–" + fmtNum(r.Hi, prec) + ")"
	}
	return s
}

// check renders r with prec decimals and marks it against target: ✓ when the
// median meets it (at most target, or at least it when atLeast), ✗ when it
// does not, and a note when the range over rounds crosses the target.
func (r spreadRatio) check(target float64, atLeast bool, prec int) string {
	if !r.valid() {
		return "–"
	}
	s := r.format(prec)
	met := r.Med <= target
	if atLeast {
		met = r.Med >= target
	}
	if met {
		s += " ✓"
	} else {
		s += " ✗"
	}
	if !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi) && r.Lo < target && r.Hi > target {
		s += " (spread crosses " + fmtNum(target, 2) + ")"
	}
	return s
}

// Per-run measures the baseline section divides.
func runQPS(r Record) float64    { return r.QPS }
func runCPU(r Record) float64    { return perQuery(r.ProcCPUSec, r.Queries, 1e6) }
func runAllocs(r Record) float64 { return perQuery(r.Mallocs, r.Queries, 1) }

// envTarget reads a numeric target from the environment block, NaN if absent.
func (rp *Report) envTarget(key string) float64 {
	v, err := strconv.ParseFloat(envValue(rp.Env, key), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// writeBaseline writes the "Against the baseline" section when the run has a
// baseline path: for every test, mode and threads where both proxy and
// baseline ran, each proxy's QPS and CPU per query against direct and the
// relay, allocations per query, and proxy over baseline (after / before),
// every ratio paired by round: the median of the rounds' ratios with their
// min–max.
func (rp *Report) writeBaseline(b *strings.Builder) {
	type row struct {
		test, mode string
		threads    int
	}
	var rows []row
	for _, test := range uniqueInOrder(rp.Records, func(r Record) string { return r.Test }) {
		for _, mode := range uniqueInOrder(rp.Records, func(r Record) string { return r.Mode }) {
			for _, t := range sortedThreads(rp.Records) {
				p, q := rp.cell(test, mode, t, "proxy"), rp.cell(test, mode, t, baselinePath)
				if p != nil && q != nil && (p.OKRounds > 0 || q.OKRounds > 0) {
					rows = append(rows, row{test, mode, t})
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	cpuTarget, qpsTarget := rp.envTarget("target cpu/relay"), rp.envTarget("target qps/relay")

	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Against the baseline\n\n")
	if note := envValue(rp.Env, "baseline"); note != "" {
		p("`baseline` is %s. `proxy` is the working tree.\n\n", mdEscape(note))
	}
	p("Every ratio here is paired by round: it is computed within each round, where the paths ran back to back, " +
		"and given as the median over rounds with the lowest and highest round in parentheses. " +
		"`CPU / relay` is the path's CPU µs per query over the relay's; `after / before` is proxy over baseline.\n\n")
	p("| test | mode | threads | path | QPS (median) | QPS / direct | QPS / relay | CPU µs/query | CPU / relay | allocs/query | GC/10k queries | errors |\n")
	p("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		for _, path := range []string{"relay", baselinePath, "proxy"} {
			c := rp.cell(r.test, r.mode, r.threads, path)
			if c == nil {
				continue
			}
			if c.OKRounds == 0 {
				p("| %s | %s | %d | %s | **FAILED**: %s | | | | | | | |\n", r.test, r.mode, r.threads, path,
					mdEscape(truncate(failureReason(c), 90)))
				continue
			}
			q := fmtNum(c.QPS, 0)
			if c.OKRounds > 1 && c.QPS > 0 {
				q += fmt.Sprintf(" ±%.1f%%", 50*(c.QPSMax-c.QPSMin)/c.QPS)
			}
			toDirect, _ := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, path, "direct", runQPS))
			toRelay, cpuRelay := "–", "–"
			if path != "relay" {
				qr, _ := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, path, "relay", runQPS))
				cr, _ := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, path, "relay", runCPU))
				toRelay, cpuRelay = qr.String(), cr.String()
			}
			errs := fmtNum(c.Errors, 0)
			if c.Errors > 0 || len(c.Failures) > 0 {
				errs = fmt.Sprintf("**%s**, %d/%d rounds failed ⚠", errs, len(c.Failures), c.Rounds)
			}
			p("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.test, r.mode, r.threads, path,
				q, toDirect, toRelay, fmtNum(c.CPUusPerQ, 1), cpuRelay, fmtNum(c.AllocsPerQ, 2), fmtNum(c.GCPer10kQ, 2), errs)
		}
	}
	p("\n")

	p("| test | mode | threads | rounds | QPS after / before | CPU/query after / before | allocs/query after / before (≤ 1) |")
	if !math.IsNaN(cpuTarget) {
		p(" proxy CPU / relay (≤ %s) |", fmtNum(cpuTarget, 2))
	}
	if !math.IsNaN(qpsTarget) {
		p(" proxy QPS / relay (≥ %s) |", fmtNum(qpsTarget, 2))
	}
	p("\n|---|---|---:|---:|---:|---:|---:|")
	if !math.IsNaN(cpuTarget) {
		p("---:|")
	}
	if !math.IsNaN(qpsTarget) {
		p("---:|")
	}
	p("\n")
	for _, r := range rows {
		qps, n := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, "proxy", baselinePath, runQPS))
		cpu, _ := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, "proxy", baselinePath, runCPU))
		allocs, _ := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, "proxy", baselinePath, runAllocs))
		p("| %s | %s | %d | %d | %s | %s | %s |", r.test, r.mode, r.threads, n, qps, cpu, allocs.check(1, false, 3))
		if !math.IsNaN(cpuTarget) {
			cr, _ := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, "proxy", "relay", runCPU))
			p(" %s |", cr.check(cpuTarget, false, 2))
		}
		if !math.IsNaN(qpsTarget) {
			qr, _ := pairedRatio(rp.roundRatios(r.test, r.mode, r.threads, "proxy", "relay", runQPS))
			p(" %s |", qr.check(qpsTarget, true, 2))
		}
		p("\n")
	}
	p("\n")
}
