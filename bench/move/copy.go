package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// copyRun is one workflow of the sweep, up to the end of its copy.
type copyRun struct {
	Round      int     `json:"round"`
	Workflow   string  `json:"workflow"`
	Workers    int     `json:"copy_workers"`
	Batch      int     `json:"batch_rows"`
	Rows       int64   `json:"rows_copied"`
	Seconds    float64 `json:"copy_seconds"` // the workflow's own copy_seconds
	RowsPerSec float64 `json:"rows_per_s"`
	MBPerSec   float64 `json:"mb_per_s"`
	// WallSeconds is POST to the first status out of "copying": it adds
	// creating the subtables, reading positions and counting rows, and up
	// to one poll (100 ms).
	WallSeconds float64 `json:"wall_seconds"`
	ProxyCPU    float64 `json:"proxy_cpu_s"`
	DBCPU       float64 `json:"db_cpu_s"`
	// The workflow is cancelled only once ready (a cancel during the
	// catch-up does not end it: see the report); on the way it catches up
	// with nothing written beside it and verifies.
	ReadySeconds  float64 `json:"ready_seconds"` // POST to the first status "ready"
	VerifyRows    int64   `json:"verify_rows"`
	VerifySeconds float64 `json:"verify_seconds"`
	CancelSeconds float64 `json:"cancel_seconds"`
}

// anchorRun is one anchor of one round: the same rows of both source
// subtables copied into a table of the same shape on the same server,
// both nodes at once.
type anchorRun struct {
	Round      int     `json:"round"`
	Kind       string  `json:"kind"` // dump or outfile
	Rows       int64   `json:"rows"`
	Seconds    float64 `json:"seconds"`
	Export     float64 `json:"export_seconds,omitempty"` // outfile: SELECT ... INTO OUTFILE
	Load       float64 `json:"load_seconds,omitempty"`   // outfile: LOAD DATA INFILE
	RowsPerSec float64 `json:"rows_per_s"`
	MBPerSec   float64 `json:"mb_per_s"`
	DBCPU      float64 `json:"db_cpu_s"`
	// ClientCPU is the dump anchor's mariadb-dump and mariadb processes
	// (user + system), the work the copy's proxy does in its place.
	ClientCPU float64 `json:"client_cpu_s,omitempty"`
}

// copySweep runs every copy setting and both anchors once per round.
func (b *bench) copySweep() error {
	for round := 1; round <= *rounds; round++ {
		for _, w := range ints(*workers) {
			for _, bt := range ints(*batches) {
				r, err := b.copyOnce(round, w, bt)
				if err != nil {
					return err
				}
				b.res.Copy = append(b.res.Copy, r)
			}
		}
		for _, kind := range []string{"dump", "outfile"} {
			a, err := b.anchor(round, kind)
			if err != nil {
				return fmt.Errorf("anchor %s: %w", kind, err)
			}
			b.res.Anchors = append(b.res.Anchors, a)
		}
	}
	return nil
}

func (b *bench) copyOnce(round, w, batch int) (copyRun, error) {
	name := b.nextName()
	r := copyRun{Round: round, Workflow: name, Workers: w, Batch: batch}
	cpu0, db0 := procCPU(*proxyPID), dbCPU()
	t0 := time.Now()
	if err := b.api.start(name, moveOptions{CopyWorkers: w, BatchRows: batch, ApplyWorkers: 4}); err != nil {
		return r, err
	}
	s, err := b.api.waitPhase(name, t0, func(s *status) bool { return s.State.Phase != "copying" }, nil, 10*time.Minute)
	if err != nil {
		return r, err
	}
	r.WallSeconds = time.Since(t0).Seconds()
	r.ProxyCPU, r.DBCPU = procCPU(*proxyPID)-cpu0, dbCPU()-db0
	r.Rows, r.Seconds = s.State.RowsCopied, s.State.CopySeconds
	if r.Seconds > 0 {
		r.RowsPerSec = float64(r.Rows) / r.Seconds
		r.MBPerSec = float64(b.res.DataBytes) * float64(r.Rows) / float64(*rows) / r.Seconds / 1e6
	}
	if r.Rows != s.State.RowsTotal {
		return r, fmt.Errorf("workflow %s copied %d rows, want %d", name, r.Rows, s.State.RowsTotal)
	}
	s, err = b.api.waitPhase(name, t0, func(s *status) bool { return s.State.Phase == "ready" }, nil, 10*time.Minute)
	if err != nil {
		return r, err
	}
	r.ReadySeconds = time.Since(t0).Seconds()
	r.VerifyRows, r.VerifySeconds = s.State.VerifyRows, s.State.VerifySeconds
	if len(s.State.Diffs) > 0 {
		return r, fmt.Errorf("workflow %s: verify found %d differing ranges", name, len(s.State.Diffs))
	}
	c0, c1, err := b.cancel(name)
	if err != nil {
		return r, err
	}
	r.CancelSeconds = c1.Sub(c0).Seconds()
	log.Printf("copy round %d workers %d batch %d: %d rows in %.2f s = %.0f rows/s, %.1f MB/s (wall %.2f s)", round, w, batch, r.Rows, r.Seconds, r.RowsPerSec, r.MBPerSec, r.WallSeconds)
	b.purgeBinlogs()
	return r, nil
}

