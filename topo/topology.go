package topo

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Version is one version of the topology: the ks.yaml text stored at P/topology and the etcd revision that wrote
// it (the key's ModRevision). Revisions only grow, so a larger Rev is a newer topology.
type Version struct {
	// Rev is the key's ModRevision, the version's identity.
	Rev int64
	// YAML is the ks.yaml text as stored. The receiver owns it.
	YAML []byte
}

// Get reads the current topology (a linearizable read). It returns ErrNoTopology when none has been stored.
func (s *Store) Get(ctx context.Context) (Version, error) {
	resp, err := s.cli.Get(ctx, s.topologyKey())
	if err != nil {
		return Version{}, s.fail("read topology", err)
	}
	if len(resp.Kvs) == 0 {
		return Version{}, ErrNoTopology
	}
	kv := resp.Kvs[0]
	return Version{Rev: kv.ModRevision, YAML: kv.Value}, nil
}

// Put stores yaml as the new topology if the stored one is still the one the caller read, and returns the new
// version's Rev. prevRev is that read's Rev; 0 means no topology may exist yet (the first load), -1 stores
// unconditionally. When the topology is at another revision nothing is written and the error wraps ErrConflict.
// The text is stored as given; validating it is the caller's job.
func (s *Store) Put(ctx context.Context, yaml []byte, prevRev int64) (int64, error) {
	key := s.topologyKey()
	var cmp clientv3.Cmp
	switch {
	case prevRev == -1:
		resp, err := s.cli.Put(ctx, key, string(yaml))
		if err != nil {
			return 0, s.fail("store topology", err)
		}
		return resp.Header.Revision, nil
	case prevRev == 0:
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	case prevRev > 0:
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", prevRev)
	default:
		return 0, fmt.Errorf("topo: store topology: invalid previous revision %d", prevRev)
	}
	resp, err := s.cli.Txn(ctx).If(cmp).
		Then(clientv3.OpPut(key, string(yaml))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, s.fail("store topology", err)
	}
	if !resp.Succeeded {
		var cur int64
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			cur = rr.Kvs[0].ModRevision
		}
		if prevRev == 0 {
			return 0, fmt.Errorf("%w: a topology exists already (revision %d)", ErrConflict, cur)
		}
		if cur == 0 {
			return 0, fmt.Errorf("%w: the topology was deleted (expected revision %d)", ErrConflict, prevRev)
		}
		return 0, fmt.Errorf("%w: it is at revision %d, not %d", ErrConflict, cur, prevRev)
	}
	return resp.Header.Revision, nil
}

// Watch delivers the topology's versions: the current one first (if any), then each new one, in revision order,
// each once. It survives etcd restarts and outages: the client resumes the watch from the last revision it saw,
// and when it cannot (the history was compacted) Watch reads the current version again, so a reader may miss
// versions that were overwritten meanwhile but never receives an older or repeated one. A deleted topology is
// not a version: the reader keeps the last one. The channel is unbuffered and closed when ctx ends; the reader
// must keep reading until then.
func (s *Store) Watch(ctx context.Context) <-chan Version {
	ch := make(chan Version)
	go func() {
		defer close(ch)
		var last int64
		send := func(rev int64, yaml []byte) bool {
			if rev <= last {
				return true
			}
			select {
			case ch <- Version{Rev: rev, YAML: yaml}:
				last = rev
				return true
			case <-ctx.Done():
				return false
			}
		}
		s.follow(ctx, "topology", s.topologyKey(), nil,
			func(resp *clientv3.GetResponse) bool {
				if len(resp.Kvs) == 0 {
					return true
				}
				return send(resp.Kvs[0].ModRevision, resp.Kvs[0].Value)
			},
			func(evs []*clientv3.Event) bool {
				for _, ev := range evs {
					if ev.Type == clientv3.EventTypePut && !send(ev.Kv.ModRevision, ev.Kv.Value) {
						return false
					}
				}
				return true
			})
	}()
	return ch
}

// follow keeps a reader up to date with key (with clientv3.WithPrefix in opts: every key under it). It reads the
// current state and hands it to onGet, then watches from the revision after that read and hands each batch of
// events to onEvents. When the watch ends while ctx is live (history compacted, the server cancelled it) it
// starts over with a read; a read that fails (etcd unreachable) is retried with a growing pause. It returns when
// ctx ends or a callback returns false. what names the data in logs.
func (s *Store) follow(ctx context.Context, what, key string, opts []clientv3.OpOption,
	onGet func(*clientv3.GetResponse) bool, onEvents func([]*clientv3.Event) bool) {
	backoff := retryMin
	lost := false // a failure was logged and the next success should say so
	for ctx.Err() == nil {
		actx, cancel := s.attemptCtx(ctx)
		resp, err := s.cli.Get(actx, key, opts...)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !lost {
				s.lg.Warn("topo: cannot read from etcd; keeping the last value", zap.String("what", what), zap.Error(err))
				lost = true
			}
			if !pause(ctx, &backoff) {
				return
			}
			continue
		}
		if lost {
			s.lg.Info("topo: etcd answers again", zap.String("what", what), zap.Int64("rev", resp.Header.Revision))
			lost = false
		}
		backoff = retryMin
		if !onGet(resp) {
			return
		}
		if s.afterRead != nil {
			s.afterRead(what)
		}
		wctx, wcancel := context.WithCancel(ctx)
		wopts := append(append([]clientv3.OpOption(nil), opts...), clientv3.WithRev(resp.Header.Revision+1))
		ok := true
		var werr error
		for wr := range s.cli.Watch(wctx, key, wopts...) {
			if werr = wr.Err(); werr != nil {
				break
			}
			if len(wr.Events) > 0 && !onEvents(wr.Events) {
				ok = false
				break
			}
		}
		wcancel()
		if !ok || ctx.Err() != nil {
			return
		}
		if werr == nil {
			werr = errors.New("watch channel closed")
		}
		s.lg.Warn("topo: watch ended; reading the current value again", zap.String("what", what), zap.Error(werr))
		if !pause(ctx, &backoff) {
			return
		}
	}
}
