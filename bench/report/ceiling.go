package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Issue 16's targets for the sharded proxy, against the direct-split ceiling.
const (
	// targetOfCeiling: the sharded proxy's ratio to the unsharded proxy must
	// be at least this fraction of the ceiling (split/direct).
	targetOfCeiling = 0.9
	// targetRanged: the range-sharded proxy's ratio to the unsharded proxy.
	targetRanged = 0.8
)

// tpsOf is the median tps of a cell with at least one successful round, with
// its min and max over rounds; ok is false when there is none.
func (rp *Report) tpsOf(test, mode string, threads int, path string) (med, lo, hi float64, ok bool) {
	c := rp.cell(test, mode, threads, path)
	if c == nil || c.OKRounds == 0 || math.IsNaN(c.TPS) {
		return math.NaN(), math.NaN(), math.NaN(), false
	}
	return c.TPS, c.TPSMin, c.TPSMax, true
}

// spreadRatio is a/b from the medians, with the lowest and highest a/b the
// rounds allow (min a / max b, max a / min b).
type spreadRatio struct{ Med, Lo, Hi float64 }

func newSpreadRatio(a, aLo, aHi, b, bLo, bHi float64) spreadRatio {
	return spreadRatio{ratio(a, b), ratio(aLo, bHi), ratio(aHi, bLo)}
}

// div is r/s with the bounds combined the same way.
func (r spreadRatio) div(s spreadRatio) spreadRatio {
	return spreadRatio{ratio(r.Med, s.Med), ratio(r.Lo, s.Hi), ratio(r.Hi, s.Lo)}
}

func (r spreadRatio) valid() bool { return !math.IsNaN(r.Med) }

// String renders "0.55 (0.50–0.61)", or only the median when the bounds are
// equal to it (one round) or missing.
func (r spreadRatio) String() string {
	if !r.valid() {
		return "–"
	}
	s := fmtNum(r.Med, 2)
	if !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi) && (fmtNum(r.Lo, 2) != s || fmtNum(r.Hi, 2) != s) {
		s += " (" + fmtNum(r.Lo, 2) + "–" + fmtNum(r.Hi, 2) + ")"
	}
	return s
}

// verdict marks a ratio against its target: ✓ when the median meets it, ✗
// when it does not, and "(spread crosses the target)" when some rounds would
// say the opposite.
func (r spreadRatio) verdict(target float64) string {
	if !r.valid() {
		return "–"
	}
	s := r.String()
	if r.Med >= target {
		s += " ✓"
	} else {
		s += " ✗"
	}
	if !math.IsNaN(r.Lo) && !math.IsNaN(r.Hi) && r.Lo < target && r.Hi >= target {
		s += " (spread crosses " + fmtNum(target, 1) + ")"
	}
	return s
}

// fmtTPS renders a median tps with ± half the min–max range relative to the
// median, as the QPS column does; "–" when missing.
func fmtTPS(med, lo, hi float64, ok bool) string {
	if !ok {
		return "–"
	}
	s := fmtNum(med, 0)
	if hi > lo && med > 0 {
		s += fmt.Sprintf(" ±%.1f%%", 50*(hi-lo)/med)
	}
	return s
}

// writeCeiling writes the "Sharding ceiling" section: for every test, mode and
// thread count with a split or ranged cell, the direct-split ceiling
// (split/direct), the sharded proxy's ratio to the unsharded proxy, their
// quotient against issue 16's target and ranged/proxy, all from median tps.
func (rp *Report) writeCeiling(b *strings.Builder) {
	type row struct {
		test, mode string
		threads    int
	}
	var rows []row
	threads := sortedThreads(rp.Records)
	for _, test := range uniqueInOrder(rp.Records, func(r Record) string { return r.Test }) {
		for _, mode := range uniqueInOrder(rp.Records, func(r Record) string { return r.Mode }) {
			for _, t := range threads {
				_, _, _, split := rp.tpsOf(test, mode, t, "split")
				_, _, _, ranged := rp.tpsOf(test, mode, t, "ranged")
				if split || ranged {
					rows = append(rows, row{test, mode, t})
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}

	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Sharding ceiling\n\n")
	p("All from median transactions per second (tps; one transaction per sysbench event, also with `--skip-trx=on`), "+
		"because the split path's queries are not comparable: it runs each range query once per part. "+
		"`ceiling` = split / direct: what MariaDB itself keeps when the table is split as the sharded proxy splits it "+
		"(point selects on one part, every range query on all parts in turn, one connection). "+
		"`proxy ratio` = sharded / proxy. Issue 16's targets: `proxy ratio / ceiling` ≥ %s, `ranged / proxy` ≥ %s. "+
		"tps ± is half the min–max range over rounds relative to the median; a ratio's parentheses give the lowest and "+
		"highest value the rounds allow (numerator's min over denominator's max, and the other way round).\n\n",
		fmtNum(targetOfCeiling, 1), fmtNum(targetRanged, 1))
	p("| test | mode | threads | direct tps | split tps | ceiling | proxy tps | sharded tps | proxy ratio | proxy ratio / ceiling (≥ %s) | ranged tps | ranged / proxy (≥ %s) |\n",
		fmtNum(targetOfCeiling, 1), fmtNum(targetRanged, 1))
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		d, dLo, dHi, dOK := rp.tpsOf(r.test, r.mode, r.threads, "direct")
		s, sLo, sHi, sOK := rp.tpsOf(r.test, r.mode, r.threads, "split")
		x, xLo, xHi, xOK := rp.tpsOf(r.test, r.mode, r.threads, "proxy")
		h, hLo, hHi, hOK := rp.tpsOf(r.test, r.mode, r.threads, "sharded")
		g, gLo, gHi, gOK := rp.tpsOf(r.test, r.mode, r.threads, "ranged")
		ceiling := newSpreadRatio(s, sLo, sHi, d, dLo, dHi)
		proxyRatio := newSpreadRatio(h, hLo, hHi, x, xLo, xHi)
		ranged := newSpreadRatio(g, gLo, gHi, x, xLo, xHi)
		p("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.test, r.mode, r.threads,
			fmtTPS(d, dLo, dHi, dOK), fmtTPS(s, sLo, sHi, sOK), ceiling,
			fmtTPS(x, xLo, xHi, xOK), fmtTPS(h, hLo, hHi, hOK), proxyRatio,
			proxyRatio.div(ceiling).verdict(targetOfCeiling),
			fmtTPS(g, gLo, gHi, gOK), ranged.verdict(targetRanged))
	}
	p("\n")
	for _, r := range rows {
		for _, path := range []string{"direct", "split", "proxy", "sharded", "ranged"} {
			if c := rp.cell(r.test, r.mode, r.threads, path); c != nil && c.Errors > 0 {
				p("⚠ %s %s %s threads: `%s` had %s errors or reconnects; its numbers are suspect.\n\n",
					r.test, r.mode, strconv.Itoa(r.threads), path, fmtNum(c.Errors, 0))
			}
		}
	}
}
