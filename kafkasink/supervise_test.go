package kafkasink

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/changestream"
)

// TestSupervisorRestarts: a sink whose node refuses connections fails
// each run; the supervisor runs it again after pauses that double up to
// MaxPause, reports waiting/running with the failures and the last error,
// and stops when its context ends.
func TestSupervisorRestarts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	cfg := streamConfig(unique("sup"), fake(t))
	var mu sync.Mutex
	var pauses []time.Duration
	starts := 0
	v := &Supervisor{Stream: cfg, MinPause: 10 * time.Millisecond, MaxPause: 40 * time.Millisecond,
		Sources: func() []changestream.Source {
			return []changestream.Source{{Node: "n1", Addr: addr, User: "u", Password: "p"}}
		},
		Names: func(db, table string) string { return db + "." + table },
		Event: func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Started {
				starts++
			} else if e.Err != nil {
				pauses = append(pauses, e.Pause)
			}
		}}
	if st := v.Status(); st.State != StateStopped {
		t.Fatalf("before Run: %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.Run(ctx)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for v.Status().Failures < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("5 failures not within 30 s: %+v", v.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := v.Status()
	if st.LastErr == "" || st.LastErrAt.IsZero() || st.Runs < 5 || (st.State != StateWaiting && st.State != StateRunning) {
		t.Errorf("status after failures: %+v", st)
	}
	cancel()
	<-done
	if st := v.Status(); st.State != StateStopped {
		t.Errorf("after ctx ended: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}
	if len(pauses) < 4 || !slices.Equal(pauses[:4], want) {
		t.Errorf("pauses %v, want %v then 40ms", pauses, want)
	}
	if starts < 5 {
		t.Errorf("%d starts", starts)
	}
}
