package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestMedian(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, nan, 30, 20}, 20}, // NaN (not measured) is ignored, not sorted in.
		{[]float64{5, 5, 100}, 5},        // One outlier round does not move it.
		{nil, nan},
		{[]float64{nan, nan}, nan},
	} {
		got := median(tc.in)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && !near(got, tc.want)) {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	in := []float64{3, 1, 2}
	median(in)
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("median reordered its argument: %v", in)
	}
}

func TestRatioAndPerQuery(t *testing.T) {
	nan := math.NaN()
	if got := ratio(5000, 10000); !near(got, 0.5) {
		t.Errorf("ratio(5000, 10000) = %v", got)
	}
	for _, tc := range [][2]float64{{1, 0}, {1, -1}, {nan, 1}, {1, nan}} {
		if got := ratio(tc[0], tc[1]); !math.IsNaN(got) {
			t.Errorf("ratio(%v, %v) = %v, want NaN", tc[0], tc[1], got)
		}
	}
	// 3.4 CPU seconds over 100000 queries is 34 µs per query.
	if got := perQuery(3.4, 100000, 1e6); !near(got, 34) {
		t.Errorf("perQuery = %v, want 34", got)
	}
	if got := perQuery(nan, 100, 1e6); !math.IsNaN(got) {
		t.Errorf("perQuery without CPU = %v, want NaN", got)
	}
	if got := perQuery(1, 0, 1e6); !math.IsNaN(got) {
		t.Errorf("perQuery with no queries = %v, want NaN", got)
	}
}

func TestPercentileSysbenchRule(t *testing.T) {
	h := []bucket{{0.1, 10}, {0.2, 80}, {0.5, 9}, {9.0, 1}}
	for _, tc := range []struct{ pct, want float64 }{
		{50, 0.2}, {90, 0.2}, {95, 0.5}, {99, 0.5}, {100, 9.0}, {1, 0.1},
	} {
		if got := percentile(h, tc.pct); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.pct, got, tc.want)
		}
	}
}

