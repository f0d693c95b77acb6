package topo

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A fleet-wide cutover. The proxy that runs a workflow's cutover announces it at P/cutovers/<db.table> under its
// own lease (AnnounceCutover): every live member that reads the announcement (WatchCutovers) shuts its gate for
// the table, waits until no session of its own is inside, and acknowledges with P/cutover-acks/<db.table>/<id>/
// <member>, under its lease too (AckCutover). The announcer waits for the acknowledgements of the members it
// knows (WaitAcks), at most a bounded time, fences and swaps, then writes the outcome into the announcement
// (Done, with the rule in force) and removes it with its acknowledgements (EndCutover). A member lets its
// statements go when the announcement is done or gone, or when its Hold has passed since it read it. Nothing
// here is needed for correctness: the fence at the backend is. The protocol only spares the members the fence.

// Cutover is one announced attempt to hold a table fleet-wide.
type Cutover struct {
	// Table is the logical table, "db.table".
	Table string `json:"table"`
	// ID is the attempt: each announcement has its own, and acknowledgements name it.
	ID string `json:"id"`
	// Member is the announcing proxy's member ID (set by AnnounceCutover).
	Member string `json:"member"`
	// Hold is the longest a member keeps the table held after reading the announcement, whatever becomes of
	// the announcer (frozen, partitioned): past it, the fence is what stops a stale write.
	Hold time.Duration `json:"hold"`
	// Done is set by EndCutover: the swap is decided; Rule is the rule then in force (the encoding is the
	// caller's: the proxy's JSON of its shard rule), empty when nothing changed.
	Done bool            `json:"done,omitempty"`
	Rule json.RawMessage `json:"rule,omitempty"`
}

func (s *Store) cutoversPrefix() string         { return s.prefix + "/cutovers/" }
func (s *Store) cutoverKey(table string) string { return s.cutoversPrefix() + table }
func (s *Store) acksPrefix(table, id string) string {
	return s.prefix + "/cutover-acks/" + table + "/" + id + "/"
}

// AnnounceCutover stores c (Member set to this member) at P/cutovers/<table> under the member's lease: it
// disappears if the member dies. An older announcement of the table is replaced.
func (m *Membership) AnnounceCutover(ctx context.Context, c Cutover) (Cutover, error) {
	if c.Table == "" || c.ID == "" || strings.Contains(c.ID, "/") {
		return c, fmt.Errorf("topo: announce cutover: table and an ID without '/' are required (got %q, %q)", c.Table, c.ID)
	}
	c.Member, c.Done, c.Rule = m.id, false, nil
	val, err := json.Marshal(c)
	if err != nil {
		return c, err
	}
	if _, err := m.s.cli.Put(ctx, m.s.cutoverKey(c.Table), string(val), clientv3.WithLease(m.Lease())); err != nil {
		return c, m.s.fail("announce cutover of "+c.Table, err)
	}
	return c, nil
}

// AckCutover records that this member holds c's table with no session inside, under the member's lease.
func (m *Membership) AckCutover(ctx context.Context, c Cutover) error {
	if _, err := m.s.cli.Put(ctx, m.s.acksPrefix(c.Table, c.ID)+m.id, "", clientv3.WithLease(m.Lease())); err != nil {
		return m.s.fail("acknowledge cutover of "+c.Table, err)
	}
	return nil
}

// WaitAcks waits until every member of want has acknowledged c, or ctx ends, and returns the members of want
// that have not (nil when all did). err is set only when etcd could not be read at all (then every member of
// want is reported missing).
func (s *Store) WaitAcks(ctx context.Context, c Cutover, want []string) (missing []string, err error) {
	left := map[string]bool{}
	for _, id := range want {
		left[id] = true
	}
	rest := func() []string {
		if len(left) == 0 {
			return nil
		}
		return slices.Sorted(maps.Keys(left))
	}
	prefix := s.acksPrefix(c.Table, c.ID)
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return rest(), s.fail("read cutover acknowledgements of "+c.Table, err)
	}
	for _, kv := range resp.Kvs {
		delete(left, strings.TrimPrefix(string(kv.Key), prefix))
	}
	if len(left) == 0 {
		return nil, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if wr.Err() != nil {
			break
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				delete(left, strings.TrimPrefix(string(ev.Kv.Key), prefix))
			}
		}
		if len(left) == 0 {
			return nil, nil
		}
	}
	return rest(), nil
}

