package topo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

var (
	// ErrNoTopology is returned by Get when no topology has been stored under the prefix.
	ErrNoTopology = errors.New("topo: no topology in etcd")
	// ErrConflict is returned (wrapped, with the current revision) by Put when the topology is not at the
	// revision the caller read: someone else changed it first.
	ErrConflict = errors.New("topo: the topology changed since it was read")
	// ErrNotLeader is returned by a Leadership's writes once it is no longer the leader in etcd (its lease ended,
	// it resigned, or its election key was removed).
	ErrNotLeader = errors.New("topo: not the leader")
	// ErrIDTaken is returned (wrapped) by Join and Rejoin when the requested member ID is held by another live
	// lease.
	ErrIDTaken = errors.New("topo: member ID is taken by another live member")
	// ErrMemberGone is returned by Membership.Update when the member's key is no longer held by its lease (the
	// lease expired or was revoked); Rejoin registers it again.
	ErrMemberGone = errors.New("topo: membership lost (lease expired or revoked)")
)

const (
	defaultDialTimeout = 2 * time.Second
	defaultLeaseTTL    = 5 // seconds

	// retryMin and retryMax bound the pause between attempts of a watch that lost etcd.
	retryMin = 100 * time.Millisecond
	retryMax = time.Second
)

// Options say where the fleet's etcd is and how the fleet uses it.
type Options struct {
	// Endpoints are etcd client URLs, e.g. "http://10.0.0.1:2379".
	Endpoints []string
	// Prefix is the cluster's root key, e.g. "/shardgate/prod"; several clusters can share one etcd under
	// different prefixes. A trailing "/" is ignored.
	Prefix string
	// DialTimeout bounds Open's first contact with etcd and each attempt of a watch to read the current value
	// (default 2 s).
	DialTimeout time.Duration
	// LeaseTTL is the membership lease in seconds (default 5): how long a proxy that stopped renewing (killed,
	// partitioned) stays listed and stays leader.
	LeaseTTL int
	// Logger receives the package's warnings (a watch that lost etcd and resumed) and the etcd client's errors.
	// Nil logs nothing.
	Logger *zap.Logger
}

// Store is a connection to the fleet's etcd under one prefix. It is safe for concurrent use.
type Store struct {
	cli    *clientv3.Client
	o      Options
	prefix string // Options.Prefix without a trailing "/"
	lg     *zap.Logger

	// afterRead, set only by tests before any watch starts, runs in a watch's goroutine between its read of the
	// current state and the start of its etcd watch (the window in which history can be compacted away).
	afterRead func(what string)
}

// Open dials etcd and checks that it answers a linearizable read within DialTimeout (or ctx, if sooner); it
// fails otherwise, so that a proxy started while etcd is unreachable knows it.
func Open(ctx context.Context, o Options) (*Store, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("topo: no etcd endpoints")
	}
	prefix := strings.TrimRight(o.Prefix, "/")
	if prefix == "" {
		return nil, errors.New("topo: empty cluster prefix")
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = defaultLeaseTTL
	}
	lg := o.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: o.DialTimeout,
		// Pings on an idle connection find an etcd that hangs (or a lost network) without waiting for TCP.
		DialKeepAliveTime:    o.DialTimeout,
		DialKeepAliveTimeout: o.DialTimeout,
		// The client warns at every retry while etcd is down; the package reports what matters itself.
		Logger: lg.Named("etcd").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)),
		// gRPC's reconnect backoff grows to 120 s: after an outage a proxy would not see etcd again (versions,
		// its lease, the election) for that long. Capped at retryMax, it is back within a second.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: retryMax},
			MinConnectTimeout: o.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("topo: etcd client for %v: %w", o.Endpoints, err)
	}
	s := &Store{cli: cli, o: o, prefix: prefix, lg: lg}
	if err := s.Healthy(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the etcd client. Memberships of this Store should be closed first: a member whose client is
// closed without revoking its lease stays listed until the lease expires.
func (s *Store) Close() error { return s.cli.Close() }

// Client is the underlying etcd client, for keys this package does not model. Keys of the cluster should stay
// under Prefix.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix is the cluster's root key, without a trailing "/".
func (s *Store) Prefix() string { return s.prefix }

// Healthy is a cheap check that etcd is reachable and has a quorum: one linearizable count-only read, bounded by
// DialTimeout when ctx has no earlier deadline. The status page and the refusal of topology changes use it.
func (s *Store) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.DialTimeout)
	defer cancel()
	if _, err := s.cli.Get(ctx, s.topologyKey(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("topo: etcd at %s unreachable: %w", strings.Join(s.o.Endpoints, ","), err)
	}
	return nil
}

// fail wraps the error of operation op. While etcd is unreachable the client waits for it until ctx ends, so a
// deadline means "no answer" and the message says so.
func (s *Store) fail(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("topo: %s: etcd at %s did not answer in time: %w", op, strings.Join(s.o.Endpoints, ","), err)
	}
	return fmt.Errorf("topo: %s: %w", op, err)
}

func (s *Store) topologyKey() string          { return s.prefix + "/topology" }
func (s *Store) mastersPrefix() string        { return s.prefix + "/masters/" }
func (s *Store) masterKey(node string) string { return s.mastersPrefix() + node }
func (s *Store) membersPrefix() string        { return s.prefix + "/members/" }
func (s *Store) memberKey(id string) string   { return s.membersPrefix() + id }
func (s *Store) electionPrefix() string       { return s.prefix + "/leader" }

// attemptCtx bounds one attempt of a watch's read by DialTimeout.
func (s *Store) attemptCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.o.DialTimeout)
}

// pause waits d (doubled for the next call, up to retryMax) or until ctx ends; it reports whether ctx is live.
func pause(ctx context.Context, d *time.Duration) bool {
	t := time.NewTimer(*d)
	defer t.Stop()
	*d = min(*d*2, retryMax)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