func TestParseSysbench(t *testing.T) {
	f, err := os.Open("testdata/sysbench_point_select.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parseSysbench(f)
	if err != nil {
		t.Fatal(err)
	}
	want := Run{
		Queries: 22652, QPS: 7545.88, TPS: 7545.88, Events: 22652,
		AvgMs: 2987.30 / 22652, P50Ms: 0.125, P95Ms: 0.179, MaxMs: 4.14,
	}
	if !near(r.AvgMs, want.AvgMs) {
		t.Errorf("AvgMs = %v, want %v", r.AvgMs, want.AvgMs)
	}
	r.AvgMs = want.AvgMs
	if r != want {
		t.Errorf("parsed\n %+v\nwant\n %+v", r, want)
	}
	if got, want := r.CSV(), "22652,7545.88,7545.88,0.1319,0.125,0.179,4.14,0,0"; got != want {
		t.Errorf("CSV() = %q, want %q", got, want)
	}
	if n := strings.Count(parseHeader, ",") + 1; n != strings.Count(r.CSV(), ",")+1 {
		t.Errorf("parseHeader has %d fields, CSV() has a different count", n)
	}
}

func TestParseSysbenchWithoutHistogram(t *testing.T) {
	out := `SQL statistics:
    queries:                             1000  (100.00 per sec.)
    ignored errors:                      3      (0.30 per sec.)
    reconnects:                          2      (0.20 per sec.)
General statistics:
    total time:                          10.0015s
    total number of events:              100
Latency (ms):
         avg:                                    1.23
         95th percentile:                        2.50
         sum:                                  123.40
`
	r, err := parseSysbench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.P95Ms != 2.50 || r.P50Ms != 0 || r.Errors != 3 || r.Reconnects != 2 || !near(r.AvgMs, 1.234) {
		t.Errorf("got %+v", r)
	}
}

func TestParseSysbenchFailed(t *testing.T) {
	f, err := os.Open("testdata/sysbench_connect_failed.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := parseSysbench(f); !errors.Is(err, errNoStatistics) {
		t.Fatalf("err = %v, want errNoStatistics", err)
	}
}

const sampleCSV = `ts,test,mode,threads,round,path,status,duration_s,queries,qps,tps,avg_ms,p50_ms,p95_ms,max_ms,errors,reconnects,proc_cpu_s,proc_rss_kb,db_cpu_s,mallocs,gc_cycles,raw
1,oltp_point_select,disable,1,1,direct,ok,5,40000,8000,8000,0.120,0.118,0.150,2,0,0,,,3.0,,,raw/a.txt
2,oltp_point_select,disable,1,1,relay,ok,5,30000,6000,6000,0.160,0.155,0.200,2,0,0,0.6,8192,2.3,,,raw/b.txt
3,oltp_point_select,disable,1,1,proxy,unavailable: build failed,5,,,,,,,,,,,,,,,raw/c.txt
4,oltp_point_select,disable,1,2,direct,ok,5,50000,10000,10000,0.100,0.098,0.140,2,0,0,,,3.0,,,raw/d.txt
5,oltp_point_select,disable,1,2,relay,ok,5,25000,5000,5000,0.200,0.190,0.260,2,1,0,0.5,10240,2.0,,,raw/e.txt
6,oltp_point_select,disable,1,2,proxy,unavailable: build failed,5,,,,,,,,,,,,,,,raw/f.txt
7,oltp_point_select,disable,1,3,direct,ok,5,45000,9000,9000,0.110,0.108,0.145,2,0,0,,,3.0,,,raw/g.txt
8,oltp_point_select,disable,1,3,relay,ok,5,35000,7000,7000,0.140,0.139,0.190,2,0,1,0.7,9216,2.5,,,raw/h.txt
9,oltp_point_select,disable,1,3,proxy,unavailable: build failed,5,,,,,,,,,,,,,,,raw/i.txt
`

func TestReadResultsAndSummarize(t *testing.T) {
	recs, err := readResults(strings.NewReader(sampleCSV))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 9 {
		t.Fatalf("read %d records, want 9", len(recs))
	}
	if r := recs[2]; r.OK() || r.Status != "unavailable: build failed" || !math.IsNaN(r.QPS) {
		t.Errorf("failed record parsed as %+v", r)
	}
	if r := recs[0]; !math.IsNaN(r.ProcCPUSec) || r.DBCPUSec != 3.0 || r.Raw != "raw/a.txt" || r.Line != 2 {
		t.Errorf("direct record parsed as %+v", r)
	}

	cells := summarize(recs)
	d := cells[Key{"oltp_point_select", "disable", 1, "direct"}]
	r := cells[Key{"oltp_point_select", "disable", 1, "relay"}]
	p := cells[Key{"oltp_point_select", "disable", 1, "proxy"}]
	if d.QPS != 9000 || d.OKRounds != 3 || d.Errors != 0 || !math.IsNaN(d.CPUusPerQ) {
		t.Errorf("direct cell %+v", d)
	}
	if r.QPS != 6000 || r.QPSMin != 5000 || r.QPSMax != 7000 || r.Errors != 2 {
		t.Errorf("relay cell %+v", r)
	}
	// CPU µs/query per round: 0.6e6/30000=20, 0.5e6/25000=20, 0.7e6/35000=20.
	if !near(r.CPUusPerQ, 20) || !near(r.RSSMB, 9) || r.P95Ms != 0.200 {
		t.Errorf("relay cell cpu=%v rss=%v p95=%v", r.CPUusPerQ, r.RSSMB, r.P95Ms)
	}
	if got := ratio(r.QPS, d.QPS); !near(got, 6000.0/9000) {
		t.Errorf("relay/direct = %v", got)
	}
	if p.OKRounds != 0 || len(p.Failures) != 3 || !math.IsNaN(p.QPS) {
		t.Errorf("proxy cell %+v", p)
	}
}

func TestReadResultsErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":          "",
		"missing column": "test,mode,threads,round,path,status,queries\n",
		"bad number":     "test,mode,threads,round,path,status,queries,qps\nx,disable,1,1,direct,ok,10,fast\n",
		"bad threads":    "test,mode,threads,round,path,status,queries,qps\nx,disable,one,1,direct,ok,10,1\n",
		"ok without qps": "test,mode,threads,round,path,status,queries,qps\nx,disable,1,1,direct,ok,,\n",
	} {
		if _, err := readResults(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReadEnv(t *testing.T) {
	env, err := readEnv(strings.NewReader("# comment\ncpu=AMD EPYC x 2\n\nproxy_setting=pool_size: 64\nproxy_setting=nodelay: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []EnvVar{{"cpu", "AMD EPYC x 2"}, {"proxy_setting", "pool_size: 64; nodelay: true"}}
	if len(env) != len(want) || env[0] != want[0] || env[1] != want[1] {
		t.Errorf("env = %v, want %v", env, want)
	}
	if _, err := readEnv(strings.NewReader("no equals sign\n")); err == nil {
		t.Error("want an error for a line without =")
	}
}

func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "results.csv")
	if err := os.WriteFile(in, []byte(sampleCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "env.txt"), []byte("rounds=3\nduration_s=5\nkernel=6.1 | x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, dir, ""); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| kernel | 6.1 \\| x |",
		"## oltp_point_select — text protocol",
		"| 1 | direct | 9000 ±11.1% | 0.145 | 1.00 | 1.50 | – | – | 0 | 66.7 |",
		"| 1 | relay | 6000 ±16.7% | 0.200 | 0.67 | 1.00 | 20.0 | 9.0 | **2** ⚠ | 76.7 |",
		"| 1 | proxy | **FAILED**: unavailable: build failed |",
		"| relay | 160.0 | +50.0 | 155 | +47 |",
		"- **proxy**: failed (unavailable: build failed)",
		"## Failed runs",
		"![QPS vs threads](qps.svg)",
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "qps.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// The chart must be well-formed XML with a line or dot per successful path.
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("qps.svg is not well-formed: %v", err)
			}
			break
		}
	}
	for _, want := range []string{"direct, 1 threads: 9000 QPS", "relay, 1 threads: 6000 QPS", "proxy (failed)"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("qps.svg lacks %q", want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range [][2]float64{{0.7, 1}, {1.3, 2}, {3, 5}, {7, 10}, {1800, 2000}, {2500, 5000}, {0, 1}} {
		if got := niceStep(tc[0]); !near(got, tc[1]) {
			t.Errorf("niceStep(%v) = %v, want %v", tc[0], got, tc[1])
		}
	}
}

// variantCSV has the ladder plus two variants; "proxy-nodelay-off" appears in
// the file before "big-buffers" but env.txt's paths line says the opposite,
// and "read-only-variant" has no point-select runs.
const variantCSV = `ts,test,mode,threads,round,path,status,duration_s,queries,qps,tps,avg_ms,p50_ms,p95_ms,max_ms,errors,reconnects,proc_cpu_s,proc_rss_kb,db_cpu_s,mallocs,gc_cycles,raw
1,oltp_point_select,disable,16,1,direct,ok,5,100000,20000,20000,0.8,0.7,1.5,9,0,0,,,3.0,,,raw/a.txt
2,oltp_point_select,disable,16,1,proxy-nodelay-off,ok,5,40000,8000,8000,2.0,1.9,3.0,9,0,0,1.6,20480,2.0,400000,4,raw/v.txt
3,oltp_point_select,disable,16,1,relay,ok,5,50000,10000,10000,1.6,1.5,2.5,9,0,0,0.5,8192,2.3,,,raw/b.txt
4,oltp_point_select,disable,16,1,proxy,ok,5,60000,12000,12000,1.3,1.2,2.2,9,0,0,1.8,20480,2.3,600000,6,raw/c.txt
5,oltp_point_select,disable,16,1,big-buffers,sysbench exit 1: FATAL: connect failed,5,,,,,,,,,,,,,,,raw/w.txt
6,oltp_read_only,disable,16,1,direct,ok,5,100000,20000,1250,12,11,15,20,0,0,,,3.0,,,raw/d.txt
7,oltp_read_only,disable,16,1,read-only-variant,ok,5,50000,10000,625,24,22,30,40,0,0,2.0,20480,3.0,,,raw/e.txt
`

func TestOrderedPaths(t *testing.T) {
	recs, err := readResults(strings.NewReader(variantCSV))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(orderedPaths(recs, nil), " ")
	if want := "direct relay proxy proxy-nodelay-off big-buffers read-only-variant"; got != want {
		t.Errorf("without a preferred order: %q, want %q", got, want)
	}
	// run.sh's paths line wins over the order in the file; unknown names in it are skipped.
	got = strings.Join(orderedPaths(recs, strings.Fields("direct relay proxy gone big-buffers proxy-nodelay-off")), " ")
	if want := "direct relay proxy big-buffers proxy-nodelay-off read-only-variant"; got != want {
		t.Errorf("with run.sh's order: %q, want %q", got, want)
	}
}

func TestVariants(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "results.csv")
	if err := os.WriteFile(in, []byte(variantCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	env := "paths=direct relay proxy big-buffers proxy-nodelay-off read-only-variant\n" +
		"variant proxy-nodelay-off=/tmp/ks-nodelay-off.yaml; differs from etc/ks.yaml: frontend.nodelay: false\n"
	if err := os.WriteFile(filepath.Join(dir, "env.txt"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, dir, ""); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| variant proxy-nodelay-off | /tmp/ks-nodelay-off.yaml; differs from etc/ks.yaml: frontend.nodelay: false |",
		"- Variants (`big-buffers`, `proxy-nodelay-off`, `read-only-variant`): the proxy binary (or the binary named in VARIANTS)",
		"- **proxy** keeps 0.60 of direct and 1.20 of relay, 30.0 µs CPU per query",
		"- **big-buffers**: failed (sysbench exit 1: FATAL: connect failed)",
		"- **proxy-nodelay-off** keeps 0.40 of direct and 0.80 of relay (0.67 of proxy), 40.0 µs CPU per query",
		// Same columns as the proxy: ratios, CPU, RSS, allocs and GC per query.
		"| 16 | proxy-nodelay-off | 8000 | 3.000 | 0.40 | 0.80 | 40.0 | 20.0 | 0 | 50.0 | 10.0 | 1.00 |",
		"| 16 | big-buffers | **FAILED**: sysbench exit 1: FATAL: connect failed |",
		"| 16 | read-only-variant | 10000 | 30.000 | 0.50 | – | 40.0 | 20.0 | 0 | 60.0 | – | – |",
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
	// Rows follow run.sh's order: the ladder, then the variants as run.
	table := string(md[bytes.Index(md, []byte("## oltp_point_select — ")):])
	last := -1
	for _, p := range []string{"| 16 | direct |", "| 16 | relay |", "| 16 | proxy |", "| 16 | big-buffers |", "| 16 | proxy-nodelay-off |"} {
		i := strings.Index(table, p)
		if i < last {
			t.Errorf("row %q is out of order\n%s", p, table)
		}
		last = i
	}

	svg, err := os.ReadFile(filepath.Join(dir, "qps.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var width int
	for {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("qps.svg is not well-formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "svg" {
			for _, a := range se.Attr {
				if a.Name.Local == "width" {
					width, _ = strconv.Atoi(a.Value)
				}
			}
		}
	}
	for _, want := range []string{"proxy-nodelay-off, 16 threads: 8000 QPS", ">proxy-nodelay-off</text>", ">big-buffers (failed)</text>"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("qps.svg lacks %q", want)
		}
	}
	// No point-select data: no series in the point-select chart.
	if bytes.Contains(svg, []byte("read-only-variant")) {
		t.Errorf("qps.svg has a series for read-only-variant, which has no point-select runs")
	}
	// The legend must fit "big-buffers (failed)" (21 characters at ~7.5 px) right of the 490 px plot.
	if need := 80 + 490 + 50 + 21*7; width < need {
		t.Errorf("svg width %d, want at least %d for the legend", width, need)
	}
}

// ceilingCSV has the sharding-ceiling paths. oltp_read_only, text protocol, 16
// threads, 3 rounds, tps: direct 1000/1100/900, split 500/560/540 (26 queries
// per event: each of the 4 range queries on 4 parts), proxy 600/620/580,
// sharded 300/330/310, ranged 500/520/540 (one round with an error). 1 thread:
// direct and split only, ranged failed. auto: one round missing both targets.
// oltp_read_write: split unavailable, so no ceiling row.
const ceilingCSV = `ts,test,mode,threads,round,path,status,duration_s,queries,qps,tps,avg_ms,p50_ms,p95_ms,max_ms,errors,reconnects,proc_cpu_s,proc_rss_kb,db_cpu_s,mallocs,gc_cycles,raw
1,oltp_read_only,disable,16,1,direct,ok,10,140000,14000,1000,10,9,20,30,0,0,,,2.0,,,raw/x1.txt
2,oltp_read_only,disable,16,1,split,ok,10,130000,13000,500,10,9,20,30,0,0,,,2.0,,,raw/x2.txt
3,oltp_read_only,disable,16,1,proxy,ok,10,84000,8400,600,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x3.txt
4,oltp_read_only,disable,16,1,sharded,ok,10,42000,4200,300,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x4.txt
5,oltp_read_only,disable,16,1,ranged,ok,10,70000,7000,500,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x5.txt
6,oltp_read_only,disable,16,2,direct,ok,10,154000,15400,1100,10,9,20,30,0,0,,,2.0,,,raw/x6.txt
7,oltp_read_only,disable,16,2,split,ok,10,145600,14560,560,10,9,20,30,0,0,,,2.0,,,raw/x7.txt
8,oltp_read_only,disable,16,2,proxy,ok,10,86800,8680,620,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x8.txt
9,oltp_read_only,disable,16,2,sharded,ok,10,46200,4620,330,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x9.txt
10,oltp_read_only,disable,16,2,ranged,ok,10,72800,7280,520,10,9,20,30,1,0,1.0,20480,2.0,,,raw/x10.txt
11,oltp_read_only,disable,16,3,direct,ok,10,126000,12600,900,10,9,20,30,0,0,,,2.0,,,raw/x11.txt
12,oltp_read_only,disable,16,3,split,ok,10,140400,14040,540,10,9,20,30,0,0,,,2.0,,,raw/x12.txt
13,oltp_read_only,disable,16,3,proxy,ok,10,81200,8120,580,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x13.txt
14,oltp_read_only,disable,16,3,sharded,ok,10,43400,4340,310,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x14.txt
15,oltp_read_only,disable,16,3,ranged,ok,10,75600,7560,540,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x15.txt
16,oltp_read_only,disable,1,1,direct,ok,10,14000,1400,100,10,9,20,30,0,0,,,2.0,,,raw/x16.txt
17,oltp_read_only,disable,1,1,split,ok,10,13000,1300,50,10,9,20,30,0,0,,,2.0,,,raw/x17.txt
18,oltp_read_only,disable,1,1,ranged,unavailable: ranged prepare failed (see prepare-ranged.log),10,,,,,,,,,,,,,,,raw/x18.txt
19,oltp_read_only,auto,16,1,direct,ok,10,140000,14000,1000,10,9,20,30,0,0,,,2.0,,,raw/x19.txt
20,oltp_read_only,auto,16,1,split,ok,10,156000,15600,600,10,9,20,30,0,0,,,2.0,,,raw/x20.txt
21,oltp_read_only,auto,16,1,proxy,ok,10,70000,7000,500,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x21.txt
22,oltp_read_only,auto,16,1,sharded,ok,10,28000,2800,200,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x22.txt
23,oltp_read_only,auto,16,1,ranged,ok,10,42000,4200,300,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x23.txt
24,oltp_read_write,disable,16,1,direct,ok,10,144000,14400,800,10,9,20,30,0,0,,,2.0,,,raw/x24.txt
25,oltp_read_write,disable,16,1,split,unavailable: bench/split.lua mirrors only oltp_read_only and oltp_point_select,10,,,,,,,,,,,,,,,raw/x25.txt
26,oltp_read_write,disable,16,1,proxy,ok,10,72000,7200,400,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x26.txt
27,oltp_read_write,disable,16,1,sharded,ok,10,36000,3600,200,10,9,20,30,0,0,1.0,20480,2.0,,,raw/x27.txt
`

func TestSummarizeTPS(t *testing.T) {
	recs, err := readResults(strings.NewReader(ceilingCSV))
	if err != nil {
		t.Fatal(err)
	}
	c := summarize(recs)[Key{"oltp_read_only", "disable", 16, "split"}]
	if c.TPS != 540 || c.TPSMin != 500 || c.TPSMax != 560 || c.QPS != 14040 {
		t.Errorf("split cell tps %v (%v..%v), qps %v", c.TPS, c.TPSMin, c.TPSMax, c.QPS)
	}
	f := summarize(recs)[Key{"oltp_read_only", "disable", 1, "ranged"}]
	if !math.IsNaN(f.TPS) || !math.IsNaN(f.TPSMin) || !math.IsNaN(f.TPSMax) {
		t.Errorf("failed cell tps %v (%v..%v), want NaN", f.TPS, f.TPSMin, f.TPSMax)
	}
}

func TestOrderedPathsCeiling(t *testing.T) {
	recs, err := readResults(strings.NewReader(ceilingCSV))
	if err != nil {
		t.Fatal(err)
	}
	// The file runs them direct split proxy sharded ranged; a paths line in
	// another order does not move the ladder.
	got := strings.Join(orderedPaths(recs, strings.Fields("ranged sharded proxy split direct")), " ")
	if want := "direct split proxy sharded ranged"; got != want {
		t.Errorf("paths %q, want %q", got, want)
	}
	for _, p := range []string{"split", "ranged"} {
		if !isLadder(p) {
			t.Errorf("%s is taken for a variant", p)
		}
	}
}

func TestShardingCeiling(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "results.csv")
	if err := os.WriteFile(in, []byte(ceilingCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "env.txt"), []byte("rounds=3\nduration_s=10\npaths=direct split proxy sharded ranged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, dir, ""); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"## Sharding ceiling",
		"| test | mode | threads | direct tps | split tps | ceiling | proxy tps | sharded tps | proxy ratio | proxy ratio / ceiling (≥ 0.9) | ranged tps | ranged / proxy (≥ 0.8) |",
		// ceiling 540/1000, bounds 500/1100 and 560/900; proxy ratio 310/600,
		// bounds 300/620 and 330/580; quotient 0.517/0.54 = 0.96, bounds
		// 0.484/0.622 and 0.569/0.455; ranged 520/600, bounds 500/620 and 540/580.
		"| oltp_read_only | disable | 16 | 1000 ±10.0% | 540 ±5.6% | 0.54 (0.45–0.62) | 600 ±3.3% | 310 ±4.8% | 0.52 (0.48–0.57) | 0.96 (0.78–1.25) ✓ (spread crosses 0.9) | 520 ±3.8% | 0.87 (0.81–0.93) ✓ |",
		// One round each, a failed ranged cell: what cannot be computed is "–".
		"| oltp_read_only | disable | 1 | 100 | 50 | 0.50 | – | – | – | – | – | – |",
		"| oltp_read_only | auto | 16 | 1000 | 600 | 0.60 | 500 | 200 | 0.40 | 0.67 ✗ | 300 | 0.60 ✗ |",
		"⚠ oltp_read_only disable 16 threads: `ranged` had 1 errors or reconnects",
		// The split row's ratios are by tps; its QPS (26 queries per event) is shown as measured.
		"| 16 | split | 14040 ±5.6% | 20.000 | 0.54 (tps) | – | – | – | 0 | 14.2 |",
		"| 16 | ranged | 7280 ±3.8% | 20.000 | 0.52 | – | 13.7 | 20.0 | **1** ⚠ | 27.5 |",
		"| 16 | split | **FAILED**: unavailable: bench/split.lua mirrors only oltp_read_only and oltp_point_select |",
		"- `split`: sysbench straight to MariaDB node1",
		"- `ranged`: a proxy like `sharded` with a range rule",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
	section := md[strings.Index(md, "## Sharding ceiling"):]
	section = section[:strings.Index(section[1:], "\n## ")+1]
	if strings.Contains(section, "oltp_read_write") {
		t.Errorf("ceiling section has a row without split or ranged data:\n%s", section)
	}
	// The chart shows oltp_read_only (no point select was run): no split line,
	// whose QPS counts range queries once per part.
	svg, err := os.ReadFile(filepath.Join(dir, "qps.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(svg, []byte(">split")) || !bytes.Contains(svg, []byte(">ranged</text>")) {
		t.Errorf("qps.svg: want ranged and no split series\n%s", svg)
	}
}

func TestNoCeilingWithoutSplitOrRanged(t *testing.T) {
	recs, err := readResults(strings.NewReader(variantCSV))
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := newReport(recs, nil).writeMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(md.Bytes(), []byte("Sharding ceiling")) {
		t.Errorf("report without split or ranged has a ceiling section\n%s", md.String())
	}
}

// baselineCSV: oltp_point_select, text, 16 threads, 3 rounds of 10 s, run with
// BASELINE. Per round, µs of CPU per query: relay 40, 40, 40; proxy 48, 40, 50;
// baseline 50, 50 and a failed third round. Allocations per query: proxy 2,
// baseline 3. QPS: direct 20000, 21000, 19000; relay half of it; proxy 9600,
// 10290, 9500; baseline 9000, 9450.
const baselineCSV = `ts,test,mode,threads,round,path,status,duration_s,queries,qps,tps,avg_ms,p50_ms,p95_ms,max_ms,errors,reconnects,proc_cpu_s,proc_rss_kb,db_cpu_s,mallocs,gc_cycles,raw
1,oltp_point_select,disable,16,1,direct,ok,10,200000,20000,20000,1,1,2,3,0,0,,,2.0,,,raw/b1.txt
2,oltp_point_select,disable,16,1,relay,ok,10,100000,10000,10000,1,1,2,3,0,0,4.0,5120,2.0,,,raw/b2.txt
3,oltp_point_select,disable,16,1,proxy,ok,10,96000,9600,9600,1,1,2,3,0,0,4.608,20480,2.0,192000,10,raw/b3.txt
4,oltp_point_select,disable,16,1,baseline,ok,10,90000,9000,9000,1,1,2,3,0,0,4.5,20480,2.0,270000,20,raw/b4.txt
5,oltp_point_select,disable,16,2,direct,ok,10,210000,21000,21000,1,1,2,3,0,0,,,2.0,,,raw/b5.txt
6,oltp_point_select,disable,16,2,relay,ok,10,105000,10500,10500,1,1,2,3,0,0,4.2,5120,2.0,,,raw/b6.txt
7,oltp_point_select,disable,16,2,baseline,ok,10,94500,9450,9450,1,1,2,3,0,0,4.725,20480,2.0,283500,20,raw/b7.txt
8,oltp_point_select,disable,16,2,proxy,ok,10,102900,10290,10290,1,1,2,3,0,0,4.116,20480,2.0,205800,10,raw/b8.txt
9,oltp_point_select,disable,16,3,direct,ok,10,190000,19000,19000,1,1,2,3,0,0,,,2.0,,,raw/b9.txt
10,oltp_point_select,disable,16,3,relay,ok,10,95000,9500,9500,1,1,2,3,0,0,3.8,5120,2.0,,,raw/b10.txt
11,oltp_point_select,disable,16,3,proxy,ok,10,95000,9500,9500,1,1,2,3,0,0,4.75,20480,2.0,190000,10,raw/b11.txt
12,oltp_point_select,disable,16,3,baseline,unavailable: baseline exited with status 2 during the benchmark (see baseline.log),10,,,,,,,,,,,,,,,raw/b12.txt
`

func TestBaseline(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "results.csv")
	if err := os.WriteFile(in, []byte(baselineCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	env := "paths=direct relay proxy baseline\nbaseline=commit 70f9b6b (2026-11-26) Test\n" +
		"target cpu/relay=1.10\ntarget qps/relay=0.95\n"
	if err := os.WriteFile(filepath.Join(dir, "env.txt"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, dir, ""); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Against the baseline",
		"`baseline` is commit 70f9b6b (2026-11-26) Test. `proxy` is the working tree.",
		// Ratios paired by round: median (min–max).
		"| oltp_point_select | disable | 16 | relay | 10000 ±5.0% | 0.50 | – | 40.0 | – | – | – | 0 |",
		"| oltp_point_select | disable | 16 | baseline | 9225 ±2.4% | 0.45 | 0.90 | 50.0 | 1.25 | 3.00 | 2.17 | **0**, 1/3 rounds failed ⚠ |",
		"| oltp_point_select | disable | 16 | proxy | 9600 ±4.1% | 0.49 (0.48–0.50) | 0.98 (0.96–1.00) | 48.0 | 1.20 (1.00–1.25) | 2.00 | 1.04 | 0 |",
		"| rounds | QPS after / before | CPU/query after / before | allocs/query after / before (≤ 1) | proxy CPU / relay (≤ 1.10) | proxy QPS / relay (≥ 0.95) |",
		// Only rounds 1 and 2 have both proxies.
		"| oltp_point_select | disable | 16 | 2 | 1.08 (1.07–1.09) | 0.88 (0.80–0.96) | 0.667 ✓ | 1.20 (1.00–1.25) ✗ (spread crosses 1.10) | 0.98 (0.96–1.00) ✓ |",
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
}

func TestNoBaselineSection(t *testing.T) {
	recs, err := readResults(strings.NewReader(variantCSV))
	if err != nil {
		t.Fatal(err)
	}
	b := &strings.Builder{}
	newReport(recs, nil).writeBaseline(b)
	if b.Len() != 0 {
		t.Errorf("a run without a baseline path has a baseline section:\n%s", b)
	}
}
