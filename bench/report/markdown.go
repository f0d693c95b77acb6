package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// EnvVar is one key=value line of the environment file run.sh writes.
type EnvVar struct{ Key, Value string }

// readEnv parses key=value lines; blank lines and # comments are skipped and
// a repeated key is appended to the previous value with "; ".
func readEnv(rd io.Reader) ([]EnvVar, error) {
	var out []EnvVar
	idx := map[string]int{}
	sc := bufio.NewScanner(rd)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("env line %d: want key=value, got %q", n, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if i, dup := idx[k]; dup {
			out[i].Value += "; " + v
			continue
		}
		idx[k] = len(out)
		out = append(out, EnvVar{k, v})
	}
	return out, sc.Err()
}

func envValue(env []EnvVar, key string) string {
	for _, e := range env {
		if e.Key == key {
			return e.Value
		}
	}
	return ""
}

// modeTitle names sysbench's --db-ps-mode values for headings.
func modeTitle(mode string) string {
	switch mode {
	case "disable":
		return "text protocol (`--db-ps-mode=disable`)"
	case "auto":
		return "binary prepared statements (`--db-ps-mode=auto`)"
	}
	return "`--db-ps-mode=" + mode + "`"
}

// mdEscape keeps a value from breaking a Markdown table row.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func fmtNum(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func fmtSigned(v float64, prec int) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if v >= 0 {
		s = "+" + s
	}
	return s
}

// failureReason summarises why the rounds of a cell failed.
func failureReason(c *Cell) string {
	seen := map[string]bool{}
	var rs []string
	for _, f := range c.Failures {
		if !seen[f.Status] {
			seen[f.Status] = true
			rs = append(rs, f.Status)
		}
	}
	return strings.Join(rs, "; ")
}

// Report holds everything the Markdown and SVG writers need.
type Report struct {
	Records []Record
	Cells   map[Key]*Cell
	Env     []EnvVar
	Chart   string // File name of the SVG, relative to the report; "" for none.
}

func newReport(recs []Record, env []EnvVar) *Report {
	return &Report{Records: recs, Cells: summarize(recs), Env: env}
}

// paths lists the paths in report order: the ladder, then the variants in the
// order run.sh ran them (its "paths" environment line), then anything else.
func (rp *Report) paths() []string {
	return orderedPaths(rp.Records, strings.Fields(envValue(rp.Env, "paths")))
}

// variants lists the paths that are not rungs of the ladder, in report order.
func (rp *Report) variants() []string {
	var vs []string
	for _, p := range rp.paths() {
		if !isLadder(p) {
			vs = append(vs, p)
		}
	}
	return vs
}

func (rp *Report) cell(test, mode string, threads int, path string) *Cell {
	return rp.Cells[Key{test, mode, threads, path}]
}

// qps is the median QPS of a cell, NaN if the cell is missing.
func (rp *Report) qps(test, mode string, threads int, path string) float64 {
	if c := rp.cell(test, mode, threads, path); c != nil {
		return c.QPS
	}
	return math.NaN()
}

// tps is the median tps of a cell, NaN if the cell is missing.
func (rp *Report) tps(test, mode string, threads int, path string) float64 {
	if c := rp.cell(test, mode, threads, path); c != nil {
		return c.TPS
	}
	return math.NaN()
}

// ratioTo is cell c's median QPS over base's in the same test, mode and
// threads, or by tps for a path whose queries do not compare (byTPS); the
// string marks the latter " (tps)".
func (rp *Report) ratioTo(c *Cell, base string) string {
	if byTPS(c.Path) {
		if r := ratio(c.TPS, rp.tps(c.Test, c.Mode, c.Threads, base)); !math.IsNaN(r) {
			return fmtNum(r, 2) + " (tps)"
		}
		return "–"
	}
	return fmtNum(ratio(c.QPS, rp.qps(c.Test, c.Mode, c.Threads, base)), 2)
}

// hasPath reports whether any record ran on path.
func (rp *Report) hasPath(path string) bool {
	for _, r := range rp.Records {
		if r.Path == path {
			return true
		}
	}
	return false
}

