package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// status lists the workflows, one line each, or shows one for a person
// (printStatus); -json prints the admin API's answer for scripts, -watch a
// progress line until the workflow is in sync.
func status(c *client, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	watchIt := fs.Bool("watch", false, "show a progress bar until the workflow is in sync")
	asJSON := fs.Bool("json", false, "print the workflows (or the workflow) as JSON, for scripts")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 1:
		return usagef("status", "takes at most one NAME, got %q", pos)
	case *watchIt && (len(pos) == 0 || *asJSON):
		return usagef("status", "-watch needs a NAME and prints no JSON: shardgate status NAME -watch")
	case *watchIt:
		return watch(c, pos[0], w)
	}
	if len(pos) == 1 {
		var st move.Status
		if err := c.do("GET", "/admin/workflows/"+pos[0], nil, &st); err != nil {
			return err
		}
		if *asJSON {
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintln(w, string(b))
			return nil
		}
		printStatus(w, &st, time.Now())
		return nil
	}
	var all []move.Status
	if err := c.do("GET", "/admin/workflows", nil, &all); err != nil {
		return err
	}
	if *asJSON {
		if all == nil {
			all = []move.Status{}
		}
		b, _ := json.MarshalIndent(all, "", "  ")
		fmt.Fprintln(w, string(b))
		return nil
	}
	if len(all) == 0 {
		fmt.Fprintln(w, "no workflows")
	}
	for i := range all {
		fmt.Fprintln(w, line(&all[i]))
	}
	return nil
}

// printStatus writes one workflow for a person: its line (phase, progress
// bar, rate, ETA), then one fact a row (rules, rows, changes, verify,
// options, times), the ranges verify found different, and the next step.
// Durations read as Go prints them (1s, 1.5s, 2m5s), counts with
// thousands separators.
func printStatus(w io.Writer, st *move.Status, now time.Time) {
	s := &st.State
	fmt.Fprintln(w, line(st))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "  %s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("table", "%s (%s)", st.Spec.Logical(), st.Spec.Kind)
	if src := st.Spec.Source; src != nil {
		row("source", "%s@%s, table %s.%s", src.User, src.Addr, st.Spec.SourceDB, st.Spec.SourceTable)
		row("rule", "%s", ruleText(&st.Spec.To))
	} else {
		row("rule", "%s", ruleText(&st.Spec.From))
		row("new rule", "%s", ruleText(&st.Spec.To))
	}
	running := "no"
	if st.Running {
		running = "yes"
	}
	row("phase", "%s (running: %s)", s.Phase, running)
	if s.RowsTotal > 0 || s.RowsCopied > 0 {
		copied := fmt.Sprintf("%s of %s rows", count(s.RowsCopied), count(s.RowsTotal))
		if s.RowsTotal > 0 {
			copied += fmt.Sprintf(" (%.0f%%)", 100*min(1, float64(s.RowsCopied)/float64(s.RowsTotal)))
		}
		if s.CopySeconds > 0 {
			copied += fmt.Sprintf(" in %s, %s rows/s", seconds(s.CopySeconds), count(int64(float64(s.RowsCopied)/s.CopySeconds)))
		}
		if s.Phase == move.PhaseCopying && st.RowsPerSec > 0 {
			copied += fmt.Sprintf("; now %s rows/s, ETA %s", count(int64(st.RowsPerSec)), seconds(st.ETASeconds))
		}
		row("copy", "%s", copied)
	}
	if s.Phase != move.PhaseCopying || s.ChangesApplied > 0 {
		row("changes", "%s applied, lag %s", count(s.ChangesApplied), seconds(st.LagSeconds))
	}
	if !s.Verified.IsZero() {
		row("verify", "%s rows in %s, %d differing %s, %s ago", count(s.VerifyRows), seconds(s.VerifySeconds), len(s.Diffs), plural(len(s.Diffs), "range"), ago(now, s.Verified))
	}
	if s.Cutovers > 0 {
		row("cutovers", "%d %s", s.Cutovers, plural(s.Cutovers, "attempt"))
	}
	if s.Error != "" {
		row("error", "%s (retrying)", s.Error)
	}
	if o := optionsText(&st.Spec.Options); o != "" {
		row("options", "%s", o)
	}
	if !st.Spec.Created.IsZero() {
		row("created", "%s (%s ago)", st.Spec.Created.UTC().Format(time.DateTime+" MST"), ago(now, st.Spec.Created))
	}
	if !s.Updated.IsZero() {
		row("updated", "%s (%s ago)", s.Updated.UTC().Format(time.DateTime+" MST"), ago(now, s.Updated))
	}
	tw.Flush()
	const maxDiffs = 20
	for i, d := range s.Diffs {
		if i == maxDiffs {
			fmt.Fprintf(w, "  ... %d more differing ranges (shardgate status %s -json lists them all)\n", len(s.Diffs)-maxDiffs, st.Spec.Name)
			break
		}
		fmt.Fprintf(w, "  differs: bucket %d %s: %s source rows, %s new rows\n", d.Bucket, d.Description, count(d.SourceRows), count(d.TargetRows))
	}
	if next := nextStep(st); next != "" {
		fmt.Fprintf(w, "next: %s\n", next)
	}
}

