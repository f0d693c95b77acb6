package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// csvHeader is the header run.sh writes to results.csv. Columns are found by
// name, so adding a column later does not break older reports.
var csvHeader = []string{
	"ts", "test", "mode", "threads", "round", "path", "status", "duration_s",
	"queries", "qps", "tps", "avg_ms", "p50_ms", "p95_ms", "max_ms", "errors", "reconnects",
	"proc_cpu_s", "proc_rss_kb", "db_cpu_s", "mallocs", "gc_cycles", "raw",
}

// requiredColumns must be present for a results file to be usable.
var requiredColumns = []string{"test", "mode", "threads", "round", "path", "status", "queries", "qps"}

// Record is one line of results.csv: one sysbench run on one path.
// Optional measurements that were not taken are NaN.
type Record struct {
	Test, Mode, Path string
	Threads, Round   int
	Status           string // "ok", or why the run has no numbers.
	Queries          float64
	QPS, TPS         float64
	AvgMs            float64
	P50Ms, P95Ms     float64
	Errors           float64
	Reconnects       float64
	ProcCPUSec       float64 // Relay or proxy CPU (utime+stime) over the run.
	ProcRSSKB        float64 // Relay or proxy VmRSS at the end of the run.
	DBCPUSec         float64 // mariadbd CPU over the run, all backend nodes.
	Mallocs          float64 // Proxy heap allocations over the run (runtime MemStats).
	GCCycles         float64 // Proxy GC cycles over the run.
	Raw              string  // Path of the raw sysbench output.
	Line             int     // Line number in results.csv, for messages.
}

// OK reports whether the run finished and has numbers.
func (r Record) OK() bool { return r.Status == "ok" }

// readResults parses results.csv. Empty cells become NaN; a malformed number
// in a present cell is an error that names the line and column.
func readResults(rd io.Reader) ([]Record, error) {
	cr := csv.NewReader(rd)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("empty results file")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[strings.TrimSpace(name)] = i
	}
	for _, name := range requiredColumns {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("header lacks column %q", name)
		}
	}
	var out []Record
	for n, row := range rows[1:] {
		line := n + 2
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		var perr error
		str := func(name string) string {
			if i, ok := col[name]; ok && i < len(row) {
				return strings.TrimSpace(row[i])
			}
			return ""
		}
		num := func(name string) float64 {
			s := str(name)
			if s == "" {
				return math.NaN()
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil && perr == nil {
				perr = fmt.Errorf("line %d, column %s: %q is not a number", line, name, s)
			}
			return v
		}
		integer := func(name string) int {
			s := str(name)
			v, err := strconv.Atoi(s)
			if err != nil && perr == nil {
				perr = fmt.Errorf("line %d, column %s: %q is not an integer", line, name, s)
			}
			return v
		}
		r := Record{
			Test: str("test"), Mode: str("mode"), Path: str("path"),
			Threads: integer("threads"), Round: integer("round"),
			Status:  str("status"),
			Queries: num("queries"), QPS: num("qps"), TPS: num("tps"),
			AvgMs: num("avg_ms"), P50Ms: num("p50_ms"), P95Ms: num("p95_ms"),
			Errors: num("errors"), Reconnects: num("reconnects"),
			ProcCPUSec: num("proc_cpu_s"), ProcRSSKB: num("proc_rss_kb"), DBCPUSec: num("db_cpu_s"),
			Mallocs: num("mallocs"), GCCycles: num("gc_cycles"),
			Raw:  str("raw"),
			Line: line,
		}
		if perr != nil {
			return nil, perr
		}
		if r.Status == "" {
			r.Status = "ok"
		}
		if r.OK() && (math.IsNaN(r.QPS) || math.IsNaN(r.Queries)) {
			return nil, fmt.Errorf("line %d: status ok but no qps/queries", line)
		}
		out = append(out, r)
	}
	return out, nil
}

// median returns the median of the non-NaN values, or NaN if there are none.
// An even count averages the two middle values.
func median(vs []float64) float64 {
	xs := make([]float64, 0, len(vs))
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// ratio is a/b, or NaN when either is missing or b is not positive.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return math.NaN()
	}
	return a / b
}

// perQuery divides a per-run total by the run's queries and scales it
// (1e6 turns CPU seconds into microseconds). NaN when either is missing.
func perQuery(total, queries, scale float64) float64 {
	if math.IsNaN(total) || math.IsNaN(queries) || queries <= 0 {
		return math.NaN()
	}
	return total * scale / queries
}

// Key identifies one cell of the matrix.
type Key struct {
	Test, Mode string
	Threads    int
	Path       string
}