// writeMarkdown renders the whole report.
func (rp *Report) writeMarkdown(w io.Writer) error {
	b := &strings.Builder{}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }

	failed := 0
	for _, r := range rp.Records {
		if !r.OK() {
			failed++
		}
	}
	title := "shardgate benchmark"
	if d := envValue(rp.Env, "date"); d != "" {
		title += " — " + d
	}
	p("# %s\n\n", title)
	p("%d sysbench runs, %d failed.\n\n", len(rp.Records), failed)

	if len(rp.Env) > 0 {
		p("## Environment\n\n| | |\n|---|---|\n")
		for _, e := range rp.Env {
			p("| %s | %s |\n", mdEscape(e.Key), mdEscape(e.Value))
		}
		p("\n")
	}

	rounds, duration := envValue(rp.Env, "rounds"), envValue(rp.Env, "duration_s")
	p("## How to read this\n\n")
	if rounds != "" && duration != "" {
		p("- Every cell is the median of %s rounds of %s s. Within a round the paths run back to back "+
			"(direct, relay, proxy, direct, …) so that drift hits every path alike.\n", rounds, duration)
	} else {
		p("- Every cell is the median over rounds; paths run interleaved within each round.\n")
	}
	p("- `QPS (median)` is sysbench's `queries:` per-second figure; ± is half the min–max range over rounds, relative to the median.\n")
	p("- `ratio to direct` / `ratio to relay`: median QPS of the row divided by the median QPS of `direct` / `relay` in the same table and thread count.\n")
	p("- `p95 ms`: 95th percentile latency from sysbench's latency histogram (1 µs resolution; sysbench's own rule).\n")
	p("- `CPU µs/query`: (utime+stime) of the relay or proxy process during the run, from /proc/PID/stat, × 10⁶ / queries. `direct` has no middle process.\n")
	p("- `RSS MB`: VmRSS of the relay or proxy process at the end of the run.\n")
	p("- `errors`: sysbench ignored errors + reconnects summed over rounds; must be 0. Failed rounds are listed at the end.\n")
	p("- `DB CPU µs/query`: the same CPU measure for the MariaDB server(s), to show where the shared cores went.\n")
	p("- Added latency at 1 thread: the row's latency minus `direct`'s (avg from the latency sum / events, p50 from the histogram).\n")
	if rp.hasPath("split") {
		p("- `split`: sysbench straight to MariaDB node1 (no proxy) running `bench/split.lua`, the same statements and random ids as the test, " +
			"against a hash split of each table into parts (`sbsplit.sbtestN_0000`…, row id in part id mod parts, as the sharded proxy places it): " +
			"a point select reads one part, each range query runs on every part in turn. Its queries count each range query once per part, " +
			"so its ratios are by tps (marked `(tps)`), it has no line on a QPS chart other than point select's, and only " +
			"`oltp_read_only` and `oltp_point_select` have a split script (other tests show it as unavailable).\n")
	}
	if rp.hasPath("ranged") {
		p("- `ranged`: a proxy like `sharded` with a range rule instead of a hash rule (`RANGE_CONFIG`, database `sbrange`), " +
			"so a range query goes only to the subtables it touches.\n")
	}
	if rp.hasPath("split") || rp.hasPath("ranged") {
		p("- Sharding ceiling: split / direct is the most a hash-sharded path can keep when each range query runs on every part; " +
			"the section compares sharded / proxy with it, and ranged with proxy, by tps.\n")
	}
	if vs := rp.variants(); len(vs) > 0 {
		names := make([]string, len(vs))
		for i, v := range vs {
			names[i] = "`" + mdEscape(v) + "`"
		}
		p("- Variants (%s): the proxy binary (or the binary named in VARIANTS) started with another config (see `variant …` in the environment block), "+
			"measured like `proxy` and run in the same rounds; the headline also gives their ratio to `proxy`.\n", strings.Join(names, ", "))
	}
	if rp.hasPath(baselinePath) {
		p("- `baseline`: the variant bench/run.sh adds with `BASELINE=<commit>`: the proxy built from that commit, same config on its own ports; " +
			"it runs before `proxy` in even rounds and after it in odd ones. The section \"Against the baseline\" pairs the two round by round.\n")
	}
	p("\n")

	rp.writeHeadline(b)
	rp.writeBaseline(b)

	if rp.Chart != "" {
		p("![QPS vs threads](%s)\n\n", rp.Chart)
	}

	rp.writeCeiling(b)

	paths := rp.paths()
	threads := sortedThreads(rp.Records)
	for _, test := range uniqueInOrder(rp.Records, func(r Record) string { return r.Test }) {
		for _, mode := range uniqueInOrder(rp.Records, func(r Record) string { return r.Mode }) {
			if !rp.hasAny(test, mode) {
				continue
			}
			p("## %s — %s\n\n", test, modeTitle(mode))
			rp.writeTable(b, test, mode, threads, paths)
			rp.writeAddedLatency(b, test, mode, paths)
		}
	}

	if failed > 0 {
		p("## Failed runs\n\n| test | mode | threads | round | path | status | raw output |\n|---|---|---|---|---|---|---|\n")
		for _, r := range rp.Records {
			if r.OK() {
				continue
			}
			p("| %s | %s | %d | %d | %s | %s | %s |\n", r.Test, r.Mode, r.Threads, r.Round, r.Path,
				mdEscape(r.Status), mdEscape(r.Raw))
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (rp *Report) hasAny(test, mode string) bool {
	for k := range rp.Cells {
		if k.Test == test && k.Mode == mode {
			return true
		}
	}
	return false
}

// hasColumn reports whether any cell has a value for an optional column.
func (rp *Report) hasColumn(f func(*Cell) float64) bool {
	for _, c := range rp.Cells {
		if !math.IsNaN(f(c)) {
			return true
		}
	}
	return false
}

func (rp *Report) writeTable(b *strings.Builder, test, mode string, threads []int, paths []string) {
	dbCPU := rp.hasColumn(func(c *Cell) float64 { return c.DBCPUusPerQ })
	allocs := rp.hasColumn(func(c *Cell) float64 { return c.AllocsPerQ })
	gcs := rp.hasColumn(func(c *Cell) float64 { return c.GCPer10kQ })

	hdr := []string{"threads", "path", "QPS (median)", "p95 ms", "ratio to direct", "ratio to relay", "CPU µs/query", "RSS MB", "errors"}
	if dbCPU {
		hdr = append(hdr, "DB CPU µs/query")
	}
	if allocs {
		hdr = append(hdr, "allocs/query")
	}
	if gcs {
		hdr = append(hdr, "GC/10k queries")
	}
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(hdr, " | "), strings.Repeat("---:|", len(hdr)))

	for _, t := range threads {
		for _, path := range paths {
			c := rp.cell(test, mode, t, path)
			if c == nil {
				continue
			}
			row := []string{strconv.Itoa(t), path}
			if c.OKRounds == 0 {
				row = append(row, "**FAILED**: "+mdEscape(truncate(failureReason(c), 90)), "–", "–", "–", "–", "–",
					fmt.Sprintf("**%d/%d rounds failed**", len(c.Failures), c.Rounds))
			} else {
				q := fmtNum(c.QPS, 0)
				if c.OKRounds > 1 && c.QPS > 0 {
					q += fmt.Sprintf(" ±%.1f%%", 50*(c.QPSMax-c.QPSMin)/c.QPS)
				}
				errs := fmtNum(c.Errors, 0)
				if c.Errors > 0 {
					errs = "**" + errs + "** ⚠"
				}
				if n := len(c.Failures); n > 0 {
					errs += fmt.Sprintf(", **%d/%d rounds failed** ⚠", n, c.Rounds)
				}
				row = append(row, q, fmtNum(c.P95Ms, 3), rp.ratioTo(c, "direct"), rp.ratioTo(c, "relay"),
					fmtNum(c.CPUusPerQ, 1), fmtNum(c.RSSMB, 1), errs)
			}
			if dbCPU {
				row = append(row, fmtNum(c.DBCPUusPerQ, 1))
			}
			if allocs {
				row = append(row, fmtNum(c.AllocsPerQ, 1))
			}
			if gcs {
				row = append(row, fmtNum(c.GCPer10kQ, 2))
			}
			fmt.Fprintf(b, "| %s |\n", strings.Join(row, " | "))
		}
	}
	b.WriteString("\n")
}

// writeAddedLatency shows what each path adds to a single client's round trip.
func (rp *Report) writeAddedLatency(b *strings.Builder, test, mode string, paths []string) {
	d := rp.cell(test, mode, 1, "direct")
	if d == nil || d.OKRounds == 0 {
		return
	}
	var rows []string
	for _, path := range paths {
		c := rp.cell(test, mode, 1, path)
		if c == nil || c.OKRounds == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", path,
			fmtNum(c.AvgMs*1000, 1), fmtSigned((c.AvgMs-d.AvgMs)*1000, 1),
			fmtNum(c.P50Ms*1000, 0), fmtSigned((c.P50Ms-d.P50Ms)*1000, 0)))
	}
	if len(rows) < 2 {
		return
	}
	fmt.Fprintf(b, "Added latency at 1 thread (per event; one event is one query for point selects, one transaction otherwise):\n\n")
	fmt.Fprintf(b, "| path | avg µs | added avg µs | p50 µs | added p50 µs |\n|---|---:|---:|---:|---:|\n")
	fmt.Fprintf(b, "%s\n\n", strings.Join(rows, "\n"))
}