// nextStep is what an operator does next with the workflow.
func nextStep(st *move.Status) string {
	name := st.Spec.Name
	switch st.State.Phase {
	case move.PhaseCopying, move.PhaseCatchingUp:
		return "wait until it is in sync (shardgate status " + name + " -watch)"
	case move.PhaseReady:
		if len(st.State.Diffs) > 0 {
			return "shardgate repair " + name + " copies the differing ranges again"
		}
		if st.Spec.Kind == move.KindImport {
			return "point the application at the proxy, then: shardgate complete " + name
		}
		return "shardgate cutover " + name
	case move.PhaseSwitched:
		return "shardgate complete " + name + " drops the old subtables; shardgate rollback " + name + " goes back to the old rule"
	}
	return ""
}

// ruleText is a shard rule in one line: "hash on id, 4 subtables
// (node1: 2, node2: 2), generation 1".
func ruleText(r *config.ShardRule) string {
	if r.Type == "" {
		return "(none)"
	}
	s := r.Type
	if r.Key != "" {
		s += " on " + r.Key
	}
	var per []string
	total := 0
	for i, n := range r.Nodes {
		if i < len(r.Locations) {
			per = append(per, fmt.Sprintf("%s: %d", n, r.Locations[i]))
			total += r.Locations[i]
		} else if i < len(r.DateRange) {
			per = append(per, fmt.Sprintf("%s: %s", n, r.DateRange[i]))
		} else {
			per = append(per, n)
		}
	}
	if total > 0 {
		s += fmt.Sprintf(", %d subtables (%s)", total, strings.Join(per, ", "))
	} else if len(per) > 0 {
		s += " (" + strings.Join(per, ", ") + ")"
	}
	if r.TableRowLimit > 0 {
		s += fmt.Sprintf(", %s keys per subtable", count(int64(r.TableRowLimit)))
	}
	if r.Sequence != "" {
		s += ", sequence " + r.Sequence
	}
	return s + fmt.Sprintf(", generation %d", r.Generation)
}

// optionsText is the workflow's options as ks.yaml names them (move:),
// those set only.
func optionsText(o *config.MoveOptions) string {
	var parts []string
	dur := func(k string, d time.Duration) {
		if d != 0 {
			parts = append(parts, k+" "+d.String())
		}
	}
	num := func(k string, n int) {
		if n != 0 {
			parts = append(parts, k+" "+strconv.Itoa(n))
		}
	}
	num("copy_workers", o.CopyWorkers)
	num("batch_rows", o.BatchRows)
	num("apply_workers", o.ApplyWorkers)
	dur("cutover_timeout", o.CutoverTimeout)
	dur("throttle_latency", o.ThrottleLatency)
	dur("cutover_ack_wait", o.CutoverAckWait)
	dur("buffer_window", o.BufferWindow)
	num("buffer_size", o.BufferSize)
	return strings.Join(parts, ", ")
}

// seconds is a duration in seconds as Go prints a time.Duration, rounded
// to what a person reads: 350ms, 1.4s, 2m5s.
func seconds(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d >= time.Minute:
		d = d.Round(time.Second)
	case d >= time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(time.Millisecond)
	}
	return d.String()
}

// ago is the time from t to now, rounded as seconds rounds.
func ago(now, t time.Time) string { return seconds(now.Sub(t).Seconds()) }

// count is n with thousands separators: 1,234,567.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// plural is word for n of them: "1 attempt", "2 attempts", "0 ranges".
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
