package topo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// testTTL is the lease of the tests' members, in seconds: short, so that expiry tests stay quick.
const testTTL = 2

// testPrefix is the cluster prefix of the tests.
const testPrefix = "/shardgate/test"

// open returns a Store on srv, closed when the test ends. Each Store has its own client, as each proxy of a
// fleet has.
func open(t *testing.T, srv *etcdtest.Server) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, Options{Endpoints: srv.Endpoints(), Prefix: testPrefix + "/", DialTimeout: time.Second, LeaseTTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// recv reads one value from ch within d.
func recv[T any](t *testing.T, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return v
	case <-time.After(d):
		t.Fatalf("nothing received within %v", d)
	}
	panic("unreachable")
}

// none checks that nothing arrives on ch for d.
func none[T any](t *testing.T, ch <-chan T, d time.Duration) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %v", v)
	case <-time.After(d):
	}
}

func TestOpenUnreachable(t *testing.T) {
	srv := etcdtest.Start(t)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := Open(context.Background(), Options{Endpoints: srv.Endpoints(), Prefix: testPrefix, DialTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("Open succeeded with etcd stopped")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open took %v to fail with a 500ms DialTimeout", d)
	}
	t.Logf("Open with etcd down: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if _, err := Open(context.Background(), Options{Endpoints: srv.Endpoints()}); err == nil {
		t.Error("Open without a prefix succeeded")
	}
}

func TestPutCompareAndSwap(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, srv)
	ctx := ctxFor(t, 10*time.Second)

	if _, err := s.Get(ctx); !errors.Is(err, ErrNoTopology) {
		t.Fatalf("Get on an empty store: %v, want ErrNoTopology", err)
	}
	if _, err := s.Put(ctx, []byte("v1"), 7); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put with prevRev 7 on an empty store: %v, want ErrConflict", err)
	}
	r1, err := s.Put(ctx, []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, []byte("v1 again"), 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("second first-load: %v, want ErrConflict", err)
	}
	r2, err := s.Put(ctx, []byte("v2"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("Put on r1: rev %d, %v", r2, err)
	}
	_, err = s.Put(ctx, []byte("stale"), r1)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Put on a stale revision: %v, want ErrConflict", err)
	}
	t.Logf("stale Put: %v", err)
	if v, err := s.Get(ctx); err != nil || v.Rev != r2 || string(v.YAML) != "v2" {
		t.Fatalf("Get = %d %q %v, want %d v2", v.Rev, v.YAML, err, r2)
	}
	if _, err := s.Put(ctx, nil, -2); err == nil {
		t.Fatal("Put with prevRev -2 succeeded")
	}
	r3, err := s.Put(ctx, []byte("v3"), -1)
	if err != nil || r3 <= r2 {
		t.Fatalf("unconditional Put: %d %v", r3, err)
	}

	// Several proxies change the same version at once: exactly one wins.
	others := []*Store{open(t, srv), open(t, srv), open(t, srv), open(t, srv)}
	var wg sync.WaitGroup
	errs := make([]error, len(others))
	for i, o := range others {
		wg.Go(func() { _, errs[i] = o.Put(ctx, fmt.Appendf(nil, "from %d", i), r3) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrConflict):
			t.Errorf("concurrent Put: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent Puts on revision %d succeeded, want 1", won, len(others), r3)
	}
}

