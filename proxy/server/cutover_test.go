package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// TestBufferBounds: while a cutover holds a table, at most buffer_size
// statements wait at its gate (one more fails at once with 1205), each at
// most buffer_window (then 1205); the ones still waiting when the gate
// opens run (drained). The counts and the pauses are what /metrics shows.
func TestBufferBounds(t *testing.T) {
	cfg := config.Default()
	cfg.Move.BufferSize, cfg.Move.BufferWindow = 2, 200*time.Millisecond
	lc := &liveConfig{}
	lc.current.Store(&live{cfg: cfg})
	gs := &gates{conf: lc}
	enter := func() error {
		m := *gs.moving.Load()
		inside, _, err := gs.enter(nil, m, []string{"t"})
		gs.leave(inside)
		return err
	}
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); gs.bufferStats().Held != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d statements wait, want %d", gs.bufferStats().Held, n)
			}
		}
	}
	want1205 := func(err error, what string) {
		t.Helper()
		var se *mysql.SQLError
		if !errors.As(err, &se) || se.Code != mysql.ErLockWaitTimeout || !strings.Contains(se.Message, what) {
			t.Fatalf("got %v, want 1205 naming %s", err, what)
		}
	}

	release, err := gs.hold(context.Background(), "db", "t")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- enter() }()
	}
	waiting(2)
	t0 := time.Now()
	want1205(enter(), "move.buffer_size")
	if d := time.Since(t0); d > 100*time.Millisecond {
		t.Fatalf("the statement over buffer_size waited %v", d)
	}
	for range 2 {
		want1205(<-errs, "move.buffer_window")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("the window of 200ms evicted after %v", d)
	}
	release()

	// Held, then let go: drained.
	release, err = gs.hold(context.Background(), "db", "t")
	if err != nil {
		t.Fatal(err)
	}
	go func() { errs <- enter() }()
	waiting(1)
	release()
	if err := <-errs; err != nil {
		t.Fatalf("a statement let go: %v", err)
	}
	st := gs.bufferStats()
	if st.Buffered != 3 || st.Drained != 1 || st.Evicted["buffer_full"] != 1 || st.Evicted["window_exceeded"] != 2 || st.Held != 0 ||
		st.Pauses != 2 || st.LastPauseSeconds <= 0 || st.PauseSecondsSum < 0.2 {
		t.Fatalf("buffer stats %+v", st)
	}
}
