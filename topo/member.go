package topo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// autoIDPrefix names members that did not choose an ID: "proxy-1", "proxy-2", ...
const autoIDPrefix = "proxy-"

// maxAutoIDs bounds the search for a free automatic ID.
const maxAutoIDs = 10000

// NodeHealth is what one proxy sees of one node's master: the leader decides a switch from all members' reports.
type NodeHealth struct {
	// Master is the "host:port" the proxy currently uses as the node's master.
	Master string `json:"master"`
	// Up says whether the proxy's health checks reach that master.
	Up bool `json:"up"`
	// ReadOnly says whether the master reports read_only.
	ReadOnly bool `json:"read_only"`
	// Promoted lists replica addresses that look promoted (writable, replication stopped).
	Promoted []string `json:"promoted,omitempty"`
}

// Member is one live proxy as published at P/members/<ID>.
type Member struct {
	// ID is the member's name in the fleet, also its XA instance name.
	ID string `json:"id"`
	// Addr is the MySQL listener's address.
	Addr string `json:"addr"`
	// AdminAddr is the status page's address.
	AdminAddr string `json:"admin_addr"`
	// Applied is the topology version (Version.Rev) the proxy serves.
	Applied int64 `json:"applied"`
	// Started is when the proxy process started.
	Started time.Time `json:"started"`
	// Health is the proxy's view of each node, by node name.
	Health map[string]NodeHealth `json:"health,omitempty"`
	// Err is the proxy's last error in applying the topology, "" if none.
	Err string `json:"err,omitempty"`
}

// clone copies m deeply enough that changing the copy's Health leaves m alone.
func (m Member) clone() Member {
	m.Health = maps.Clone(m.Health)
	for k, h := range m.Health {
		h.Promoted = slices.Clone(h.Promoted)
		m.Health[k] = h
	}
	return m
}

// Membership is this proxy's registration: its key P/members/<ID>, attached to a lease that a
// concurrency.Session keeps alive. It is safe for concurrent use.
type Membership struct {
	s      *Store
	sess   *concurrency.Session
	id     string
	key    string
	cancel context.CancelFunc // ends the session's keep-alive; called by Close after the revoke

	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex // serialises Update
	m  Member     // the value last written; guarded by mu
}

// Join registers m as a live member under a new lease of LeaseTTL seconds and returns the registration. With
// m.ID empty it claims the lowest free name "proxy-1", "proxy-2", ..., so a name comes back into use once its
// member's lease has ended; a given ID must be free (the error wraps ErrIDTaken otherwise). m.Started defaults
// to now. ctx bounds the registration only; the membership lives until Close or until the lease is lost.
func (s *Store) Join(ctx context.Context, m Member) (*Membership, error) {
	if m.Started.IsZero() {
		m.Started = time.Now()
	}
	if strings.Contains(m.ID, "/") {
		return nil, fmt.Errorf("topo: member ID %q contains '/'", m.ID)
	}
	grant, err := s.cli.Grant(ctx, int64(s.o.LeaseTTL))
	if err != nil {
		return nil, s.fail("join: lease", err)
	}
	lease := grant.ID
	ok := false
	defer func() {
		if !ok {
			s.revoke(lease)
		}
	}()
	if m.ID != "" {
		if err := s.claim(ctx, m, lease, clientv3.NoLease); err != nil {
			return nil, err
		}
	} else if m.ID, err = s.claimAuto(ctx, m, lease); err != nil {
		return nil, err
	}
	ms, err := s.session(m, lease)
	if err != nil {
		return nil, err
	}
	ok = true
	return ms, nil
}

// claimAuto claims the lowest free automatic ID for m under lease and returns it.
func (s *Store) claimAuto(ctx context.Context, m Member, lease clientv3.LeaseID) (string, error) {
	resp, err := s.cli.Get(ctx, s.membersPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return "", s.fail("join: list members", err)
	}
	taken := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		taken[strings.TrimPrefix(string(kv.Key), s.membersPrefix())] = true
	}
	for i := 1; i <= maxAutoIDs; i++ {
		id := autoIDPrefix + strconv.Itoa(i)
		if taken[id] {
			continue
		}
		m.ID = id
		err := s.claim(ctx, m, lease, clientv3.NoLease)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, ErrIDTaken) {
			return "", err
		}
		// Another proxy claimed it between the list and the claim: try the next one.
	}
	return "", fmt.Errorf("topo: join: no free member ID among %s1..%d", autoIDPrefix, maxAutoIDs)
}

// claim writes m at its key under lease if the key is free, or, when old is not NoLease, if the key is still
// held by lease old (a member coming back after losing its lease). Otherwise the error wraps ErrIDTaken.
func (s *Store) claim(ctx context.Context, m Member, lease, old clientv3.LeaseID) error {
	val, err := json.Marshal(m)
	if err != nil {
		return s.fail("join", err)
	}
	key := s.memberKey(m.ID)
	put := clientv3.OpPut(key, string(val), clientv3.WithLease(lease))
	free := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	get := clientv3.OpGet(key, clientv3.WithKeysOnly())
	txn := s.cli.Txn(ctx).If(free).Then(put).Else(get)
	if old != clientv3.NoLease {
		// Nested: take the key over from the old lease, or claim it if it is free.
		txn = s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.LeaseValue(key), "=", old)).
			Then(put).
			Else(clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{put}, []clientv3.Op{get}))
	}
	resp, err := txn.Commit()
	if err != nil {
		return s.fail("join as "+m.ID, err)
	}
	if resp.Succeeded {
		return nil
	}
	rr := resp.Responses[0].GetResponseRange()
	if old != clientv3.NoLease {
		nested := resp.Responses[0].GetResponseTxn()
		if nested.Succeeded {
			return nil
		}
		rr = nested.Responses[0].GetResponseRange()
	}
	holder := "?"
	if rr != nil && len(rr.Kvs) > 0 {
		holder = fmt.Sprintf("lease %x since revision %d", rr.Kvs[0].Lease, rr.Kvs[0].CreateRevision)
	}
	return fmt.Errorf("%w: %s is held by %s", ErrIDTaken, m.ID, holder)
}