// cancel cancels a ready workflow and checks that it has ended.
func (b *bench) cancel(name string) (time.Time, time.Time, error) {
	_, c0, c1, err := b.api.command(name, "cancel")
	if err != nil {
		return c0, c1, err
	}
	// The reply comes before the workflow's goroutine has returned: give
	// it a moment to stop running.
	for try := 0; ; try++ {
		s, err := b.api.status(name)
		if err != nil {
			return c0, c1, err
		}
		if s.State.Phase == "cancelled" && !s.Running {
			return c0, c1, nil
		}
		if s.State.Phase != "cancelled" || try == 100 {
			return c0, c1, fmt.Errorf("workflow %s after cancel: phase %s, running %v", name, s.State.Phase, s.Running)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// anchor copies both source subtables into sbanchor.<subtable> on their
// own servers, both nodes at once: with mariadb-dump --no-create-info
// piped into mariadb (kind "dump"), or SELECT * INTO OUTFILE then LOAD
// DATA INFILE (kind "outfile").
func (b *bench) anchor(round int, kind string) (anchorRun, error) {
	a := anchorRun{Round: round, Kind: kind}
	for _, nd := range b.nodes {
		for _, q := range []string{"CREATE DATABASE IF NOT EXISTS sbanchor", "DROP TABLE IF EXISTS sbanchor." + nd.Sub,
			"CREATE TABLE sbanchor." + nd.Sub + " LIKE sbtest." + nd.Sub} {
			if _, err := nd.db.Exec(q); err != nil {
				return a, err
			}
		}
	}
	db0 := dbCPU()
	var err error
	switch kind {
	case "dump":
		t0 := time.Now()
		var mu sync.Mutex
		err = b.eachNode(func(nd *node) error {
			cpu, err := dumpPipe(nd)
			mu.Lock()
			a.ClientCPU += cpu
			mu.Unlock()
			return err
		})
		a.Seconds = time.Since(t0).Seconds()
	case "outfile":
		files := map[string]string{}
		for _, nd := range b.nodes {
			var tmp string
			if err := nd.db.QueryRow("SELECT @@tmpdir").Scan(&tmp); err != nil {
				return a, err
			}
			files[nd.Name] = filepath.Join(tmp, "move-anchor-"+nd.Sub+".tsv")
			os.Remove(files[nd.Name])
		}
		t0 := time.Now()
		err = b.eachNode(func(nd *node) error {
			_, err := nd.db.Exec(fmt.Sprintf("SELECT * FROM sbtest.%s INTO OUTFILE '%s'", nd.Sub, files[nd.Name]))
			return err
		})
		t1 := time.Now()
		if err == nil {
			err = b.eachNode(func(nd *node) error {
				_, err := nd.db.Exec(fmt.Sprintf("LOAD DATA INFILE '%s' INTO TABLE sbanchor.%s", files[nd.Name], nd.Sub))
				return err
			})
		}
		t2 := time.Now()
		a.Export, a.Load, a.Seconds = t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), t2.Sub(t0).Seconds()
		for _, f := range files {
			os.Remove(f)
		}
	}
	a.DBCPU = dbCPU() - db0
	if err != nil {
		return a, err
	}
	for _, nd := range b.nodes {
		var n int64
		if err := nd.db.QueryRow("SELECT COUNT(*) FROM sbanchor." + nd.Sub).Scan(&n); err != nil {
			return a, err
		}
		a.Rows += n
	}
	if a.Rows != int64(*rows) {
		return a, fmt.Errorf("anchor %s loaded %d rows, want %d", kind, a.Rows, *rows)
	}
	a.RowsPerSec = float64(a.Rows) / a.Seconds
	a.MBPerSec = float64(b.res.DataBytes) / a.Seconds / 1e6
	log.Printf("anchor %s round %d: %d rows in %.2f s = %.0f rows/s", kind, round, a.Rows, a.Seconds, a.RowsPerSec)
	b.purgeBinlogs()
	return a, nil
}

// eachNode runs f for every node at once.
func (b *bench) eachNode(f func(*node) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(b.nodes))
	for i, nd := range b.nodes {
		wg.Go(func() { errs[i] = f(nd) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// dumpTool is mariadb-dump, or mysqldump where only that exists.
func dumpTool() string {
	for _, t := range []string{"mariadb-dump", "mysqldump"} {
		if p, err := exec.LookPath(t); err == nil {
			return p
		}
	}
	log.Fatal("neither mariadb-dump nor mysqldump is installed (apt-get install -y mariadb-client)")
	return ""
}

// dumpPipe runs mariadb-dump --no-create-info of nd's source subtable into
// mariadb, database sbanchor, on the same server, and returns the CPU
// seconds both processes used.
func dumpPipe(nd *node) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn := []string{"--no-defaults", "--protocol=tcp", "-h127.0.0.1", "-P" + nd.Port, "-u" + *user, "-p" + *password}
	dump := exec.CommandContext(ctx, dumpTool(), append(conn, "--no-create-info", "--single-transaction", "sbtest", nd.Sub)...)
	load := exec.CommandContext(ctx, "mariadb", append(conn, "sbanchor")...)
	var derr, lerr strings.Builder
	dump.Stderr, load.Stderr = &derr, &lerr
	pipe, err := dump.StdoutPipe()
	if err != nil {
		return 0, err
	}
	load.Stdin = pipe
	if err := load.Start(); err != nil {
		return 0, err
	}
	cpu := func() float64 {
		var s float64
		for _, c := range []*exec.Cmd{dump, load} {
			if c.ProcessState != nil {
				s += (c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Seconds()
			}
		}
		return s
	}
	if err := dump.Run(); err != nil {
		load.Wait()
		return cpu(), fmt.Errorf("%s: %v %s", dump.Path, err, derr.String())
	}
	if err := load.Wait(); err != nil {
		return cpu(), fmt.Errorf("mariadb: %v %s", err, lerr.String())
	}
	return cpu(), nil
}

// dbCPU is the CPU time of the MariaDB servers (-db-pids), in seconds.
func dbCPU() float64 {
	var s float64
	for _, p := range dbPIDs {
		s += procCPU(p)
	}
	return s
}