// writeHeadline states the headline docs/benchmarks.md describes: point select, text protocol,
// 16 threads (or the nearest thread count run), proxy against direct and relay.
func (rp *Report) writeHeadline(b *strings.Builder) {
	const test, mode = "oltp_point_select", "disable"
	threads := sortedThreads(rp.Records)
	if len(threads) == 0 {
		return
	}
	t := threads[0]
	for _, n := range threads {
		if abs(n-16) < abs(t-16) {
			t = n
		}
	}
	var parts []string
	for _, path := range rp.paths() {
		if path == "direct" {
			continue
		}
		c := rp.cell(test, mode, t, path)
		if c == nil {
			continue
		}
		if c.OKRounds == 0 {
			parts = append(parts, fmt.Sprintf("- **%s**: failed (%s)", path, mdEscape(truncate(failureReason(c), 90))))
			continue
		}
		s := fmt.Sprintf("- **%s** keeps %s of direct", path, rp.ratioTo(c, "direct"))
		if path != "relay" {
			s += fmt.Sprintf(" and %s of relay", rp.ratioTo(c, "relay"))
		}
		if !isLadder(path) {
			s += fmt.Sprintf(" (%s of proxy)", fmtNum(ratio(c.QPS, rp.qps(test, mode, t, "proxy")), 2))
		}
		s += fmt.Sprintf(", %s µs CPU per query", fmtNum(c.CPUusPerQ, 1))
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return
	}
	fmt.Fprintf(b, "## Headline: %s, text protocol, %d threads\n\n%s\n\n", test, t, strings.Join(parts, "\n"))
}

// truncate shortens s to at most n runes; the full text is in the failed-runs list.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