// Cell is the summary of all rounds of one Key. Every float is the median over
// the successful rounds (NaN when none succeeded or it was not measured).
type Cell struct {
	Key
	Rounds, OKRounds         int
	QPS, P50Ms, P95Ms, AvgMs float64
	QPSMin, QPSMax           float64
	TPS, TPSMin, TPSMax      float64 // Transactions (sysbench events) per second; the split path is compared by these.
	CPUusPerQ, DBCPUusPerQ   float64
	RSSMB                    float64
	AllocsPerQ, GCPer10kQ    float64
	Errors                   float64 // Sum of ignored errors and reconnects over all rounds.
	Failures                 []Record
}

// summarize groups records by Key and takes medians over rounds.
func summarize(recs []Record) map[Key]*Cell {
	type acc struct {
		qps, tps, p50, p95, avg, cpu, dbcpu, rss, allocs, gcs []float64
	}
	cells := map[Key]*Cell{}
	accs := map[Key]*acc{}
	for _, r := range recs {
		k := Key{r.Test, r.Mode, r.Threads, r.Path}
		c := cells[k]
		if c == nil {
			c = &Cell{Key: k}
			cells[k] = c
			accs[k] = &acc{}
		}
		a := accs[k]
		c.Rounds++
		if !r.OK() {
			c.Failures = append(c.Failures, r)
			continue
		}
		c.OKRounds++
		for _, v := range []float64{r.Errors, r.Reconnects} {
			if !math.IsNaN(v) {
				c.Errors += v
			}
		}
		a.qps = append(a.qps, r.QPS)
		a.tps = append(a.tps, r.TPS)
		a.p50 = append(a.p50, r.P50Ms)
		a.p95 = append(a.p95, r.P95Ms)
		a.avg = append(a.avg, r.AvgMs)
		a.cpu = append(a.cpu, perQuery(r.ProcCPUSec, r.Queries, 1e6))
		a.dbcpu = append(a.dbcpu, perQuery(r.DBCPUSec, r.Queries, 1e6))
		a.rss = append(a.rss, r.ProcRSSKB/1024)
		a.allocs = append(a.allocs, perQuery(r.Mallocs, r.Queries, 1))
		a.gcs = append(a.gcs, perQuery(r.GCCycles, r.Queries, 1e4))
	}
	for k, c := range cells {
		a := accs[k]
		c.QPS, c.P50Ms, c.P95Ms, c.AvgMs = median(a.qps), median(a.p50), median(a.p95), median(a.avg)
		c.CPUusPerQ, c.DBCPUusPerQ, c.RSSMB = median(a.cpu), median(a.dbcpu), median(a.rss)
		c.AllocsPerQ, c.GCPer10kQ = median(a.allocs), median(a.gcs)
		c.QPSMin, c.QPSMax = math.NaN(), math.NaN()
		if len(a.qps) > 0 {
			c.QPSMin, c.QPSMax = slices.Min(a.qps), slices.Max(a.qps)
		}
		c.TPS, c.TPSMin, c.TPSMax = median(a.tps), minMax(a.tps, slices.Min), minMax(a.tps, slices.Max)
	}
	return cells
}

// minMax applies slices.Min or slices.Max to the non-NaN values, NaN if none.
func minMax(vs []float64, f func([]float64) float64) float64 {
	xs := make([]float64, 0, len(vs))
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	return f(xs)
}

// knownPaths orders the ladder; other paths (variants) follow. split (MariaDB
// directly, on a 4-way split of the table) sits next to direct, ranged (the
// proxy with a range rule) next to sharded.
var knownPaths = []string{"direct", "split", "relay", "proxy", "sharded", "ranged"}

// byTPS reports whether a path's QPS is not comparable with the others' and
// its ratios are taken by transactions per second: the split path runs each
// range query once per part, and sysbench counts every one.
func byTPS(path string) bool { return path == "split" }

// isLadder reports whether path is one of the built-in rungs; any other path
// is a variant, i.e. one more proxy with another config.
func isLadder(path string) bool { return slices.Contains(knownPaths, path) }

// orderedPaths lists the paths present in recs: the ladder first, then the
// others in the order of preferred (run.sh's "paths" environment line, which
// holds the variants in VARIANTS order), then any remaining ones in order of
// first appearance.
func orderedPaths(recs []Record, preferred []string) []string {
	seen := map[string]bool{}
	for _, r := range recs {
		seen[r.Path] = true
	}
	var out []string
	take := func(p string) {
		if seen[p] {
			out = append(out, p)
			delete(seen, p)
		}
	}
	for _, p := range knownPaths {
		take(p)
	}
	for _, p := range preferred {
		take(p)
	}
	for _, r := range recs {
		take(r.Path)
	}
	return out
}

// uniqueInOrder returns the distinct values of f over recs in order of first appearance.
func uniqueInOrder[T comparable](recs []Record, f func(Record) T) []T {
	seen := map[T]bool{}
	var out []T
	for _, r := range recs {
		v := f(r)
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// sortedThreads returns the distinct thread counts of recs, ascending.
func sortedThreads(recs []Record) []int {
	ts := uniqueInOrder(recs, func(r Record) int { return r.Threads })
	slices.Sort(ts)
	return ts
}
