package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
)

// clearEnv unsets the SHARDGATE_* variables for the test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, e := range envVars {
		t.Setenv(e.name, "")
		os.Unsetenv(e.name)
	}
}

// sh runs the command line in-process: exit status, stdout, stderr.
func sh(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelp: -h, -help, --help and help print the usage on stdout and exit
// 0; it lists every command, every global flag with its default (the
// admin address's among them) and every SHARDGATE_* variable, with its
// value when set (a password's hidden).
func TestHelp(t *testing.T) {
	clearEnv(t)
	var first string
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		code, out, errOut := sh(arg)
		if code != 0 || errOut != "" {
			t.Fatalf("shardgate %s: exit %d, stderr %q", arg, code, errOut)
		}
		if first == "" {
			first = out
		} else if out != first {
			t.Errorf("shardgate %s prints another help than -h", arg)
		}
	}
	want := []string{"Usage:", "shardgate [flags] COMMAND [arguments]",
		`-admin URL`, `(default "http://127.0.0.1:9797")`, `-cluster PREFIX`, `(default "/shardgate/default")`,
		"-etcd ENDPOINTS", "-user USER", "-password PASSWORD", "-version",
		"Run 'shardgate help COMMAND'"}
	for _, c := range commands {
		want = append(want, "  "+c.name+" ")
	}
	for _, e := range envVars {
		want = append(want, e.name)
	}
	for _, w := range want {
		if !strings.Contains(first, w) {
			t.Errorf("help lacks %q:\n%s", w, first)
		}
	}
	if !strings.Contains(first, "SHARDGATE_ADMIN         -admin     (not set)") {
		t.Errorf("help does not say SHARDGATE_ADMIN is not set:\n%s", first)
	}
	t.Setenv("SHARDGATE_ADMIN", "http://10.0.0.1:9797")
	t.Setenv("SHARDGATE_WEB_PASSWORD", "s3cret")
	_, out, _ := sh("--help")
	if !strings.Contains(out, "(set: http://10.0.0.1:9797)") || strings.Contains(out, "s3cret") || !strings.Contains(out, "-password  (set)") {
		t.Errorf("help with SHARDGATE_ADMIN and SHARDGATE_WEB_PASSWORD set:\n%s", out)
	}
	// The flag's default stays the built-in one: the environment is listed apart.
	if !strings.Contains(out, `(default "http://127.0.0.1:9797")`) {
		t.Errorf("help shows another default for -admin:\n%s", out)
	}
}

// TestHelpCommand: help COMMAND, COMMAND -h and COMMAND --help print the
// command's usage (its flags with their defaults) on stdout and exit 0,
// without doing anything (no admin API is reachable here).
func TestHelpCommand(t *testing.T) {
	clearEnv(t)
	flagsOf := map[string][]string{
		"reshard": {"-nodes NODES", "-locations COUNTS", "-type TYPE", "-key COLUMN", "-table-row-limit KEYS", "-name NAME",
			"-auto-cutover", "-workers WORKERS", "-batch ROWS", "-apply-workers WORKERS", "-wait"},
		"import": {"-from USER:PASSWORD@HOST:PORT/DB.TABLE", "-name NAME", "-wait"},
		"status": {"-watch", "-json"},
		"apply":  {"-wait"},
		"stream": {"-config FILE", "-name NAME"},
	}
	for _, c := range commands {
		code, out, errOut := sh("help", c.name)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: shardgate [flags] "+c.name) {
			t.Errorf("shardgate help %s: exit %d, stderr %q, stdout\n%s", c.name, code, errOut, out)
			continue
		}
		for _, f := range flagsOf[c.name] {
			if !strings.Contains(out, "  "+f+"\n") {
				t.Errorf("help %s lacks the flag %s:\n%s", c.name, f, out)
			}
		}
		if (len(flagsOf[c.name]) > 0) != strings.Contains(out, "Flags of "+c.name) {
			t.Errorf("help %s: flags listed %v, want %v:\n%s", c.name, !(len(flagsOf[c.name]) > 0), len(flagsOf[c.name]) > 0, out)
		}
		if c.name == "help" || c.name == "version" {
			continue
		}
		for _, h := range []string{"-h", "--help"} {
			if code, o, e := sh("-admin", "http://127.0.0.1:1", c.name, h); code != 0 || o != out || e != "" {
				t.Errorf("shardgate %s %s: exit %d, stderr %q, stdout differs from help %s: %v", c.name, h, code, e, c.name, o != out)
			}
		}
	}
	if code, out, _ := sh("reshard", "db.t", "-nodes", "n1", "-h"); code != 0 || !strings.Contains(out, "-locations COUNTS") {
		t.Errorf("reshard db.t -nodes n1 -h: exit %d\n%s", code, out)
	}
}

