package main_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardgate/shardgate/move"
)

// TestProcessFleetLeaderRunsWorkflows: in a fleet of three proxies only
// the leader runs workflows. A reshard (200000 rows from 2 to 4
// subtables: the copy takes seconds) is asked of a proxy that does not
// lead: it records the workflow in the sidecar and the leader runs it. The
// leader is killed (SIGKILL) during the copy; once its lease ends another
// proxy is elected, resumes the workflow from its saved checkpoint (the
// rows copied before are not copied again), verifies and cuts over. No
// other proxy ever runs it: no "workflow running here" in their logs, no
// workflow series in their /metrics; a command sent to one is answered
// with the leader's name.
func TestProcessFleetLeaderRunsWorkflows(t *testing.T) {
	leaderFailover(t, false)
}

// TestProcessFleetWorkflowLeaderFrozen: as
// TestProcessFleetLeaderRunsWorkflows, but the leader is frozen (SIGSTOP)
// during the copy and let go (SIGCONT) once the next leader runs the
// workflow: two runners exist for a moment. The frozen one's saves are
// refused by the sidecar (its lease was taken in a later term) and its
// term is over: it stops, and the workflow ends as the new leader runs
// it, every row counted once.
func TestProcessFleetWorkflowLeaderFrozen(t *testing.T) {
	leaderFailover(t, true)
}

