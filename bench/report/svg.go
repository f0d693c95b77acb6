package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// pathColors keeps each rung of the ladder the same colour in every chart.
var pathColors = map[string]string{
	"direct":  "#1f77b4",
	"relay":   "#7f7f7f",
	"proxy":   "#d62728",
	"sharded": "#2ca02c",
	"split":   "#17becf",
	"ranged":  "#ff7f0e",
}

var extraColors = []string{"#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#aec7e8"}

// chartSource picks what the chart shows: point select over the text
// protocol when it was run, else the first test and mode in the results.
func (rp *Report) chartSource() (test, mode string, ok bool) {
	if rp.hasAny("oltp_point_select", "disable") {
		return "oltp_point_select", "disable", true
	}
	if len(rp.Records) == 0 {
		return "", "", false
	}
	return rp.Records[0].Test, rp.Records[0].Mode, true
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*exp {
			return m * exp
		}
	}
	return 10 * exp
}

// writeSVG draws median QPS against thread count, one line per path. Thread
// counts are spaced evenly (they are usually powers of two or four apart).
// Cells without a successful round leave a gap in their line.
func (rp *Report) writeSVG(w io.Writer) error {
	test, mode, ok := rp.chartSource()
	if !ok {
		return fmt.Errorf("no results to chart")
	}
	var threads []int
	for _, t := range sortedThreads(rp.Records) {
		if rp.hasThreads(test, mode, t) {
			threads = append(threads, t)
		}
	}
	var paths []string
	for _, p := range rp.paths() {
		if byTPS(p) && test != "oltp_point_select" {
			continue // Its QPS counts each range query once per part: not on a QPS chart.
		}
		for _, t := range threads {
			if rp.cell(test, mode, t, p) != nil {
				paths = append(paths, p)
				break
			}
		}
	}

	const (
		left, top, bottom              = 80, 50, 60
		plotW                          = 490
		font                           = `font-family="sans-serif"`
		ticks                          = 5
		axisColor, gridColor, txtColor = "#333", "#ddd", "#222"
		legendRow                      = 22
	)
	labels := make([]string, len(paths))
	longest := 0
	for i, path := range paths {
		labels[i] = path
		if !rp.anyOK(test, mode, path) {
			labels[i] += " (failed)"
		}
		longest = max(longest, len([]rune(labels[i])))
	}
	// The legend sits right of the plot: widen the picture for long variant
	// names (about 7.5 px per character at 13 px) and make it taller when
	// there are more series than fit beside the plot.
	right := max(150, 60+int(math.Ceil(7.5*float64(longest))))
	height := max(420, top+10+len(paths)*legendRow+bottom)
	width, plotH := left+plotW+right, height-top-bottom
	maxQPS := 0.0
	for _, p := range paths {
		for _, t := range threads {
			if q := rp.qps(test, mode, t, p); !math.IsNaN(q) {
				maxQPS = math.Max(maxQPS, q)
			}
		}
	}
	step := niceStep(maxQPS / ticks)
	yMax := step * math.Ceil(maxQPS/step)
	if yMax == 0 {
		yMax = step
	}
	x := func(i int) float64 {
		if len(threads) == 1 {
			return left + plotW/2
		}
		return left + float64(i)*plotW/float64(len(threads)-1)
	}
	y := func(q float64) float64 { return float64(top+plotH) - q/yMax*float64(plotH) }

	b := &strings.Builder{}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="28" %s font-size="16" fill="%s">%s</text>`+"\n", left, font, txtColor,
		html.EscapeString(fmt.Sprintf("%s, --db-ps-mode=%s: QPS (median) vs threads", test, mode)))

	// Horizontal grid and y labels.
	for v := 0.0; v <= yMax+step/2; v += step {
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", left, y(v), left+plotW, y(v), gridColor)
		p(`<text x="%d" y="%.1f" %s font-size="12" fill="%s" text-anchor="end">%s</text>`+"\n",
			left-8, y(v)+4, font, txtColor, fmtNum(v, 0))
	}
	// Axes.
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", left, top, left, top+plotH, axisColor)
	p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", left, top+plotH, left+plotW, top+plotH, axisColor)
	for i, t := range threads {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(i), top+plotH, x(i), top+plotH+5, axisColor)
		p(`<text x="%.1f" y="%d" %s font-size="12" fill="%s" text-anchor="middle">%d</text>`+"\n",
			x(i), top+plotH+20, font, txtColor, t)
	}
	p(`<text x="%d" y="%d" %s font-size="13" fill="%s" text-anchor="middle">threads</text>`+"\n",
		left+plotW/2, height-15, font, txtColor)
	p(`<text x="18" y="%d" %s font-size="13" fill="%s" text-anchor="middle" transform="rotate(-90 18 %d)">queries per second</text>`+"\n",
		top+plotH/2, font, txtColor, top+plotH/2)

	// One polyline per run of consecutive successful cells, plus a dot per cell.
	extra := 0
	for li, path := range paths {
		color, ok := pathColors[path]
		if !ok {
			color = extraColors[extra%len(extraColors)]
			extra++
		}
		var seg, dots []string
		flush := func() {
			if len(seg) > 1 {
				p(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(seg, " "))
			}
			seg = seg[:0]
		}
		for i, t := range threads {
			q := rp.qps(test, mode, t, path)
			if math.IsNaN(q) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", x(i), y(q)))
			dots = append(dots, fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s</title></circle>`,
				x(i), y(q), color, html.EscapeString(fmt.Sprintf("%s, %d threads: %.0f QPS", path, t, q))))
		}
		flush()
		for _, d := range dots { // Dots on top of their line.
			p("%s\n", d)
		}

		ly := top + 10 + li*legendRow
		label := labels[li]
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", left+plotW+20, ly, left+plotW+44, ly, color)
		p(`<text x="%d" y="%d" %s font-size="13" fill="%s">%s</text>`+"\n", left+plotW+50, ly+4, font, txtColor, html.EscapeString(label))
	}
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (rp *Report) hasThreads(test, mode string, t int) bool {
	for k := range rp.Cells {
		if k.Test == test && k.Mode == mode && k.Threads == t {
			return true
		}
	}
	return false
}

func (rp *Report) anyOK(test, mode, path string) bool {
	for k, c := range rp.Cells {
		if k.Test == test && k.Mode == mode && k.Path == path && c.OKRounds > 0 {
			return true
		}
	}
	return false
}
