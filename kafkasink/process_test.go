package kafkasink

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestProcessKill9: `shardgate stream` killed with SIGKILL at random
// points during a write workload and started again five times; then a
// sink of the same stream (same transactional id) catches up, and the
// read_committed consumer rebuilds exactly the source table, no change
// twice, each row's changes in commit order.
func TestProcessKill9(t *testing.T) {
	c := newCluster(t, "ko")
	brokers := broker(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "shardgate")
	if out, err := osexec.Command("go", "build", "-o", bin, "../cmd/shardgate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var nodes strings.Builder
	for i, s := range servers {
		fmt.Fprintf(&nodes, "- name: n%d\n  master: %s\n  user: %s\n  password: %s\n", i+1, s.Addr, s.User, s.Password)
	}
	yaml := "addr: 127.0.0.1:9696\nuser_list:\n- user: u\n  password: p\nnodes:\n" + nodes.String() +
		"schema_list:\n- user: u\n  nodes: [n1, n2]\n  default: n1\n  shard:\n" +
		"  - {db: ko, table: t, key: id, type: hash, nodes: [n1, n2], locations: [2, 2]}\n" +
		"streams:\n- name: ko\n  tables: [ko.t]\n  brokers: [" + strings.Join(brokers, ", ") + "]\n  partitions: 3\n" +
		"  batch_transactions: 20\n  batch_time: 20ms\n"
	name := unique("ko")
	yaml = strings.Replace(yaml, "- name: ko\n", "- name: "+name+"\n", 1)
	ks := filepath.Join(dir, "ks.yaml")
	if err := os.WriteFile(ks, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ks)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 400
	for id := 0; id < keys; id += 2 {
		d, sub := c.node(id)
		exec(t, d, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d, 'before')", sub, id, id))
	}
	writeCtx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for writeCtx.Err() == nil {
				if err := c.write(r, keys); err != nil && !strings.Contains(err.Error(), "Deadlock") {
					t.Error(err)
					return
				}
			}
		}()
	}
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 5; i++ {
		var out bytes.Buffer
		cmd := osexec.Command(bin, "stream", "-config", ks)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(1000+r.IntN(3000)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if strings.Contains(out.String(), "again in") {
			t.Errorf("run %d failed:\n%s", i, out.String())
		}
	}
	stopWrites()
	wg.Wait()
	sc := cfg.Stream(name)
	byKilled := len(consume(t, brokers, sc.TopicOf("ko", "t")))
	heads := c.heads(t)
	s := New(*sc, c.sources, c.names)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	start := time.Now()
	for !caughtUp(s.Stats(), heads) && time.Since(start) < time.Minute {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, snap, changes := rebuilt(t, consume(t, brokers, sc.TopicOf("ko", "t")))
	if d := diff(got, c.rows(t)); d != "" {
		t.Errorf("the consumer's table differs from the source:\n%s", d)
	}
	if snap < keys/2 {
		t.Errorf("%d snapshot records, want at least %d", snap, keys/2)
	}
	if byKilled <= snap {
		t.Errorf("the killed processes committed %d records, the snapshot's %d only: kill them later", byKilled, snap)
	}
	t.Logf("%d snapshot records and %d changes read_committed, %d records committed by the killed processes; the last sink committed %d source transactions",
		snap, changes, byKilled, s.Stats().Transactions)
}
