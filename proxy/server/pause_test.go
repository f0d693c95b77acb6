package server_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/proxy/server"
)

// TestPauseOneSource (issue 37: numbers printed by tools equal the numbers
// in logs and metrics): after a cutover and after a rollback, the pause the
// workflow's status gives (pause_ms, which shardgate status prints), the
// one its log line gives and the proxy's last-pause metric are the same
// measure: how long the table's gate was shut. The tool printed 49.1 ms
// where the log said 72.3 ms: each was timed over a different stretch.
func TestPauseOneSource(t *testing.T) {
	servers := backends(t)
	cfg := newConfig(t, servers...)
	for _, s := range servers {
		mustExec(t, openDB(t, directDSN(s, "", "")), "DROP DATABASE IF EXISTS mvpause", "CREATE DATABASE mvpause")
	}
	cfg.Schemas[0].Shard = []config.ShardRule{{DB: "mvpause", Table: "t", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}}}
	cfg.Sidecar = config.Sidecar{Node: "node1", DB: "mvpause_sidecar"}
	t.Cleanup(func() {
		mustExec(t, openDB(t, directDSN(servers[0], "", "")), "DROP DATABASE IF EXISTS mvpause_sidecar")
	})
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel)).Core(), core))
	addr, handler := startLogged(t, cfg, log)
	app := openDB(t, userDSN(appUser, appPassword, addr, "mvpause", ""))
	mustExec(t, app, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	var vals []string
	for i := range 500 {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
	}
	mustExec(t, app, "INSERT INTO t VALUES "+strings.Join(vals, ","))

	web := httptest.NewServer(handler)
	defer web.Close()
	req := map[string]any{"table": "mvpause.t", "name": "p", "nodes": []string{"node1", "node2"}, "locations": []int{2, 2}}
	if code, body := admin(t, web.URL, "POST", "/admin/workflows", req, nil); code != 200 {
		t.Fatalf("start: %d %s", code, body)
	}
	waitPhase(t, web.URL, "p", move.PhaseReady, 2*time.Minute)
	for _, step := range []struct{ cmd, logMsg string }{{"cutover", "cutover done"}, {"rollback", "rollback done"}} {
		var st move.Status
		if code, body := admin(t, web.URL, "POST", "/admin/workflows/p/"+step.cmd, nil, &st); code != 200 {
			t.Fatalf("%s: %d %s", step.cmd, code, body)
		}
		if again := workflow(t, web.URL, "p"); again.State.PauseMillis != st.State.PauseMillis { // what shardgate status reads
			t.Errorf("%s: the command answered pause %.3f ms, the status %.3f ms", step.cmd, st.State.PauseMillis, again.State.PauseMillis)
		}
		entries := logs.FilterMessage(step.logMsg).All()
		if len(entries) != 1 {
			t.Fatalf("%s: %d %q log lines", step.cmd, len(entries), step.logMsg)
		}
		fields := entries[0].ContextMap()
		logged, _ := fields["pause_ms"].(float64)
		loggedDur, _ := fields["pause"].(time.Duration)
		metric := lastPauseMetric(t, web.URL)
		t.Logf("%s: status %.3f ms, log %.3f ms (%v), metric %.6f s", step.cmd, st.State.PauseMillis, logged, loggedDur, metric)
		if st.State.PauseMillis <= 0 || logged != st.State.PauseMillis || float64(loggedDur.Microseconds())/1000 != logged {
			t.Errorf("%s: status says %.3f ms, the log %.3f ms (%v)", step.cmd, st.State.PauseMillis, logged, loggedDur)
		}
		if math.Abs(metric*1000-st.State.PauseMillis) > 0.001 {
			t.Errorf("%s: status says %.3f ms, the metric %.6f s", step.cmd, st.State.PauseMillis, metric)
		}
		if a, b := fmt.Sprintf("%.1f", st.State.PauseMillis), fmt.Sprintf("%.1f", float64(loggedDur.Microseconds())/1000); a != b {
			t.Errorf("%s: printed %s ms, logged %s ms", step.cmd, a, b)
		}
	}
}

// startLogged is startProxyWith for a test that reads the proxy's log: it
// serves cfg with log on 127.0.0.1:0 until the test ends and returns the
// address and the admin handler.
func startLogged(t *testing.T, cfg *config.Config, log *zap.Logger) (string, http.Handler) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, server.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(l)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-done
	})
	return l.Addr().String(), srv.AdminHandler()
}

// lastPauseMetric reads shardgate_buffer_last_pause_seconds from /metrics.
func lastPauseMetric(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "shardgate_buffer_last_pause_seconds "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("no shardgate_buffer_last_pause_seconds in /metrics")
	return 0
}
