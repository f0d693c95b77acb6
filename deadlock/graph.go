package deadlock

import (
	"slices"
	"time"
)

// Thread is one backend connection: the server it is on (its address:
// two nodes may name the same server) and its connection id there.
type Thread struct {
	Addr string
	ID   uint32
}

// Member is a proxy transaction as a round sees it: the session, the
// statement it is running (Seq changes with each statement) since Start,
// the threads its statement runs on and the threads it holds.
type Member struct {
	Session uint32
	Seq     uint64
	Start   time.Time
	Running []Thread
	Holds   []Thread
}

// Trx is one row of a server's INNODB_TRX, with one transaction it waits
// for (Blocker, a trx_id; "" when it waits for none). A transaction
// waiting for several appears once per blocker.
type Trx struct {
	ID      string
	Thread  uint32
	Weight  uint64
	Blocker string
}

// Cycle is a cross-server deadlock: its members (indexes into the
// round's members), the victim among them, and the node names its waits
// lie on.
type Cycle struct {
	Members []int
	Victim  int
	Nodes   []string
}

// graph is the global waits-for graph of one round. Vertices 0..len(members)-1
// are proxy transactions; the others are threads of other clients, each
// on one server.
type graph struct {
	members []Member
	vertex  map[Thread]int
	edges   [][]edge
	weight  []uint64
}

// frame is a vertex on the search's path and the next of its edges to follow.
type frame struct{ v, next int }

type edge struct {
	to   int
	addr string // the server the wait is on
	node string
}

// build makes the graph from the members and, per server address, its
// transactions. nodeOf names the node of a server address (for messages).
func build(members []Member, trx map[string][]Trx, nodeOf func(addr string) string) *graph {
	g := &graph{members: members, vertex: map[Thread]int{}}
	for i, m := range members {
		for _, t := range m.Holds {
			g.vertex[t] = i
		}
		for _, t := range m.Running {
			g.vertex[t] = i
		}
	}
	g.edges = make([][]edge, len(members))
	g.weight = make([]uint64, len(members))
	vertexOf := func(t Thread) int {
		if v, ok := g.vertex[t]; ok {
			return v
		}
		v := len(g.edges)
		g.vertex[t] = v
		g.edges = append(g.edges, nil)
		g.weight = append(g.weight, 0)
		return v
	}
	addrs := make([]string, 0, len(trx))
	for a := range trx {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs) // deterministic
	for _, addr := range addrs {
		rows := trx[addr]
		thread := make(map[string]uint32, len(rows))
		weighed := map[uint32]bool{}
		for _, r := range rows {
			thread[r.ID] = r.Thread
			v := vertexOf(Thread{addr, r.Thread})
			if !weighed[r.Thread] {
				weighed[r.Thread] = true
				g.weight[v] += r.Weight
			}
		}
		node := nodeOf(addr)
		for _, r := range rows {
			if r.Blocker == "" || r.Thread == 0 {
				continue
			}
			bt, ok := thread[r.Blocker]
			if !ok || bt == 0 {
				continue
			}
			from, to := vertexOf(Thread{addr, r.Thread}), vertexOf(Thread{addr, bt})
			if from == to || slices.ContainsFunc(g.edges[from], func(e edge) bool { return e.to == to && e.addr == addr }) {
				continue
			}
			g.edges[from] = append(g.edges[from], edge{to: to, addr: addr, node: node})
		}
	}
	return g
}

// cycles finds the cross-server cycles of g and a victim for each: after
// a victim is chosen it leaves the graph, and the search goes on, so
// every cycle found is broken by the victims returned.
func (g *graph) cycles() []Cycle {
	var out []Cycle
	gone := make([]bool, len(g.edges))
	for {
		c, ok := g.find(gone)
		if !ok {
			return out
		}
		gone[c.Victim] = true
		out = append(out, c)
	}
}

// find returns one cycle through proxy transactions whose waits lie on
// two servers or more, with its victim.
func (g *graph) find(gone []bool) (Cycle, bool) {
	n := len(g.edges)
	for start := 0; start < len(g.members); start++ {
		if gone[start] {
			continue
		}
		// Depth-first search for a path back to start; paths through
		// proxy transactions and other clients' threads alike.
		onPath := make([]bool, n)
		done := make([]bool, n)
		path := []frame{{start, 0}}
		var via []edge
		onPath[start] = true
		for len(path) > 0 {
			top := &path[len(path)-1]
			if top.next >= len(g.edges[top.v]) {
				onPath[top.v] = false
				done[top.v] = true
				path = path[:len(path)-1]
				if len(via) > 0 {
					via = via[:len(via)-1]
				}
				continue
			}
			e := g.edges[top.v][top.next]
			top.next++
			if gone[e.to] {
				continue
			}
			if e.to == start {
				if c, ok := g.cycle(path, append(via, e)); ok {
					return c, true
				}
				continue
			}
			if onPath[e.to] || done[e.to] {
				continue
			}
			onPath[e.to] = true
			path = append(path, frame{e.to, 0})
			via = append(via, e)
		}
	}
	return Cycle{}, false
}

// cycle turns a closed path into a Cycle when its waits span servers.
func (g *graph) cycle(path []frame, via []edge) (Cycle, bool) {
	var c Cycle
	var addrs []string
	for _, e := range via {
		if !slices.Contains(addrs, e.addr) {
			addrs = append(addrs, e.addr)
		}
		if !slices.Contains(c.Nodes, e.node) {
			c.Nodes = append(c.Nodes, e.node)
		}
	}
	if len(addrs) < 2 {
		return Cycle{}, false // one server's own deadlock: it breaks it
	}
	c.Victim = -1
	for _, f := range path {
		if f.v >= len(g.members) {
			continue
		}
		c.Members = append(c.Members, f.v)
		if c.Victim < 0 || g.lighter(f.v, c.Victim) {
			c.Victim = f.v
		}
	}
	slices.Sort(c.Nodes)
	return c, c.Victim >= 0
}

// lighter reports whether member a is the better victim than b: less
// work done (trx_weight summed over its servers), as InnoDB chooses;
// then the one whose statement began last.
func (g *graph) lighter(a, b int) bool {
	if g.weight[a] != g.weight[b] {
		return g.weight[a] < g.weight[b]
	}
	return g.members[a].Start.After(g.members[b].Start)
}
