package topo

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is a member's term as the fleet's leader, won by Campaign. It ends when the member's lease ends,
// when it resigns, or when its election key is removed; Done says so. Its writes are conditioned on the election
// key in etcd, not on Done, so a leader that has not noticed its deposition yet still cannot write. It is safe
// for concurrent use.
type Leadership struct {
	m    *Membership
	e    *concurrency.Election
	key  string // the election key, P/leader/<lease>
	rev  int64  // the key's CreateRevision when it won
	stop context.CancelFunc
	done chan struct{} // closed by the watcher goroutine when it returns
}

// Campaign blocks until the member is the leader, ctx ends, or the membership is lost. Leaders are elected in
// the order they campaigned (concurrency.Election on P/leader); the member's ID is the election value.
func (m *Membership) Campaign(ctx context.Context) (*Leadership, error) {
	// A campaign outlives nothing: losing the lease while waiting ends it too.
	cctx, cancel := context.WithCancel(ctx)
	stopped := context.AfterFunc(m.sess.Ctx(), cancel)
	defer func() {
		stopped()
		cancel()
	}()
	e := concurrency.NewElection(m.sess, m.s.electionPrefix())
	if err := e.Campaign(cctx, m.id); err != nil {
		if m.sess.Ctx().Err() != nil {
			return nil, fmt.Errorf("topo: campaign as %s: %w", m.id, ErrMemberGone)
		}
		return nil, m.s.fail("campaign as "+m.id, err)
	}
	lctx, stop := context.WithCancel(m.sess.Ctx())
	l := &Leadership{m: m, e: e, key: e.Key(), rev: e.Rev(), stop: stop, done: make(chan struct{})}
	go l.watch(lctx)
	return l, nil
}

// watch closes done when the election key no longer has the leader's create revision, or ctx ends (Resign, or
// the session's lease is gone). Owned by the Leadership: Resign waits for it.
func (l *Leadership) watch(ctx context.Context) {
	defer close(l.done)
	s := l.m.s
	backoff := retryMin
	for ctx.Err() == nil {
		actx, cancel := s.attemptCtx(ctx)
		resp, err := s.cli.Get(actx, l.key)
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.rev {
				return
			}
			backoff = retryMin
			for wr := range s.cli.Watch(ctx, l.key, clientv3.WithRev(resp.Header.Revision+1)) {
				if wr.Err() != nil {
					break
				}
				for _, ev := range wr.Events {
					if ev.Type == clientv3.EventTypeDelete {
						return
					}
				}
			}
		}
		if !pause(ctx, &backoff) {
			return
		}
	}
}

// Rev is the election key's create revision: the term's identity, larger for every later term.
func (l *Leadership) Rev() int64 { return l.rev }

// Cmp is the condition every write of the leader carries: its election key still exists with the create
// revision it was elected with. Use it in transactions on keys this package does not model.
func (l *Leadership) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// SetMaster records addr ("host:port") as node's master if this member is still the leader; otherwise it writes
// nothing and returns ErrNotLeader. The record has no lease: it outlives the leader.
func (l *Leadership) SetMaster(ctx context.Context, node, addr string) error {
	s := l.m.s
	resp, err := s.cli.Txn(ctx).If(l.Cmp()).Then(clientv3.OpPut(s.masterKey(node), addr)).Commit()
	if err != nil {
		return s.fail("record master of "+node, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s cannot record the master of %s", ErrNotLeader, l.m.id, node)
	}
	return nil
}

// Done is closed when the term has ended: the lease is gone, the leader resigned, or its election key was
// removed. Writes fail with ErrNotLeader from the moment etcd ends the term, which can be before Done closes.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Resign ends the term (deleting the election key, so the next campaigner is elected at once) and waits for
// Done. The membership stays.
func (l *Leadership) Resign(ctx context.Context) error {
	err := l.e.Resign(ctx)
	l.stop()
	<-l.done
	if err != nil {
		return l.m.s.fail("resign as "+l.m.id, err)
	}
	return nil
}

// Leader returns the current leader's member ID, "" if no member leads.
func (s *Store) Leader(ctx context.Context) (string, error) {
	resp, err := s.cli.Get(ctx, s.electionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", s.fail("read leader", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
