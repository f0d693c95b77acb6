package kafkasink

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestZombieFenced: a second sink of the stream (same transactional id)
// started while the first still runs fences it: the first one's next
// commit fails and it stops, the second resumes from the committed
// positions, and the consumer's table equals the source with no change
// twice.
func TestZombieFenced(t *testing.T) {
	c := newCluster(t, "zf")
	brokers := broker(t)
	cfg := streamConfig(unique("zf"), brokers)
	cfg.Tables, cfg.Snapshot, cfg.BatchTransactions, cfg.BatchTime = []string{"zf.t"}, config.SnapshotInitial, 10, 20*time.Millisecond
	const keys = 100
	writeCtx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 7))
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for writeCtx.Err() == nil {
			<-tick.C
			if err := c.write(r, keys); err != nil && !strings.Contains(err.Error(), "Deadlock") {
				t.Error(err)
				return
			}
		}
	}()
	zombie := New(cfg, c.sources, c.names)
	zctx, zcancel := context.WithCancel(context.Background())
	defer zcancel()
	zdone := make(chan error, 1)
	go func() { zdone <- zombie.Run(zctx) }()
	// Let it finish its snapshots and stream.
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(5 * time.Millisecond) {
		if st := zombie.Stats(); st.Changes > st.SnapshotRows {
			break
		}
	}
	successor := New(cfg, c.sources, c.names)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- successor.Run(ctx) }()
	var zerr error
	select {
	case zerr = <-zdone:
	case <-time.After(30 * time.Second):
		t.Fatal("the first sink still runs 30 s after its successor started")
	}
	// The broker tells a fenced producer in one of three ways, depending on
	// where its transaction was when the successor's InitProducerID aborted
	// it: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, or INVALID_TXN_STATE for
	// a commit of the transaction that was aborted under it.
	if zerr == nil || !strings.Contains(zerr.Error(), "FENCED") && !strings.Contains(zerr.Error(), "EPOCH") &&
		!strings.Contains(zerr.Error(), "INVALID_TXN_STATE") {
		t.Errorf("the fenced sink ended with %v, want a fencing error", zerr)
	}
	time.Sleep(500 * time.Millisecond) // more writes for the successor alone
	stopWrites()
	wg.Wait()
	heads := c.heads(t)
	for start := time.Now(); !caughtUp(successor.Stats(), heads) && time.Since(start) < time.Minute; {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, snap, changes := rebuilt(t, consume(t, brokers, cfg.TopicOf("zf", "t")))
	if d := diff(got, c.rows(t)); d != "" {
		t.Errorf("the consumer's table differs from the source:\n%s", d)
	}
	t.Logf("fenced with %v; %d snapshot records and %d changes read_committed, %d committed by the fenced sink",
		zerr, snap, changes, zombie.Stats().Changes)
}
