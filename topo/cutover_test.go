package topo

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardgate/shardgate/internal/etcdtest"
)

// TestCutoverProtocol: a member announces a cutover; another sees it, acknowledges it, and sees it done (with
// the rule) before it is gone; WaitAcks reports a member that did not acknowledge once its context ends; an
// announcement goes with its member's lease.
func TestCutoverProtocol(t *testing.T) {
	srv := etcdtest.Start(t)
	sa, sb := open(t, srv), open(t, srv)
	a, err := sa.Join(ctxFor(t, 5*time.Second), Member{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sb.Join(ctxFor(t, 5*time.Second), Member{ID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	seen := sb.WatchCutovers(wctx)
	if got := recv(t, seen, 5*time.Second); len(got) != 0 {
		t.Fatalf("first set %v, want none", got)
	}

	c, err := a.AnnounceCutover(ctxFor(t, 5*time.Second), Cutover{Table: "db.t", ID: "1", Hold: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, seen, 5*time.Second)["db.t"]
	if got.ID != "1" || got.Member != "a" || got.Hold != time.Second || got.Done {
		t.Fatalf("announcement read %+v", got)
	}
	// b acknowledges; c (a member that never answers) does not.
	if err := b.AckCutover(ctxFor(t, 5*time.Second), got); err != nil {
		t.Fatal(err)
	}
	if missing, err := sa.WaitAcks(ctxFor(t, 5*time.Second), c, []string{"b"}); err != nil || missing != nil {
		t.Fatalf("WaitAcks(b): missing %v, %v", missing, err)
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	missing, err := sa.WaitAcks(ctx, c, []string{"b", "c"})
	cancel()
	if err != nil || !slices.Equal(missing, []string{"c"}) || time.Since(t0) > 2*time.Second {
		t.Fatalf("WaitAcks(b, c): missing %v, %v after %v", missing, err, time.Since(t0))
	}

	rule := json.RawMessage(`{"generation":1}`)
	if err := a.EndCutover(ctxFor(t, 5*time.Second), c, rule); err != nil {
		t.Fatal(err)
	}
	done := recv(t, seen, 5*time.Second)["db.t"]
	if !done.Done || string(done.Rule) != string(rule) {
		t.Fatalf("end read %+v", done)
	}
	if gone := recv(t, seen, 5*time.Second); len(gone) != 0 {
		t.Fatalf("after the end: %v", gone)
	}
	resp, err := sa.Client().Get(ctxFor(t, 5*time.Second), sa.acksPrefix("db.t", "1"), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("acknowledgements left: %v %v", resp, err)
	}

	// An announcement goes with its member.
	if _, err := a.AnnounceCutover(ctxFor(t, 5*time.Second), Cutover{Table: "db.t", ID: "2"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, seen, 5*time.Second); got["db.t"].ID != "2" {
		t.Fatalf("second announcement read %v", got)
	}
	a.Close()
	if gone := recv(t, seen, 5*time.Second); len(gone) != 0 {
		t.Fatalf("after the member left: %v", gone)
	}
	stop()
	for range seen {
	}
}
