package kafkasink

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestBrokerStopped: the broker stops for 20 s while writers run; the
// writes go on (the sink is not in their path), the sink waits or fails
// and is run again (as shardgate stream does), and once the broker is back
// the read_committed consumer rebuilds exactly the source table.
func TestBrokerStopped(t *testing.T) {
	c := newCluster(t, "bs")
	brokers := broker(t)
	cfg := streamConfig(unique("bs"), brokers)
	cfg.Tables, cfg.Snapshot = []string{"bs.t"}, config.SnapshotInitial
	const keys = 200
	writeCtx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 20))
			// About 500 transactions/s each: a workload, not a flood the
			// sink then spends minutes catching up with.
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for writeCtx.Err() == nil {
				<-tick.C
				if err := c.write(r, keys); err != nil && !strings.Contains(err.Error(), "Deadlock") {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu       sync.Mutex
		sink     *Sink
		failures []string
	)
	current := func() *Sink { mu.Lock(); defer mu.Unlock(); return sink }
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s := New(cfg, c.sources, c.names)
			mu.Lock()
			sink = s
			mu.Unlock()
			if err := s.Run(ctx); err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}
	}()
	for start := time.Now(); (current() == nil || current().Stats().Changes == 0) && time.Since(start) < 30*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	if err := shared.broker.Stop(); err != nil {
		t.Fatal(err)
	}
	before := written.Load()
	time.Sleep(20 * time.Second) // the outage
	during := written.Load() - before
	if err := shared.broker.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	time.Sleep(2 * time.Second) // writes after the broker is back
	stopWrites()
	wg.Wait()
	heads := c.heads(t)
	for start := time.Now(); !caughtUp(current().Stats(), heads) && time.Since(start) < 2*time.Minute; {
		time.Sleep(20 * time.Millisecond)
	}
	caught := caughtUp(current().Stats(), heads)
	caughtAfter := time.Since(back)
	cancel()
	<-done
	if !caught {
		t.Fatalf("the sink did not catch up within 2 minutes of the broker's return: %+v; failures %v", current().Stats(), failures)
	}
	if during == 0 {
		t.Errorf("no write committed while the broker was stopped")
	}
	got, snap, changes := rebuilt(t, consume(t, brokers, cfg.TopicOf("bs", "t")))
	if d := diff(got, c.rows(t)); d != "" {
		t.Errorf("the consumer's table differs from the source:\n%s", d)
	}
	t.Logf("%d source transactions written while the broker was stopped (20 s); caught up %v after the broker's return; %d snapshot records and %d changes read_committed; %d failed runs of the sink: %s",
		during, caughtAfter.Round(time.Millisecond), snap, changes, len(failures), strings.Join(failures, "; "))
}

// TestSchemaHistoryAndLag: an ALTER TABLE of a subtable reaches the
// schema-history topic, the rows after it carry the new column, and the
// stats say the sink caught up (no transaction behind, no lag).
func TestSchemaHistoryAndLag(t *testing.T) {
	c := newCluster(t, "sh")
	brokers := broker(t)
	cfg := streamConfig(unique("sh"), brokers)
	cfg.Tables, cfg.Snapshot, cfg.SchemaHistoryTopic = []string{"sh.t"}, config.SnapshotInitial, unique("sh-history")
	d, sub := c.node(1)
	exec(t, d, "INSERT INTO "+sub+" VALUES (1, 10, 'one')")
	s := New(cfg, c.sources, c.names)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for start := time.Now(); s.Stats().SnapshotRows == 0 && time.Since(start) < 30*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	exec(t, d, "ALTER TABLE "+sub+" ADD COLUMN note VARCHAR(10) DEFAULT 'x'", "INSERT INTO "+sub+" VALUES (5, 50, 'five', 'n')")
	heads := c.heads(t)
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(20 * time.Millisecond) {
		st := s.Stats()
		if caughtUp(st, heads) && st.Nodes[0].Behind == 0 && st.Nodes[1].Behind == 0 {
			break
		}
	}
	st := s.Stats()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Behind != 0 || n.LagSeconds != 0 {
			t.Errorf("node %s: %d transactions behind, lag %.0f s after catching up", n.Node, n.Behind, n.LagSeconds)
		}
	}
	hist := consume(t, brokers, cfg.SchemaHistoryTopic)
	if len(hist) != 1 {
		t.Fatalf("%d schema-history records, want 1", len(hist))
	}
	var h struct {
		DDL, DatabaseName, Table, Subtable string
	}
	json.Unmarshal(hist[0].Value, &h)
	if !strings.HasPrefix(h.DDL, "ALTER TABLE "+sub) || h.DatabaseName != "" && h.DatabaseName != "sh" || h.Table != "sh.t" || h.Subtable != sub {
		t.Errorf("schema history %s", hist[0].Value)
	}
	recs := consume(t, brokers, cfg.TopicOf("sh", "t"))
	var ops []string
	for _, r := range recs {
		var v struct {
			Op    string
			After map[string]any
		}
		json.Unmarshal(r.Value, &v)
		ops = append(ops, fmt.Sprintf("%s %v %v", v.Op, v.After["id"], v.After["note"]))
	}
	sort.Strings(ops) // two keys: two partitions
	if fmt.Sprint(ops) != "[c 5 n r 1 <nil>]" {
		t.Errorf("records %v, want the snapshot of id 1, then id 5 with its note", ops)
	}
}
