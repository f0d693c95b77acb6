package fakebackend_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
)

// TestScriptedAnswers: the client side of the proxy reads what the fake
// sends as it reads a server: OK with status flags and session state,
// ERR, rows, a lost answer; the fake records what it received.
func TestScriptedAnswers(t *testing.T) {
	f := fakebackend.Start(t, 11)
	f.On("SELECT", fakebackend.Reply{Rows: [][]any{{"a", nil, 7}}})
	f.On("SET @x", fakebackend.Reply{State: fakebackend.StateChange(), Warnings: 2})
	f.OnN("DELETE", 1, fakebackend.Err(mysql.ErLockDeadlock, "deadlock"))
	f.On("KILL", fakebackend.Reply{Drop: true})
	c, err := backend.Dial(context.Background(), f.Addr(), backend.DialOptions{User: "u", Password: "p", DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ThreadID != 11 || !c.Tracking() {
		t.Errorf("thread id %d, tracking %v; want 11, true", c.ThreadID, c.Tracking())
	}
	res, err := c.Exec("SELECT a, b, c FROM t")
	if err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != "a" || res.Rows[0][1] != nil || string(res.Rows[0][2]) != "7" {
		t.Fatalf("rows: %v %v", res, err)
	}
	if res, err = c.Exec("START TRANSACTION"); err != nil || res.OK.Status&mysql.StatusInTrans == 0 {
		t.Fatalf("START TRANSACTION: %v, status %#x", err, res.OK.Status)
	}
	res, err = c.Exec("SET @x = 1")
	if err != nil || res.OK.Warnings != 2 || res.OK.Status&mysql.StatusSessionStateChange == 0 || len(res.State) == 0 {
		t.Fatalf("session state: %+v %v", res, err)
	}
	var se *mysql.SQLError
	if _, err = c.Exec("DELETE FROM t"); !errors.As(err, &se) || se.Code != mysql.ErLockDeadlock {
		t.Fatalf("scripted error: %v", err)
	}
	if res, err = c.Exec("DELETE FROM t"); err != nil || res.OK.Status&mysql.StatusInTrans != 0 {
		t.Fatalf("after the deadlock: %v, status %#x (the transaction must be over)", err, res.OK.Status)
	}
	if err := c.UseDB("other"); err != nil {
		t.Fatal(err)
	}
	if _, err = c.Exec("KILL 1"); err == nil || !c.Broken() {
		t.Fatalf("a dropped answer: %v, broken %v", err, c.Broken())
	}
	<-f.Conn(11).Done()
	want := []string{"SELECT a, b, c FROM t", "START TRANSACTION", "SET @x = 1", "DELETE FROM t", "DELETE FROM t", "INIT_DB other", "KILL 1"}
	if got := f.Conn(11).Log()[1:]; !slices.Equal(got, want) { // [0] turns tracking on
		t.Errorf("log %q, want %q", got, want)
	}
}
