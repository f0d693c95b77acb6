package topo

import (
	"context"
	"maps"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Masters reads the masters recorded by the leader: node name to "host:port". A node absent from the map has no
// recorded master; the proxy then uses its configured one.
func (s *Store) Masters(ctx context.Context) (map[string]string, error) {
	m, _, err := s.MastersRev(ctx)
	return m, err
}

// MastersRev is Masters with the etcd revision the map was read at, for callers that must tell a newer record
// from an older one.
func (s *Store) MastersRev(ctx context.Context) (map[string]string, int64, error) {
	resp, err := s.cli.Get(ctx, s.mastersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, s.fail("read masters", err)
	}
	return s.mastersOf(resp), resp.Header.Revision, nil
}

func (s *Store) mastersOf(resp *clientv3.GetResponse) map[string]string {
	m := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[strings.TrimPrefix(string(kv.Key), s.mastersPrefix())] = string(kv.Value)
	}
	return m
}

// WatchMasters delivers the full map of recorded masters: the current one first (possibly empty), then a new map
// after each change, in revision order; a map equal to the previous one delivered is not sent again. Like Watch
// it survives etcd restarts and outages (keeping the last map meanwhile), and is closed when ctx ends. Each map
// sent belongs to the receiver.
func (s *Store) WatchMasters(ctx context.Context) <-chan map[string]string {
	ch := make(chan map[string]string)
	go func() {
		defer close(ch)
		var cur, sent map[string]string // the state followed; the last map delivered (nil before the first)
		send := func() bool {
			if sent != nil && maps.Equal(cur, sent) {
				return true
			}
			select {
			case ch <- maps.Clone(cur):
				sent = maps.Clone(cur)
				return true
			case <-ctx.Done():
				return false
			}
		}
		s.follow(ctx, "masters", s.mastersPrefix(), []clientv3.OpOption{clientv3.WithPrefix()},
			func(resp *clientv3.GetResponse) bool {
				cur = s.mastersOf(resp)
				return send()
			},
			func(evs []*clientv3.Event) bool {
				for _, ev := range evs {
					node := strings.TrimPrefix(string(ev.Kv.Key), s.mastersPrefix())
					switch ev.Type {
					case clientv3.EventTypePut:
						cur[node] = string(ev.Kv.Value)
					case clientv3.EventTypeDelete:
						delete(cur, node)
					}
				}
				return send()
			})
	}()
	return ch
}