// EndCutover writes c's outcome into its announcement (Done, with rule: the rule in force now, nil when
// nothing changed), so that the members put it in force before they let their statements go, then removes the
// announcement and its acknowledgements. An announcement replaced by another attempt is left alone.
func (m *Membership) EndCutover(ctx context.Context, c Cutover, rule json.RawMessage) error {
	c.Member, c.Done, c.Rule = m.id, true, rule
	val, err := json.Marshal(c)
	if err != nil {
		return err
	}
	key := m.s.cutoverKey(c.Table)
	get, err := m.s.cli.Get(ctx, key)
	if err != nil {
		return m.s.fail("end cutover of "+c.Table, err)
	}
	if len(get.Kvs) == 0 {
		// Gone (the lease was lost): the members let go already.
		_, err = m.s.cli.Delete(ctx, m.s.acksPrefix(c.Table, c.ID), clientv3.WithPrefix())
		return err
	}
	var cur Cutover
	if json.Unmarshal(get.Kvs[0].Value, &cur) != nil || cur.ID != c.ID {
		return nil
	}
	rev := get.Kvs[0].ModRevision
	put, err := m.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(m.Lease()))).Commit()
	if err != nil {
		return m.s.fail("end cutover of "+c.Table, err)
	}
	if !put.Succeeded {
		return nil // replaced meanwhile
	}
	_, err = m.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", put.Header.Revision)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(m.s.acksPrefix(c.Table, c.ID), clientv3.WithPrefix())).
		Else(clientv3.OpDelete(m.s.acksPrefix(c.Table, c.ID), clientv3.WithPrefix())).Commit()
	if err != nil {
		return m.s.fail("end cutover of "+c.Table, err)
	}
	return nil
}

// WatchCutovers delivers the announced cutovers, by table: the current set first (possibly empty), then the set
// after each change, one event at a time, so that a reader sees an announcement done before it is gone. Like
// WatchMasters it survives etcd restarts and outages (an announcement done and removed while the watch was
// resuming is seen as gone) and is closed when ctx ends. Each map sent belongs to the receiver.
func (s *Store) WatchCutovers(ctx context.Context) <-chan map[string]Cutover {
	ch := make(chan map[string]Cutover)
	go func() {
		defer close(ch)
		cur := map[string]Cutover{}
		send := func() bool {
			select {
			case ch <- maps.Clone(cur):
				return true
			case <-ctx.Done():
				return false
			}
		}
		prefix := s.cutoversPrefix()
		s.follow(ctx, "cutovers", prefix, []clientv3.OpOption{clientv3.WithPrefix()},
			func(resp *clientv3.GetResponse) bool {
				cur = map[string]Cutover{}
				for _, kv := range resp.Kvs {
					var c Cutover
					if json.Unmarshal(kv.Value, &c) == nil {
						cur[strings.TrimPrefix(string(kv.Key), prefix)] = c
					}
				}
				return send()
			},
			func(evs []*clientv3.Event) bool {
				for _, ev := range evs {
					table := strings.TrimPrefix(string(ev.Kv.Key), prefix)
					switch ev.Type {
					case clientv3.EventTypePut:
						var c Cutover
						if json.Unmarshal(ev.Kv.Value, &c) != nil {
							continue
						}
						cur[table] = c
					case clientv3.EventTypeDelete:
						delete(cur, table)
					}
					if !send() {
						return false
					}
				}
				return true
			})
	}()
	return ch
}
