package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
)

// TestPublisherRetries: a rule etcd does not take is tried again in the
// background until it is stored, each failure counted; the caller never
// waits; a later rule of the same table replaces one not stored yet.
func TestPublisherRetries(t *testing.T) {
	var mu sync.Mutex
	var stored []config.ShardRule
	fails := 2
	p := newPublisher(func(ctx context.Context, db, table string, r config.ShardRule) error {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return errors.New("etcd unreachable")
		}
		stored = append(stored, r)
		return nil
	}, zap.NewNop())
	defer p.close()
	t0 := time.Now()
	p.publish("db", "t", config.ShardRule{DB: "db", Table: "t", Generation: 1})
	if d := time.Since(t0); d > 50*time.Millisecond {
		t.Fatalf("publish took %v", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		failures, pending := p.stats()
		if pending == 0 {
			if failures != 2 {
				t.Fatalf("%d failures counted, want 2", failures)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d pending after 5 s", pending)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if len(stored) != 1 || stored[0].Generation != 1 {
		t.Fatalf("stored %+v", stored)
	}
	mu.Unlock()
	var none *publisher
	none.publish("db", "t", config.ShardRule{}) // one proxy with a file: nothing
	none.close()
}
