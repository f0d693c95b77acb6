package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestProcessShutdownStreamClient: a GET /changes client is attached and
// reading (it has received a change) when the proxy gets SIGTERM. The
// stream must end promptly with a last line saying why ({"error": ...},
// then a clean end of the response), and the process must exit within
// one second of that end, not wait out shutdown_timeout (issue 33: the
// full 10 s).
func TestProcessShutdownStreamClient(t *testing.T) {
	srvs := servers(t)
	web := freeAddr(t)
	p := startProxy(t, settings{nodes: srvs[:1], extra: "web_addr: " + web + "\n"})
	db := p.openDB(t, "")
	for _, q := range []string{"DROP DATABASE IF EXISTS shut_cs", "CREATE DATABASE shut_cs",
		"CREATE TABLE shut_cs.t (id INT PRIMARY KEY)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { db.Exec("DROP DATABASE IF EXISTS shut_cs") })
	var from string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&from); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+web+"/changes?table=shut_cs.t&from=node1="+from, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /changes: %s", resp.Status)
	}
	if _, err := db.Exec("INSERT INTO shut_cs.t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	ended := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		lines <- "end: " + errString(sc.Err())
		ended <- time.Now()
	}()
	select {
	case l := <-lines:
		var ch struct{ Op, Table string }
		if err := json.Unmarshal([]byte(l), &ch); err != nil || ch.Op != "insert" || ch.Table != "shut_cs.t" {
			t.Fatalf("first line %q (%v), want the insert", l, err)
		}
	case <-ctx.Done():
		t.Fatal("no change arrived")
	}
	start := time.Now()
	p.terminate(t, "a /changes client attached", start)
	exited := time.Now()
	var end time.Time
	select {
	case end = <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end though the proxy exited")
	}
	var last []string
	for len(lines) > 0 {
		last = append(last, <-lines)
	}
	t.Logf("the stream ended %v after SIGTERM with %q; the process exited %v after the stream's end",
		end.Sub(start).Round(time.Millisecond), last, exited.Sub(end).Round(time.Millisecond))
	if d := exited.Sub(end); d > time.Second {
		t.Errorf("the process exited %v after the stream ended, want at most 1 s", d.Round(time.Millisecond))
	}
	if d := end.Sub(start); d > time.Second {
		t.Errorf("the stream ended %v after SIGTERM, want at most 1 s", d.Round(time.Millisecond))
	}
	if len(last) != 2 || last[0] != `{"error":"the proxy is shutting down: resume from the last pos received"}` || last[1] != "end: <nil>" {
		t.Errorf("the stream ended with %q, want the shutdown line, then a clean end", last)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