// TestUsageErrors: what shardgate cannot run exits 2 with the problem and
// where to read more on stderr, and prints nothing on stdout.
func TestUsageErrors(t *testing.T) {
	clearEnv(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"statu"}, []string{`shardgate: unknown command "statu"; did you mean "status"?`, "Run 'shardgate help' for usage."}},
		{[]string{"frobnicate"}, []string{`shardgate: unknown command "frobnicate"`, "Run 'shardgate help' for usage."}},
		{nil, []string{"shardgate: no command", "The commands are:"}},
		{[]string{"-bogus", "status"}, []string{"shardgate: flag provided but not defined: -bogus"}},
		{[]string{"help", "nope"}, []string{`shardgate help: unknown help topic "nope"`, "Run 'shardgate help help' for usage."}},
		{[]string{"reshard", "db.t", "-nodez", "n1"}, []string{"shardgate reshard: flag provided but not defined: -nodez", "Run 'shardgate help reshard' for usage."}},
		{[]string{"reshard", "db.t", "-nodes", "n1"}, []string{"shardgate reshard: needs DB.TABLE, -nodes and -locations"}},
		{[]string{"reshard", "db.t", "-nodes", "n1", "-locations", "x"}, []string{"shardgate reshard: -locations x: "}},
		{[]string{"import", "db.t"}, []string{"shardgate import: needs DB.TABLE and -from"}},
		{[]string{"cutover"}, []string{"shardgate cutover: needs the workflow's NAME: shardgate cutover NAME", "Run 'shardgate help cutover'"}},
		{[]string{"status", "a", "b"}, []string{"shardgate status: takes at most one NAME"}},
		{[]string{"status", "-watch"}, []string{"shardgate status: -watch needs a NAME"}},
		{[]string{"plan"}, []string{"shardgate plan: needs the FILE"}},
		{[]string{"apply"}, []string{"shardgate apply: needs the FILE"}},
		{[]string{"topo"}, []string{"shardgate topo: needs load FILE or get"}},
		{[]string{"version", "x"}, []string{"shardgate version: takes no arguments"}},
	} {
		code, out, errOut := sh(c.args...)
		if code != 2 || out != "" {
			t.Errorf("shardgate %q: exit %d, stdout %q, want 2 and nothing", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("shardgate %q: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
	// A command that fails (nothing listens) exits 1.
	if code, _, errOut := sh("-admin", "127.0.0.1:1", "status"); code != 1 || !strings.HasPrefix(errOut, "shardgate: ") {
		t.Errorf("status against nothing: exit %d, stderr %q", code, errOut)
	}
}

// fakeAdmin serves GET /admin/workflows and /admin/workflows/NAME from
// sts, and counts the requests.
func fakeAdmin(t *testing.T, sts ...move.Status) (*httptest.Server, *int) {
	t.Helper()
	n := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*n++
		if r.URL.Path == "/admin/workflows" {
			json.NewEncoder(w).Encode(sts)
			return
		}
		for _, st := range sts {
			if r.URL.Path == "/admin/workflows/"+st.Spec.Name {
				json.NewEncoder(w).Encode(st)
				return
			}
		}
		http.Error(w, "no workflow "+r.URL.Path, http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	return srv, n
}

// testStatus is a reshard that copies, cut over once, with options set.
func testStatus(now time.Time) move.Status {
	st := move.Status{Running: true, RowsPerSec: 2100, ETASeconds: 0.79, LagSeconds: 0.25}
	st.Spec = move.Spec{Name: "w1", Kind: move.KindReshard, DB: "shop", Table: "orders",
		From:    config.ShardRule{DB: "shop", Table: "orders", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}},
		To:      config.ShardRule{DB: "shop", Table: "orders", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}, Generation: 1},
		Options: config.MoveOptions{CutoverTimeout: time.Second, CopyWorkers: 4, BatchRows: 1000, ApplyWorkers: 4, ThrottleLatency: 50 * time.Millisecond},
		Created: now.Add(-125 * time.Second)}
	st.State = move.State{Phase: move.PhaseCopying, RowsTotal: 3000, RowsCopied: 1350, CopySeconds: 1.42, ChangesApplied: 12345,
		Updated: now.Add(-1500 * time.Millisecond)}
	return st
}

// TestStatusHuman: status NAME prints the workflow for a person
// (durations as 1s, counts with separators, progress, phase, rates, the
// next step), status NAME -json the admin API's fields for scripts, and
// status -json the list.
func TestStatusHuman(t *testing.T) {
	clearEnv(t)
	now := time.Now()
	st := testStatus(now)
	srv, _ := fakeAdmin(t, st)
	code, out, errOut := sh("-admin", srv.URL, "status", "w1")
	if code != 0 || errOut != "" {
		t.Fatalf("status w1: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"w1 reshard shop.orders: copying [#############.................]  45% 1350/3000 rows, 2100 rows/s, ETA 790ms",
		"table     shop.orders (reshard)",
		"rule      hash on id, 2 subtables (node1: 1, node2: 1), generation 0",
		"new rule  hash on id, 4 subtables (node1: 2, node2: 2), generation 1",
		"phase     copying (running: yes)",
		"copy      1,350 of 3,000 rows (45%) in 1.4s, 950 rows/s; now 2,100 rows/s, ETA 790ms",
		"changes   12,345 applied, lag 250ms",
		"options   copy_workers 4, batch_rows 1000, apply_workers 4, cutover_timeout 1s, throttle_latency 50ms",
		"(2m5s ago)",
		"next: wait until it is in sync (shardgate status w1 -watch)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status w1 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "1000000000") || strings.Contains(out, "{") {
		t.Errorf("status w1 prints raw JSON:\n%s", out)
	}
	t.Logf("shardgate status w1:\n%s", out)

	// -json: the fields scripts read, as before.
	code, out, _ = sh("-admin", srv.URL, "status", "w1", "--json")
	var got move.Status
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.State.RowsCopied != 1350 || got.Spec.Options.CutoverTimeout != time.Second {
		t.Fatalf("status w1 --json: exit %d, %v:\n%s", code, err, out)
	}
	for _, field := range []string{`"CutoverTimeout": 1000000000`, `"rows_copied": 1350`, `"phase": "copying"`, `"rows_per_sec": 2100`} {
		if !strings.Contains(out, field) {
			t.Errorf("status w1 --json lacks %s:\n%s", field, out)
		}
	}
	code, out, _ = sh("-admin", srv.URL, "status", "-json")
	var all []move.Status
	if err := json.Unmarshal([]byte(out), &all); code != 0 || err != nil || len(all) != 1 || all[0].Spec.Name != "w1" {
		t.Fatalf("status -json: exit %d, %v:\n%s", code, err, out)
	}

	// Ready with differing ranges: verify's figures, the ranges, repair next.
	st.State.Phase, st.State.RowsCopied = move.PhaseReady, 3000
	st.State.Verified, st.State.VerifyRows, st.State.VerifySeconds = now.Add(-3*time.Second), 3000, 0.3
	st.State.Diffs = []move.Range{{Bucket: 7, SourceRows: 10, TargetRows: 9, Description: "id 700..799"}}
	srv, _ = fakeAdmin(t, st)
	_, out, _ = sh("-admin", srv.URL, "status", "w1")
	for _, want := range []string{"verify    3,000 rows in 300ms, 1 differing range, 3s ago",
		"differs: bucket 7 id 700..799: 10 source rows, 9 new rows", "next: shardgate repair w1"} {
		if !strings.Contains(out, want) {
			t.Errorf("ready status lacks %q:\n%s", want, out)
		}
	}
}

// TestEnvironment: SHARDGATE_ADMIN is -admin's default; -admin on the
// command line wins.
func TestEnvironment(t *testing.T) {
	clearEnv(t)
	envSrv, envHits := fakeAdmin(t)
	flagSrv, flagHits := fakeAdmin(t)
	t.Setenv("SHARDGATE_ADMIN", envSrv.URL)
	if code, out, _ := sh("status"); code != 0 || out != "no workflows\n" || *envHits != 1 {
		t.Fatalf("status with SHARDGATE_ADMIN: exit %d, %q, %d requests", code, out, *envHits)
	}
	if code, _, _ := sh("-admin", flagSrv.URL, "status"); code != 0 || *flagHits != 1 || *envHits != 1 {
		t.Fatalf("-admin over SHARDGATE_ADMIN: exit %d, requests %d (flag) %d (env)", code, *flagHits, *envHits)
	}
}

// TestFormatting: the durations and counts of the human status.
func TestFormatting(t *testing.T) {
	for sec, want := range map[float64]string{0: "0s", 0.0004: "400µs", 0.25: "250ms", 1: "1s", 1.42: "1.4s", 125.4: "2m5s", 3600: "1h0m0s"} {
		if got := seconds(sec); got != want {
			t.Errorf("seconds(%v) = %s, want %s", sec, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestBinaries builds bin/shardgate and bin/proxy as make build does (with
// VCS stamping, whatever GOFLAGS says) and runs them: version and -version
// print the commit, --help exits 0 on stdout (the proxy's -h, the flag
// package's, on stderr), an unknown command exits 2.
func TestBinaries(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	vcs := "-buildvcs=true"
	if _, err := exec.LookPath("git"); err != nil {
		vcs = "-buildvcs=false"
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, pkg := range []string{"shardgate", "proxy"} {
		if out, err := exec.CommandContext(ctx, goTool, "build", vcs, "-o", filepath.Join(dir, pkg), "github.com/shardgate/shardgate/cmd/"+pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	runBin := func(bin string, args ...string) (int, string, string) {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, bin), args...)
		cmd.Env = append(os.Environ(), "SHARDGATE_ADMIN=http://127.0.0.1:1")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), errOut.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errOut.String()
	}
	line := regexp.MustCompile(`^(shardgate|proxy) \S+ commit ([0-9a-f]{40}) \(\S+Z(, modified)?\) go1\.\S+ \S+/\S+\n$`)
	if vcs == "-buildvcs=false" {
		line = regexp.MustCompile(`^(shardgate|proxy) \S+ commit unknown`)
	}
	for _, c := range [][]string{{"shardgate", "version"}, {"shardgate", "-version"}, {"proxy", "-version"}} {
		code, out, errOut := runBin(c[0], c[1:]...)
		m := line.FindStringSubmatch(out)
		if code != 0 || errOut != "" || m == nil || m[1] != c[0] {
			t.Errorf("%s %s: exit %d, stderr %q, stdout %q", c[0], c[1], code, errOut, out)
			continue
		}
		if len(m) > 2 && m[2] != "" {
			if err := exec.CommandContext(ctx, "git", "cat-file", "-e", m[2]+"^{commit}").Run(); err != nil {
				t.Errorf("%s %s: commit %s is not in the repository: %v", c[0], c[1], m[2], err)
			}
		}
		t.Logf("%s %s: %s", c[0], c[1], strings.TrimSpace(out))
	}
	if code, _, errOut := runBin("proxy", "-h"); code != 0 || !strings.Contains(errOut, "-version") {
		t.Errorf("proxy -h: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := runBin("shardgate", "--help"); code != 0 || errOut != "" || !strings.Contains(out, `(default "http://127.0.0.1:9797")`) {
		t.Errorf("shardgate --help: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := runBin("shardgate", "help", "status"); code != 0 || !strings.Contains(out, "-json") {
		t.Errorf("shardgate help status: exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	if code, out, errOut := runBin("shardgate", "stauts"); code != 2 || out != "" || !strings.Contains(errOut, `did you mean "status"?`) {
		t.Errorf("shardgate stauts: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runBin("shardgate", "status"); code != 1 || !strings.HasPrefix(errOut, "shardgate: ") {
		t.Errorf("shardgate status against nothing: exit %d, stderr %q", code, errOut)
	}
}