// session starts keeping lease alive for the member m, whose key is written already.
func (s *Store) session(m Member, lease clientv3.LeaseID) (*Membership, error) {
	// The session outlives the caller's ctx: it ends with Close or with the lease.
	sctx, cancel := context.WithCancel(context.Background())
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(lease), concurrency.WithTTL(s.o.LeaseTTL),
		concurrency.WithContext(sctx))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("topo: join as %s: keep-alive: %w", m.ID, err)
	}
	return &Membership{s: s, sess: sess, id: m.ID, key: s.memberKey(m.ID), cancel: cancel, m: m.clone()}, nil
}

// revoke ends a lease that is no longer wanted, best effort: if etcd does not answer, it expires by itself.
func (s *Store) revoke(lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.DialTimeout)
	defer cancel()
	_, _ = s.cli.Revoke(ctx, lease)
}

// ID is the member's name in the fleet.
func (m *Membership) ID() string { return m.id }

// Lease is the membership's etcd lease, for keys that must disappear with the member.
func (m *Membership) Lease() clientv3.LeaseID { return m.sess.Lease() }

// Member returns a copy of the value last written.
func (m *Membership) Member() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m.clone()
}

// Update applies fn to a copy of the member's value and writes the result under the lease, if the key is still
// this membership's; otherwise it returns ErrMemberGone and keeps the old value. fn must not keep its argument.
// The ID cannot be changed.
func (m *Membership) Update(ctx context.Context, fn func(*Member)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := m.m.clone()
	fn(&next)
	next.ID = m.id
	val, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("topo: update member %s: %w", m.id, err)
	}
	lease := m.sess.Lease()
	resp, err := m.s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(m.key), "=", lease)).
		Then(clientv3.OpPut(m.key, string(val), clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return m.s.fail("update member "+m.id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s", ErrMemberGone, m.id)
	}
	m.m = next
	return nil
}

// Done is closed when the lease is no longer kept alive: Close was called, or etcd did not confirm a renewal for
// LeaseTTL (the member is gone, or about to be, for the rest of the fleet). Leadership ends with it.
func (m *Membership) Done() <-chan struct{} { return m.sess.Done() }

// Close revokes the lease: the member, and its leadership if any, disappear at once. If etcd does not answer
// within LeaseTTL the lease expires by itself. Later calls return the first one's result.
func (m *Membership) Close() error {
	m.closeOnce.Do(func() {
		if err := m.sess.Close(); err != nil {
			m.closeErr = fmt.Errorf("topo: leave as %s: %w", m.id, err)
		}
		m.cancel()
	})
	return m.closeErr
}

// Rejoin registers the member again with the same ID and its last value, under a new lease, after its
// membership was lost (Done closed while etcd was unreachable). It takes the key over if the old lease still
// holds it and claims it if it is free; if another member has claimed the ID since, the error wraps ErrIDTaken
// and the caller may Join under another name. The old Membership stops renewing its lease (its Close becomes a
// no-op); a failed Rejoin, e.g. while etcd is still unreachable, can be retried on it.
func (m *Membership) Rejoin(ctx context.Context) (*Membership, error) {
	s := m.s
	old := m.sess.Lease()
	m.closeOnce.Do(func() {
		m.sess.Orphan()
		m.cancel()
	})
	grant, err := s.cli.Grant(ctx, int64(s.o.LeaseTTL))
	if err != nil {
		return nil, s.fail("rejoin as "+m.id+": lease", err)
	}
	member := m.Member()
	if err := s.claim(ctx, member, grant.ID, old); err != nil {
		s.revoke(grant.ID)
		return nil, err
	}
	ms, err := s.session(member, grant.ID)
	if err != nil {
		s.revoke(grant.ID)
		return nil, err
	}
	// The old lease holds nothing of ours now (its election key, if any, goes with it).
	s.revoke(old)
	return ms, nil
}

// Members lists the live members, sorted by ID (numbers in IDs in numeric order: proxy-2 before proxy-10).
func (s *Store) Members(ctx context.Context) ([]Member, error) {
	resp, err := s.cli.Get(ctx, s.membersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, s.fail("list members", err)
	}
	ms := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var m Member
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return nil, fmt.Errorf("topo: member %s: %w", kv.Key, err)
		}
		m.ID = strings.TrimPrefix(string(kv.Key), s.membersPrefix())
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b Member) int { return naturalCompare(a.ID, b.ID) })
	return ms, nil
}

// naturalCompare orders strings with runs of digits compared as numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits is the length of s's leading run of ASCII digits.
func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
