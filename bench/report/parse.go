package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Run is what one sysbench run reports, as parsed from its standard output.
type Run struct {
	Queries    int64   // "queries:" total.
	QPS        float64 // "queries:" per-second figure.
	TPS        float64 // "transactions:" per-second figure.
	Events     int64   // "total number of events:".
	AvgMs      float64 // Latency sum / events: finer than the printed two-decimal avg.
	P50Ms      float64 // From the histogram (--histogram=on); 0 without one.
	P95Ms      float64 // From the histogram when present, else the printed percentile line.
	MaxMs      float64
	Errors     int64 // "ignored errors:".
	Reconnects int64 // "reconnects:".
}

// parseHeader is the CSV fragment that -parse prints, in this order.
const parseHeader = "queries,qps,tps,avg_ms,p50_ms,p95_ms,max_ms,errors,reconnects"

// CSV renders r in parseHeader order.
func (r Run) CSV() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return strings.Join([]string{
		strconv.FormatInt(r.Queries, 10), f(round(r.QPS, 2)), f(round(r.TPS, 2)),
		f(round(r.AvgMs, 4)), f(r.P50Ms), f(r.P95Ms), f(r.MaxMs),
		strconv.FormatInt(r.Errors, 10), strconv.FormatInt(r.Reconnects, 10),
	}, ",")
}

var (
	reCountRate  = regexp.MustCompile(`^\s*(queries|transactions|ignored errors|reconnects):\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	reEvents     = regexp.MustCompile(`^\s*total number of events:\s+(\d+)`)
	reLatency    = regexp.MustCompile(`^\s*(min|avg|max|sum|(\d+)th percentile):\s+([\d.]+)`)
	reHistBucket = regexp.MustCompile(`^\s*([\d.]+)\s+\|[* ]*\s(\d+)\s*$`)
)

// errNoStatistics means the output has no "SQL statistics" section: sysbench
// failed before or during the run.
var errNoStatistics = errors.New("no SQL statistics in sysbench output")

// parseSysbench reads the output of one `sysbench ... run`. Percentiles are
// computed from the latency histogram with sysbench's own rule, because the
// printed percentile has only two decimals (10 µs steps) and sysbench prints
// only one percentile per run; the histogram has three (1 µs) and gives p50
// and p95 from the same run.
func parseSysbench(rd io.Reader) (Run, error) {
	var (
		r          Run
		hist       []bucket
		inHist     bool
		sumMs      float64
		printedP95 float64
		haveStats  bool
		haveEvents bool
	)
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Latency histogram"):
			inHist = true
			continue
		case inHist:
			if m := reHistBucket.FindStringSubmatch(line); m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				n, _ := strconv.ParseInt(m[2], 10, 64)
				hist = append(hist, bucket{v, n})
				continue
			}
			if strings.Contains(line, "distribution") {
				continue
			}
			inHist = false
		}
		if strings.HasPrefix(line, "SQL statistics:") {
			haveStats = true
		}
		if m := reCountRate.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			rate, _ := strconv.ParseFloat(m[3], 64)
			switch m[1] {
			case "queries":
				r.Queries, r.QPS = n, rate
			case "transactions":
				r.TPS = rate
			case "ignored errors":
				r.Errors = n
			case "reconnects":
				r.Reconnects = n
			}
			continue
		}
		if m := reEvents.FindStringSubmatch(line); m != nil {
			r.Events, _ = strconv.ParseInt(m[1], 10, 64)
			haveEvents = true
			continue
		}
		if m := reLatency.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			switch {
			case m[1] == "avg":
				r.AvgMs = v
			case m[1] == "max":
				r.MaxMs = v
			case m[1] == "sum":
				sumMs = v
			case m[2] == "95":
				printedP95 = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Run{}, err
	}
	if !haveStats || !haveEvents {
		return Run{}, errNoStatistics
	}
	if r.Events > 0 && sumMs > 0 {
		r.AvgMs = sumMs / float64(r.Events)
	}
	r.P95Ms = printedP95
	if len(hist) > 0 {
		r.P50Ms = percentile(hist, 50)
		r.P95Ms = percentile(hist, 95)
	}
	return r, nil
}

// bucket is one line of sysbench's latency histogram.
type bucket struct {
	valueMs float64
	count   int64
}

// percentile applies sysbench's rule (sb_histogram_get_pct): the value of the
// first bucket at which the running count reaches round(total*pct/100).
func percentile(h []bucket, pct float64) float64 {
	var total int64
	for _, b := range h {
		total += b.count
	}
	want := int64(math.Floor(float64(total)*pct/100 + 0.5))
	if want == 0 {
		return 0
	}
	var cum int64
	for _, b := range h {
		cum += b.count
		if cum >= want {
			return b.valueMs
		}
	}
	return h[len(h)-1].valueMs
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// parseFile is the -parse mode: print one CSV fragment for run.sh.
func parseFile(w io.Writer, rd io.Reader, name string) error {
	r, err := parseSysbench(rd)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, err = fmt.Fprintln(w, r.CSV())
	return err
}
