package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStatusPageInBrowser loads the status page in headless Chromium
// against a proxy under load and checks what it rendered: the nodes with
// their state, the charts drawn from the last seconds, and the top
// statement of the digest. STATUS_SCREENSHOT=file.png also saves a
// screenshot (docs/status.png).
func TestStatusPageInBrowser(t *testing.T) {
	p, web := metricsEnv(t, "status")
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: scripts/deps.sh chromium (or apt-get install -y chromium)")
	}
	db := openDB(t, p.dsn("status", ""))
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	for i := 0; i < 50; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", i, i))
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				var v int
				db.QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM t WHERE id = %d", i%50)).Scan(&v)
				if i%10 == 0 {
					db.ExecContext(ctx, "SELECT SUM(v) FROM t")
				}
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	time.Sleep(4 * time.Second) // a few seconds of series

	run := func(args ...string) string {
		t.Helper()
		dir := t.TempDir()
		cmd := exec.Command(browser, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir=" + dir, "--virtual-time-budget=8000", "--window-size=1280,880"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v", args, err)
		}
		return string(out)
	}
	dom := run("--dump-dom", web.URL+"/status")
	for _, want := range []string{
		`data-ready="1"`,                   // the script ran and every fetch answered
		"<td>node1</td>", "<td>node2</td>", // the nodes table
		`<span class="up">up</span>`,
		`class="line"`,               // the charts' polylines
		"select v from t where id=?", // the digest's shapes
		"select sum(v)from t",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	if strings.Contains(dom, `id="updated">error:`) {
		t.Errorf("the page reports an error")
	}
	if t.Failed() {
		t.Logf("rendered DOM:\n%s", dom)
	}
	if path := os.Getenv("STATUS_SCREENSHOT"); path != "" {
		run("--screenshot="+path, web.URL+"/status")
		t.Logf("screenshot: %s", path)
	}
}
