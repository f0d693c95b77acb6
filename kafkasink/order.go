package kafkasink

import (
	"context"
	"strconv"
	"strings"

	"github.com/shardgate/shardgate/changestream"
)

// Cutover is a resharding cutover of a streamed table (package move): from
// it on, the application writes the table's rows into the new rule's
// subtables, on nodes that may differ from the rows' old ones.
//
// A live stream carries a row's last change on its old node before its
// first on the new one (the cutover holds the application's statements
// until the new subtables have applied everything before it). A sink that
// reads the cutover from history (resumed from positions before it)
// reads every node's binary log at once and could produce them the other
// way round. So the sink holds a node's changes of the new subtables, and
// everything that node's stream carries after them, until each old node's
// stream has been produced past the cutover's position there (Applied).
// Nothing before an old node's cutover position is ever held (the
// application writes the new subtables only after it), so the hold cannot
// wait on itself; and a held node's marks are held with its changes, so
// no position past a held change is committed.
type Cutover struct {
	// Table is the logical table, db.table.
	Table string
	// Subtables are the new rule's subtables, db.name.
	Subtables []string
	// Applied is, per old node, the position of the cutover in its binary
	// log (the workflow's state.applied once switched).
	Applied map[string]string
}

// order returns the changes of in with the new subtables' changes of the
// cutovers held as Cutover describes. cutovers is asked at the start and
// whenever a change of a subtable not seen before arrives (a cutover that
// happens while the sink runs is saved before its first such change); it
// may be nil. from is each node's position the stream starts after. The
// channel closes when in closes (held changes are dropped: their
// positions were not committed) or ctx ends.
func order(ctx context.Context, in <-chan changestream.Change, from map[string]string, nodes []string, cutovers func() []Cutover) <-chan changestream.Change {
	if cutovers == nil {
		return in
	}
	out := make(chan changestream.Change, cap(in))
	o := &orderer{passed: map[string]string{}, seen: map[string]bool{}, queue: map[string][]changestream.Change{},
		nodes: nodes, cutovers: cutovers}
	for n, p := range from {
		o.passed[n] = p
	}
	o.refresh()
	go func() {
		defer close(out)
		send := func(ch changestream.Change) bool {
			if ch.Op == "mark" {
				o.passed[ch.Node] = ch.Pos
			}
			select {
			case out <- ch:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			var ch changestream.Change
			var ok bool
			select {
			case ch, ok = <-in:
			case <-ctx.Done():
				return
			}
			if !ok {
				return
			}
			if ch.Subtable != "" && !o.seen[ch.Subtable] {
				o.seen[ch.Subtable] = true
				o.refresh()
			}
			if len(o.queue[ch.Node]) > 0 || o.held(&ch) {
				o.queue[ch.Node] = append(o.queue[ch.Node], ch)
				continue
			}
			if !send(ch) {
				return
			}
			if ch.Op != "mark" {
				continue
			}
			// A node moved on: release what no longer waits, until
			// nothing more moves (a released mark may release others).
			for moved := true; moved; {
				moved = false
				for n, q := range o.queue {
					for len(q) > 0 && !o.held(&q[0]) {
						if !send(q[0]) {
							return
						}
						q, moved = q[1:], true
					}
					if len(q) == 0 {
						delete(o.queue, n)
					} else {
						o.queue[n] = q
					}
				}
			}
		}
	}()
	return out
}

// orderer is order's state, owned by its goroutine.
type orderer struct {
	passed   map[string]string                // node -> position produced through
	seen     map[string]bool                  // subtables seen in this run
	queue    map[string][]changestream.Change // node -> what its stream carried from its first held change on
	bySub    map[string]*Cutover              // new subtable -> its table's cutover
	nodes    []string                         // the stream's nodes
	cutovers func() []Cutover
}

func (o *orderer) refresh() {
	o.bySub = map[string]*Cutover{}
	for _, c := range o.cutovers() {
		for _, s := range c.Subtables {
			o.bySub[s] = &c
		}
	}
}

// held reports whether ch is a change of a new subtable whose cutover an
// old node's stream has not been produced past yet.
func (o *orderer) held(ch *changestream.Change) bool {
	if ch.Op == "mark" || ch.Op == "ddl" {
		return false
	}
	c := o.bySub[ch.Subtable]
	if c == nil {
		return false
	}
	for n, p := range c.Applied {
		if n != ch.Node && containsNode(o.nodes, n) && !covers(o.passed[n], p) {
			return true
		}
	}
	return false
}

func containsNode(nodes []string, n string) bool {
	for _, m := range nodes {
		if m == n {
			return true
		}
	}
	return false
}

// covers reports whether MariaDB GTID position have includes want: for
// each domain of want, have's sequence number is at least want's
// (sequence numbers grow within a domain, whichever server wrote them).
func covers(have, want string) bool {
	h := gtidSeqs(have)
	for d, seq := range gtidSeqs(want) {
		if h[d] < seq {
			return false
		}
	}
	return true
}

// gtidSeqs is a GTID list's highest sequence number per domain.
func gtidSeqs(pos string) map[string]uint64 {
	out := map[string]uint64{}
	for _, g := range strings.Split(pos, ",") {
		parts := strings.Split(strings.TrimSpace(g), "-")
		if len(parts) != 3 {
			continue
		}
		seq, err := strconv.ParseUint(parts[2], 10, 64)
		if err == nil && seq > out[parts[0]] {
			out[parts[0]] = seq
		}
	}
	return out
}

// nodes are the names of the sink's sources.
func (s *Sink) nodes() []string {
	out := make([]string, len(s.sources))
	for i, src := range s.sources {
		out[i] = src.Node
	}
	return out
}