// leaderFailover runs the two tests above: the leader killed, or frozen
// and let go.
func leaderFailover(t *testing.T, freeze bool) {
	srv := servers(t)
	f := newFleetEnv(t)
	const db, rows = "fleetlead", 200000
	ds := freshDatabase(t, db, srv[0], srv[1])
	d1, d2 := ds[0], ds[1]
	rev0 := f.put(t, topoYAML(fleetNodes(srv[0], srv[1]), []fleetSchema{{user: appUser, nodes: []string{"node1", "node2"}, shard: "    shard:\n" + hashRule(db, "t")}}))

	var ms []fleetMember
	for range 3 {
		ms = append(ms, f.startAdmin(t))
	}
	procs := procsOf(ms)
	waitApplied(t, procs, rev0, 10*time.Second)
	leaderID := f.waitLeader(t, 20*time.Second, "")
	leader := &ms[memberOf(ms, f.memberProc(t, procs, leaderID))]

	h := ms[0].p.openDB(t, db)
	execAll(t, h, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(32) NOT NULL)")
	preloadRows(t, d1, d2, db, "t", "CONCAT('row ', seq)", rows)

	// The request goes to a proxy that does not lead.
	var asked *fleetMember
	for i := range ms {
		if &ms[i] != leader {
			asked = &ms[i]
			break
		}
	}
	name := fmt.Sprintf("fleetlead_%d", time.Now().UnixNano())
	t0 := time.Now()
	st, code, body := adminCall(t, asked.web, "POST", "/admin/workflows", map[string]any{"table": db + ".t", "name": name, "nodes": []string{"node1", "node2"},
		"locations": []int{2, 2}, "auto_cutover": true, "options": map[string]int{"CopyWorkers": 1, "BatchRows": 50}})
	if code != 200 {
		t.Fatalf("POST /admin/workflows to a proxy that does not lead: %d %s", code, body)
	}
	if st.Running {
		t.Errorf("the proxy that does not lead reports the workflow running")
	}
	// saved reads the workflow's state as the sidecar holds it, through a
	// proxy that does not run it.
	saved := func(web string) move.Status {
		t.Helper()
		s, code, body := adminCall(t, web, "GET", "/admin/workflows/"+name, nil)
		if code != 200 {
			t.Fatalf("GET /admin/workflows/%s: %d %s", name, code, body)
		}
		return s
	}
	var before move.Status
	waitUntil(t, 30*time.Second, "the leader to copy a quarter of the rows", func() bool {
		before = saved(asked.web)
		return before.State.Phase == move.PhaseCopying && before.State.RowsCopied >= rows/4
	})
	picked := time.Since(t0)
	if before.State.RowsCopied >= rows {
		t.Fatalf("the copy is done before the leader could be killed (%d rows)", before.State.RowsCopied)
	}
	running := func(m *fleetMember) bool {
		b, err := os.ReadFile(m.p.logPath)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(b, []byte("workflow running here")) && bytes.Contains(b, []byte(name))
	}
	series := func(m *fleetMember) bool {
		resp, err := http.Get("http://" + m.p.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return bytes.Contains(b, []byte(`shardgate_workflow_rows_copied{`))
	}
	if !running(leader) || !series(leader) {
		t.Errorf("the leader %s does not say it runs the workflow (log %v, /metrics %v)", leaderID, running(leader), series(leader))
	}
	for i := range ms {
		if &ms[i] != leader && (running(&ms[i]) || series(&ms[i])) {
			t.Errorf("proxy %s, not the leader, runs the workflow (log %v, /metrics %v)", ms[i].p.addr, running(&ms[i]), series(&ms[i]))
		}
	}

	// The leader dies (or freezes) in the middle of the copy.
	if freeze {
		if err := leader.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	} else {
		leader.p.cmd.Process.Kill()
		<-leader.p.done
	}
	killed := time.Now()
	var atKill move.Status
	for i := range ms {
		if &ms[i] != leader {
			atKill = saved(ms[i].web)
			break
		}
	}
	var rest []*proc
	for i := range ms {
		if &ms[i] != leader {
			rest = append(rest, ms[i].p)
		}
	}
	procs = rest
	nextID := f.waitLeader(t, 30*time.Second, leaderID)
	elected := time.Since(killed)
	next := &ms[memberOf(ms, f.memberProc(t, procs, nextID))]
	waitUntil(t, 20*time.Second, "the new leader to run the workflow", func() bool { return running(next) })
	resumed := time.Since(killed)
	if freeze {
		// Two runners for a moment: the old leader goes on where it froze,
		// and stops its run (no workflow series; its log says why).
		if err := leader.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		thawed := time.Now()
		waitUntil(t, 20*time.Second, "the thawed leader to stop its run", func() bool { return !series(leader) })
		stopped := time.Since(thawed)
		b, _ := os.ReadFile(leader.p.logPath)
		if !bytes.Contains(b, []byte("no longer leading")) {
			t.Errorf("the thawed leader does not log that it no longer leads")
		}
		t.Logf("the thawed leader stopped its run %v after SIGCONT (it logged: a save refused %v, the lease lost %v)", stopped.Round(time.Millisecond),
			bytes.Contains(b, []byte("another proxy runs the workflow now")), bytes.Contains(b, []byte("lost the lease of a workflow")))
	}
	var done move.Status
	waitUntil(t, 120*time.Second, "the workflow to cut over", func() bool {
		done = saved(next.web)
		return done.State.Phase == move.PhaseSwitched
	})
	finished := time.Since(killed)

	// Resumed from the checkpoint: rows_copied counts the rows of each
	// checkpointed chunk once, so it is the table's rows exactly; a copy
	// started again would count the rows copied before the kill twice.
	if done.State.RowsTotal != rows || done.State.RowsCopied != rows {
		t.Errorf("rows copied %d of %d (total %d): want the copy resumed at its checkpoint (%d rows saved at the kill would count twice otherwise)",
			done.State.RowsCopied, rows, done.State.RowsTotal, atKill.State.RowsCopied)
	}
	if done.State.Verified.IsZero() || len(done.State.Diffs) > 0 || done.State.VerifyRows != rows {
		t.Errorf("verify: %d rows, differing ranges %+v, at %v", done.State.VerifyRows, done.State.Diffs, done.State.Verified)
	}
	var n int
	if err := next.p.openDB(t, db).QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != rows {
		t.Errorf("the new leader counts %d rows (%v), want %d", n, err, rows)
	}
	total := 0
	for i, d := range []*sql.DB{d1, d1, d2, d2} {
		var c int
		if err := d.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.%s", db, done.Spec.To.Subtable(i))).Scan(&c); err != nil {
			t.Fatal(err)
		}
		total += c
	}
	if total != rows {
		t.Errorf("the new subtables hold %d rows, want %d", total, rows)
	}
	for i := range ms {
		if &ms[i] != leader && &ms[i] != next && (running(&ms[i]) || series(&ms[i])) {
			t.Errorf("proxy %s, never the leader, ran the workflow", ms[i].p.addr)
		}
	}
	// A follower does not take commands: it names the leader.
	for i := range ms {
		if &ms[i] != leader && &ms[i] != next {
			if _, code, body := adminCall(t, ms[i].web, "POST", "/admin/workflows/"+name+"/complete", nil); code != http.StatusConflict || !strings.Contains(body, "run by the fleet's leader "+nextID) {
				t.Errorf("a command to a follower: %d %s", code, body)
			}
		}
	}
	what := "killed"
	if freeze {
		what = "frozen"
	}
	t.Logf("reshard of %d rows asked of a follower; the leader %s had %d rows copied after %v and was %s (saved: %d);"+
		" %s elected %v later, ran the workflow %v after the kill, cut over %v after it (copy %.1f s in all, verify %.2f s, pause %.1f ms); rows copied %d",
		rows, leaderID, before.State.RowsCopied, picked.Round(time.Millisecond), what, atKill.State.RowsCopied, nextID, elected.Round(time.Millisecond),
		resumed.Round(time.Millisecond), finished.Round(time.Millisecond), done.State.CopySeconds, done.State.VerifySeconds, done.State.PauseMillis, done.State.RowsCopied)
}