// TestWatchAcrossRestarts writes versions before, between and after an etcd Stop/Restart and a Kill/Restart,
// and checks that a Watch started at the beginning delivers every one of them, once, in order.
func TestWatchAcrossRestarts(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, srv)
	writer := open(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	w := s.Watch(ctx)
	none(t, w, 200*time.Millisecond) // no topology yet: nothing to send
	var want []int64
	prev := int64(0)
	put := func(text string) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		rev, err := writer.Put(pctx, []byte(text), prev)
		if err != nil {
			t.Fatalf("Put %s: %v", text, err)
		}
		prev = rev
		want = append(want, rev)
	}
	var got []Version
	take := func(n int) {
		t.Helper()
		for range n {
			got = append(got, recv(t, w, 15*time.Second))
		}
	}
	for i := range 5 {
		put(fmt.Sprintf("version %d", i))
	}
	take(5)

	for round, down := range []func() error{srv.Stop, srv.Kill} {
		if err := down(); err != nil {
			t.Fatal(err)
		}
		// While etcd is down: changes are refused with an error (bounded by the caller), nothing arrives.
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := writer.Put(pctx, []byte("refused"), prev)
		pcancel()
		if err == nil {
			t.Fatal("Put succeeded while etcd was down")
		}
		if round == 0 {
			t.Logf("Put while etcd is down: %v", err)
		}
		if err := writer.Healthy(ctx); err == nil {
			t.Fatal("Healthy while etcd was down")
		}
		none(t, w, 300*time.Millisecond)
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		put(fmt.Sprintf("after restart %d", round))
		take(1)
		t.Logf("restart %d: first version after restart delivered %v after its Put began", round, time.Since(start).Round(time.Millisecond))
		for i := range 5 {
			put(fmt.Sprintf("round %d version %d", round, i))
		}
		take(5)
	}
	none(t, w, 300*time.Millisecond)
	for i, v := range got {
		if v.Rev != want[i] {
			t.Fatalf("version %d: rev %d, want %d (got %v)", i, v.Rev, want[i], got)
		}
	}

	// A second watcher starts with the current version only.
	w2 := s.Watch(ctx)
	if v := recv(t, w2, 5*time.Second); v.Rev != prev {
		t.Fatalf("new watcher's first version: %d, want the current %d", v.Rev, prev)
	}
	none(t, w2, 200*time.Millisecond)
	cancel()
	for range w { // closed when ctx ends
	}
}

