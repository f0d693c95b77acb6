package main_test

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessSIGHUP: SIGHUP reloads ks.yaml in place. A client connected
// before goes on; a user the new file adds can log in; a file that does not
// parse is refused (logged), and the proxy keeps serving with what it had.
func TestProcessSIGHUP(t *testing.T) {
	p := startProxy(t, settings{nodes: servers(t)[:1]})
	before := p.openDB(t, "")
	before.SetMaxOpenConns(1)
	if _, err := before.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(p.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	added := strings.Replace(string(orig), "nodes:\n", fmt.Sprintf("  - user: second\n    password: %q\nnodes:\n", appPassword), 1) +
		"  - user: second\n    nodes: [node1]\n    default: node1\n"
	secondDSN := strings.Replace(p.dsn(""), appUser+":", "second:", 1)
	if db, _ := sql.Open("mysql", secondDSN); db.Ping() == nil {
		t.Fatal("user second could log in before the reload")
	}
	reload := func(text string) {
		if err := os.WriteFile(p.cfgPath, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	reload(added)
	second, _ := sql.Open("mysql", secondDSN)
	defer second.Close()
	deadline := time.Now().Add(5 * time.Second)
	for second.Ping() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("user second cannot log in 5 s after SIGHUP\n%s", tail(p.logPath, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	reload(added + "nodes: [\n")
	deadline = time.Now().Add(5 * time.Second)
	for !strings.Contains(tail(p.logPath, 4000), "reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged for a file that does not parse\n%s", tail(p.logPath, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p.exited() {
		t.Fatal("the proxy exited on a bad file")
	}
	for _, db := range []*sql.DB{before, second} {
		if _, err := db.Exec("SELECT 1"); err != nil {
			t.Errorf("after the refused reload: %v", err)
		}
	}
}