// TestEtcdHangs: an etcd that hangs with its sockets open (SIGSTOP) is reported unhealthy within DialTimeout,
// refuses changes, and the watch goes on after it continues.
func TestEtcdHangs(t *testing.T) {
	srv := etcdtest.Start(t)
	s, writer := open(t, srv), open(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r1, err := writer.Put(ctx, []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	w := s.Watch(ctx)
	if v := recv(t, w, 5*time.Second); v.Rev != r1 {
		t.Fatalf("first version %d, want %d", v.Rev, r1)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Healthy(ctx); err == nil {
		t.Fatal("Healthy while etcd hangs")
	}
	t.Logf("Healthy failed %v after etcd hung (DialTimeout 1s)", time.Since(start).Round(time.Millisecond))
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = writer.Put(pctx, []byte("refused"), r1)
	pcancel()
	if err == nil {
		t.Fatal("Put succeeded while etcd hung")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// The refused Put timed out on the client, but etcd may still apply
	// it once it runs again (a request it had read): like any client,
	// read what is there before the compare-and-swap, and again on a
	// conflict.
	var r2 int64
	for try := 0; ; try++ {
		pctx, pcancel = context.WithTimeout(ctx, 5*time.Second)
		cur, err := writer.Get(pctx)
		if err == nil {
			r2, err = writer.Put(pctx, []byte("v2"), cur.Rev)
		}
		pcancel()
		if err == nil {
			break
		}
		if !errors.Is(err, ErrConflict) || try == 5 {
			t.Fatal(err)
		}
	}
	v := recv(t, w, 5*time.Second)
	if string(v.YAML) == "refused" {
		v = recv(t, w, 5*time.Second) // the late write first, in order
	}
	if v.Rev != r2 || string(v.YAML) != "v2" {
		t.Fatalf("after the hang: %d %q, want %d v2", v.Rev, v.YAML, r2)
	}
	none(t, w, 200*time.Millisecond)
}

// TestWatchAfterCompaction: when the history after a watch's read is compacted before its etcd watch starts,
// the watch reads again and delivers the newest version, skipping the overwritten ones and repeating none.
func TestWatchAfterCompaction(t *testing.T) {
	srv := etcdtest.Start(t)
	writer, s := open(t, srv), open(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r1, err := writer.Put(ctx, []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	compacted := false
	s.afterRead = func(what string) {
		if compacted {
			return
		}
		compacted = true
		prev := r1
		for _, v := range []string{"v2", "v3", "v4"} {
			if prev, err = writer.Put(ctx, []byte(v), prev); err != nil {
				t.Errorf("Put %s: %v", v, err)
				return
			}
		}
		latest = prev
		if _, err := writer.Client().Compact(ctx, latest); err != nil {
			t.Errorf("Compact: %v", err)
		}
	}
	w := s.Watch(ctx)
	if v := recv(t, w, 5*time.Second); v.Rev != r1 || string(v.YAML) != "v1" {
		t.Fatalf("first version %d %q, want %d v1", v.Rev, v.YAML, r1)
	}
	if v := recv(t, w, 5*time.Second); v.Rev != latest || string(v.YAML) != "v4" {
		t.Fatalf("after compaction: %d %q, want %d v4", v.Rev, v.YAML, latest)
	}
	r5, err := writer.Put(ctx, []byte("v5"), latest)
	if err != nil {
		t.Fatal(err)
	}
	if v := recv(t, w, 5*time.Second); v.Rev != r5 {
		t.Fatalf("next version %d, want %d", v.Rev, r5)
	}
	none(t, w, 200*time.Millisecond)
}

func TestMasters(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, srv)
	ctx := ctxFor(t, 20*time.Second)
	ms, err := s.Join(ctx, Member{Addr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w := s.WatchMasters(wctx)
	if m := recv(t, w, 5*time.Second); len(m) != 0 {
		t.Fatalf("first map %v, want empty", m)
	}
	l, err := ms.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetMaster(ctx, "node1", "10.0.0.1:3306"); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, w, 5*time.Second); !maps.Equal(m, map[string]string{"node1": "10.0.0.1:3306"}) {
		t.Fatalf("map %v", m)
	}
	if err := l.SetMaster(ctx, "node1", "10.0.0.1:3306"); err != nil { // same value: no new map
		t.Fatal(err)
	}
	if err := l.SetMaster(ctx, "node2", "10.0.0.2:3306"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"node1": "10.0.0.1:3306", "node2": "10.0.0.2:3306"}
	if m := recv(t, w, 5*time.Second); !maps.Equal(m, want) {
		t.Fatalf("map %v, want %v", m, want)
	}
	if m, rev, err := s.MastersRev(ctx); err != nil || !maps.Equal(m, want) || rev == 0 {
		t.Fatalf("MastersRev = %v %d %v", m, rev, err)
	}
	// Through a restart: the watcher keeps its map and delivers the next change.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Delete(ctx, s.masterKey("node2")); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, w, 10*time.Second); !maps.Equal(m, map[string]string{"node1": "10.0.0.1:3306"}) {
		t.Fatalf("after restart and delete: %v", m)
	}
	none(t, w, 200*time.Millisecond)
}

func TestMemberNamesReused(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, srv)
	ctx := ctxFor(t, 20*time.Second)
	var ms []*Membership
	for i := range 3 {
		m, err := s.Join(ctx, Member{Addr: fmt.Sprintf("127.0.0.1:%d", 4000+i)})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if want := fmt.Sprintf("proxy-%d", i+1); m.ID() != want {
			t.Fatalf("member %d: ID %s, want %s", i, m.ID(), want)
		}
		ms = append(ms, m)
	}
	if err := ms[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := ms[1].Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	list, err := s.Members(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "proxy-1" || list[1].ID != "proxy-3" {
		t.Fatalf("members after Close of proxy-2: %v %v", list, err)
	}
	m, err := s.Join(ctx, Member{Addr: "127.0.0.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.ID() != "proxy-2" {
		t.Fatalf("joined as %s, want the freed proxy-2", m.ID())
	}
	if _, err := s.Join(ctx, Member{ID: "proxy-3"}); !errors.Is(err, ErrIDTaken) {
		t.Fatalf("Join as a live member's ID: %v, want ErrIDTaken", err)
	}
	named, err := s.Join(ctx, Member{ID: "blue"})
	if err != nil {
		t.Fatal(err)
	}
	defer named.Close()

	started := m.Member().Started
	if err := m.Update(ctx, func(mm *Member) {
		mm.Applied = 42
		mm.ID = "ignored"
		mm.Health = map[string]NodeHealth{"node1": {Master: "127.0.0.1:3306", Up: true, Promoted: []string{"127.0.0.1:3307"}}}
	}); err != nil {
		t.Fatal(err)
	}
	list, err = s.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, mm := range list {
		ids = append(ids, mm.ID)
	}
	if fmt.Sprint(ids) != "[blue proxy-1 proxy-2 proxy-3]" {
		t.Fatalf("members %v", ids)
	}
	got := list[2]
	if got.Applied != 42 || got.Addr != "127.0.0.1:5000" || !got.Started.Equal(started) || got.Health["node1"].Promoted[0] != "127.0.0.1:3307" {
		t.Fatalf("proxy-2 after Update: %+v", got)
	}
	// A member whose lease was revoked behind its back (as when it expired) cannot write.
	if _, err := s.Client().Revoke(ctx, ms[2].Lease()); err != nil {
		t.Fatal(err)
	}
	if err := ms[2].Update(ctx, func(mm *Member) { mm.Applied = 1 }); !errors.Is(err, ErrMemberGone) {
		t.Fatalf("Update after the lease was revoked: %v, want ErrMemberGone", err)
	}
	select {
	case <-ms[2].Done():
	case <-time.After(time.Duration(testTTL+2) * time.Second):
		t.Fatal("Done not closed after the lease was revoked")
	}
	// Its name is free: Rejoin claims it again.
	back, err := ms[2].Rejoin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if back.ID() != "proxy-3" {
		t.Fatalf("rejoined as %s, want proxy-3", back.ID())
	}
}

// TestMemberExpires: a proxy that stops renewing (its client closed without revoking, as a killed process)
// disappears from Members after the lease TTL, and its name is free again.
func TestMemberExpires(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, srv)
	dying := open(t, srv)
	ctx := ctxFor(t, 20*time.Second)
	m, err := dying.Join(ctx, Member{})
	if err != nil {
		t.Fatal(err)
	}
	dying.Close() // no revoke
	start := time.Now()
	for {
		list, err := s.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		if time.Since(start) > time.Duration(testTTL+3)*time.Second {
			t.Fatalf("member %s still listed %v after its client closed (TTL %ds)", m.ID(), time.Since(start), testTTL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone := time.Since(start)
	t.Logf("member gone %v after its client stopped renewing (TTL %ds)", gone.Round(time.Millisecond), testTTL)
	if gone < time.Duration(testTTL)*time.Second/2 {
		t.Errorf("member gone after %v, before its lease could have expired", gone)
	}
	again, err := s.Join(ctx, Member{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.ID() != m.ID() {
		t.Fatalf("joined as %s, want the expired %s", again.ID(), m.ID())
	}
}

// TestRejoin: after an etcd outage longer than the TTL a member's session ends; Rejoin brings it back under the
// same ID.
func TestRejoin(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, srv)
	ctx := ctxFor(t, 30*time.Second)
	m, err := s.Join(ctx, Member{Addr: "a"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Join(ctx, Member{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-m.Done():
		t.Logf("session ended %v after etcd stopped (TTL %ds)", time.Since(start).Round(time.Millisecond), testTTL)
	case <-time.After(time.Duration(testTTL+5) * time.Second):
		t.Fatal("session still alive long after etcd stopped")
	}
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := m.Rejoin(rctx); err == nil {
		t.Fatal("Rejoin succeeded with etcd down")
	}
	rcancel()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// etcd renews every lease when it restarts, so the old key is normally still there, held by the old lease.
	m2, err := m.Rejoin(ctx)
	if err != nil {
		t.Fatalf("Rejoin (old lease %x): %v", m.Lease(), err)
	}
	defer m2.Close()
	if m2.ID() != m.ID() || m2.Member().Addr != "a" {
		t.Fatalf("rejoined as %s %+v", m2.ID(), m2.Member())
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close after Rejoin: %v", err)
	}
	// The key lives on under the new lease; the old one is revoked.
	resp, err := s.Client().Get(ctx, s.memberKey(m.ID()))
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != m2.Lease() {
		t.Fatalf("member key after Rejoin: %v %v", resp, err)
	}
	if ttl, err := s.Client().TimeToLive(ctx, m.Lease()); err != nil || ttl.TTL != -1 {
		t.Fatalf("old lease after Rejoin: %v %v, want revoked", ttl, err)
	}
	if err := m2.Update(ctx, func(mm *Member) { mm.Applied = 3 }); err != nil {
		t.Fatal(err)
	}
}

// campaign runs m.Campaign in a goroutine and returns a channel for its result.
func campaign(ctx context.Context, m *Membership) <-chan *Leadership {
	ch := make(chan *Leadership, 1)
	go func() {
		l, err := m.Campaign(ctx)
		if err != nil {
			l = nil
		}
		ch <- l
	}()
	return ch
}

// TestElectionTakeover: the leader's membership closed hands leadership over at once; the leader's process
// gone without a word (client closed, lease left to expire) hands it over within the TTL.
func TestElectionTakeover(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	obs := open(t, srv)
	var stores []*Store
	var members []*Membership
	for range 3 {
		s := open(t, srv)
		m, err := s.Join(ctx, Member{})
		if err != nil {
			t.Fatal(err)
		}
		stores, members = append(stores, s), append(members, m)
	}
	if id, err := obs.Leader(ctx); err != nil || id != "" {
		t.Fatalf("Leader before any campaign: %q %v", id, err)
	}
	first, err := members[0].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting := map[int]<-chan *Leadership{1: campaign(ctx, members[1]), 2: campaign(ctx, members[2])}
	// next waits up to d for one of the waiting campaigns to win and returns its index.
	next := func(d time.Duration) (int, *Leadership) {
		t.Helper()
		deadline := time.After(d)
		for {
			for i, ch := range waiting {
				select {
				case l := <-ch:
					if l == nil {
						t.Fatalf("%s's campaign failed", members[i].ID())
					}
					delete(waiting, i)
					return i, l
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("no campaigner elected within %v", d)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := obs.Client().Get(ctx, obs.electionPrefix()+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 3 {
			break // both campaigns wait behind proxy-1
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d candidates, want 3", resp.Count)
		}
	}
	none(t, waiting[1], 100*time.Millisecond)
	none(t, waiting[2], 0)
	if id, _ := obs.Leader(ctx); id != "proxy-1" {
		t.Fatalf("Leader = %q, want proxy-1", id)
	}

	// Membership closed: the next campaigner leads at once.
	start := time.Now()
	if err := members[0].Close(); err != nil {
		t.Fatal(err)
	}
	i, second := next(time.Duration(testTTL) * time.Second)
	t.Logf("takeover after the leader's Close: %v", time.Since(start).Round(time.Millisecond))
	select {
	case <-first.Done():
	case <-time.After(time.Second):
		t.Fatal("the closed member's Leadership.Done not closed")
	}
	if id, _ := obs.Leader(ctx); id != members[i].ID() {
		t.Fatalf("Leader = %q, want %s", id, members[i].ID())
	}
	if err := second.SetMaster(ctx, "node1", "a:1"); err != nil {
		t.Fatal(err)
	}

	// Leader's process gone (client closed, no revoke): the last one leads within the TTL (plus etcd's expiry
	// tick).
	start = time.Now()
	stores[i].Close()
	j, third := next(time.Duration(testTTL)*time.Second + 2*time.Second)
	took := time.Since(start)
	t.Logf("takeover after the leader stopped renewing (TTL %ds): %v", testTTL, took.Round(time.Millisecond))
	if id, _ := obs.Leader(ctx); id != members[j].ID() {
		t.Fatalf("Leader = %q, want %s", id, members[j].ID())
	}
	if err := third.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if id, _ := obs.Leader(ctx); id != "" {
		t.Fatalf("Leader after Resign = %q", id)
	}
	members[j].Close()
}

// TestDeposedLeader: a leader whose lease ended without its noticing cannot overwrite its successor's record.
func TestDeposedLeader(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	sa, sb := open(t, srv), open(t, srv)
	a, err := sa.Join(ctx, Member{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sb.Join(ctx, Member{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.SetMaster(ctx, "node1", "old:3306"); err != nil {
		t.Fatal(err)
	}
	cb := campaign(ctx, b)
	none(t, cb, 100*time.Millisecond)

	// The lease ends in etcd (as when it expires during a pause of the leader's process); a has not noticed.
	if _, err := sb.Client().Revoke(ctx, a.Lease()); err != nil {
		t.Fatal(err)
	}
	lb := recv(t, cb, 5*time.Second)
	if lb == nil {
		t.Fatal("b's campaign failed")
	}
	if err := lb.SetMaster(ctx, "node1", "new:3306"); err != nil {
		t.Fatal(err)
	}
	if err := la.SetMaster(ctx, "node1", "stale:3306"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's SetMaster: %v, want ErrNotLeader", err)
	}
	if err := la.SetMaster(ctx, "node2", "stale:3306"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's SetMaster of another node: %v, want ErrNotLeader", err)
	}
	m, err := sa.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(m, map[string]string{"node1": "new:3306"}) {
		t.Fatalf("masters %v, want the new leader's record only", m)
	}
	// A custom transaction with the leader's condition fails the same way.
	resp, err := sa.Client().Txn(ctx).If(la.Cmp()).Then(clientv3.OpPut(sa.Prefix()+"/workflow", "x")).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("deposed leader's txn: succeeded=%v %v", resp != nil && resp.Succeeded, err)
	}
	select {
	case <-la.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("deposed Leadership.Done not closed")
	}
	if id, _ := sa.Leader(ctx); id != b.ID() {
		t.Fatalf("Leader = %q, want %s", id, b.ID())
	}
}

func TestNaturalCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"proxy-2", "proxy-10", -1},
		{"proxy-10", "proxy-2", 1},
		{"proxy-2", "proxy-2", 0},
		{"proxy-02", "proxy-2", 0},
		{"a", "b", -1},
		{"proxy", "proxy-1", -1},
		{"blue", "proxy-1", -1},
	} {
		if got := naturalCompare(c.a, c.b); got != c.want {
			t.Errorf("naturalCompare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
