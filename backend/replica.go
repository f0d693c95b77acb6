package backend

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardgate/shardgate/config"
)

// Replica is one of a node's read replicas (kingshard's `slave` entries):
// a pool of its own with its own health checks, and what the last check
// saw of its replication. The proxy never writes through it.
type Replica struct {
	*Node
	// weight is the replica's share of the node's reads (Weight).
	weight atomic.Int64
	// Primary is the node whose master it replicates.
	Primary *Node

	status atomic.Pointer[ReplicaStatus]
	reads  atomic.Uint64
}

// ReplicaStatus is what a replica's last check found.
type ReplicaStatus struct {
	// Usable is set when both replication threads run and the lag is
	// within max_replica_lag; Why says otherwise.
	Usable bool
	Why    string
	// Lag is Seconds_Behind_Master; -1 when the server reports none.
	Lag time.Duration
	// GTIDPos is the replica's gtid_slave_pos: every transaction up to it
	// has been applied.
	GTIDPos string
	// Promoted is set when the check reached the replica and found it
	// writable (read_only off) with no replication thread running: what a
	// replica an operator promoted looks like (followPromotion). A check
	// that failed, or a suspected replica, is never Promoted.
	Promoted bool
	At       time.Time
}

// newReplica builds the pool of one replica of n.
func newReplica(n *Node, r config.Replica, onHealth HealthFunc) *Replica {
	cfg := n.cfg
	cfg.Master, cfg.Slave = r.Addr, ""
	rn := NewNode(cfg, n.opts, onHealth)
	rn.Name = n.Name + "/" + r.Addr
	rep := &Replica{Node: rn, Primary: n}
	rep.weight.Store(int64(r.Weight))
	rep.status.Store(&ReplicaStatus{Why: "not checked yet", Lag: -1})
	rn.replica = rep
	return rep
}

// Primary returns, for the pool of a replica, the node it replicates; nil
// for a node's master.
func (n *Node) Primary() *Node {
	if n.replica == nil {
		return nil
	}
	return n.replica.Primary
}

// ReplicaWait is how long a read waits on a replica for a session's last
// write (replica_wait).
func (n *Node) ReplicaWait() time.Duration { return n.opts.ReplicaWait }

// Replicas returns the node's replicas in configuration order.
func (n *Node) Replicas() []*Replica {
	if p := n.replicas.Load(); p != nil {
		return *p
	}
	return nil
}

// SetReplicas makes list the node's replicas (a reload): replicas kept
// keep their pools, counters and weights from list; new ones start; the
// pools of removed ones close (connections in use close when they come
// back).
func (n *Node) SetReplicas(list []config.Replica) (added, removed int) {
	n.replicaMu.Lock()
	defer n.replicaMu.Unlock()
	old := n.Replicas()
	byAddr := make(map[string]*Replica, len(old))
	for _, r := range old {
		byAddr[r.Addr()] = r
	}
	var next []*Replica
	var fresh []*Replica
	for _, c := range list {
		if r := byAddr[c.Addr]; r != nil {
			delete(byAddr, c.Addr)
			r.weight.Store(int64(c.Weight))
			next = append(next, r)
			continue
		}
		r := newReplica(n, c, n.onHealth)
		next = append(next, r)
		fresh = append(fresh, r)
	}
	n.replicas.Store(&next)
	for _, r := range fresh {
		r.Start()
	}
	for _, r := range byAddr {
		r.Close()
	}
	return len(fresh), len(byAddr)
}

// Weight is the replica's share of the node's reads.
func (r *Replica) Weight() int { return int(r.weight.Load()) }

// Status returns what the replica's last check found.
func (r *Replica) Status() ReplicaStatus {
	st := *r.status.Load()
	if !r.Up() {
		st.Usable, st.Why = false, "down"
	}
	return st
}

// Replica returns the replica whose pool n is, nil for a master.
func (n *Node) Replica() *Replica { return n.replica }

// Suspect takes the replica out of the reads until its next check finds
// it healthy: a connection to it failed.
func (r *Replica) Suspect(err error) {
	r.status.Store(&ReplicaStatus{Why: "a connection failed: " + err.Error(), Lag: -1, At: time.Now()})
	r.gen.Add(1) // idle connections are pinged before reuse
}

// Reads counts the connections handed out for reads.
func (r *Replica) Reads() uint64 { return r.reads.Load() }

// PickReplica chooses a replica for a read by weight among those that are
// up and usable. With gtid set (the session's last write on this node),
// replicas that have applied it are preferred; covered reports whether
// the chosen one has (as of its last check). nil when none qualifies.
func (n *Node) PickReplica(gtid string) (r *Replica, covered bool) {
	var (
		cands  [8]*Replica
		list   = cands[:0]
		total  int
		anyCov bool
	)
	for _, rep := range n.Replicas() {
		st := rep.status.Load()
		if !st.Usable || !rep.Up() {
			continue
		}
		cov := gtid == "" || GTIDCovers(st.GTIDPos, gtid)
		if cov && !anyCov {
			// The first replica that has the write: start over with
			// only such replicas.
			list, total, anyCov = list[:0], 0, true
		}
		if anyCov && !cov {
			continue
		}
		list = append(list, rep)
		total += rep.Weight()
	}
	if len(list) == 0 {
		return nil, false
	}
	pick := rand.IntN(total)
	for _, rep := range list {
		if w := rep.Weight(); pick < w {
			rep.reads.Add(1)
			return rep, anyCov
		} else {
			pick -= w
		}
	}
	return nil, false // not reached
}

// GTIDCovers reports whether a replica at position pos (a MariaDB GTID
// list, "domain-server-seq,...") has applied want: one GTID (a session's
// last commit) or a list of them (a master's @@gtid_binlog_pos), each
// covered when pos holds its domain with a sequence number at least its.
// An empty want is covered by any position.
func GTIDCovers(pos, want string) bool {
	if want == "" {
		return true
	}
	for g := range strings.SplitSeq(want, ",") {
		dom, seq, ok := splitGTID(strings.TrimSpace(g))
		if !ok || !domainCovers(pos, dom, seq) {
			return false
		}
	}
	return true
}

// domainCovers reports whether position pos holds domain dom at sequence
// number seq or later.
func domainCovers(pos string, dom uint32, seq uint64) bool {
	for g := range strings.SplitSeq(pos, ",") {
		d, s, ok := splitGTID(strings.TrimSpace(g))
		if ok && d == dom {
			return s >= seq
		}
	}
	return false
}

// splitGTID parses "domain-server-seq" into its domain and sequence number.
func splitGTID(g string) (domain uint32, seq uint64, ok bool) {
	parts := strings.Split(g, "-")
	if len(parts) != 3 {
		return 0, 0, false
	}
	d, err1 := strconv.ParseUint(parts[0], 10, 32)
	_, err3 := strconv.ParseUint(parts[1], 10, 32)
	s, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	return uint32(d), s, true
}

// gtidList returns list (GTIDs separated by commas, as @@gtid_binlog_pos
// writes them) without spaces, and whether every element is a GTID: only
// then may it go into the SQL text.
func gtidList(list string) (string, bool) {
	if list == "" {
		return "", false
	}
	if !strings.Contains(list, " ") {
		for g := range strings.SplitSeq(list, ",") {
			if _, _, ok := splitGTID(g); !ok {
				return "", false
			}
		}
		return list, true
	}
	var b strings.Builder
	for g := range strings.SplitSeq(list, ",") {
		g = strings.TrimSpace(g)
		if _, _, ok := splitGTID(g); !ok {
			return "", false
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(g)
	}
	return b.String(), true
}

// checkReplication reads the replica's replication state on c (a fresh
// connection of its health check) and records it with gtidPos, its
// gtid_slave_pos read with the rest of its variables.
func (r *Replica) checkReplication(c *Conn, gtidPos string) {
	st := &ReplicaStatus{Lag: -1, At: time.Now(), GTIDPos: gtidPos}
	defer func() { r.status.Store(st) }()
	res, err := c.Exec("SHOW SLAVE STATUS")
	if err != nil {
		st.Why = "SHOW SLAVE STATUS failed: " + err.Error()
		return
	}
	if len(res.Rows) == 0 {
		st.Why = "not replicating (SHOW SLAVE STATUS is empty)"
		st.Promoted = !r.readOnly.Load()
		return
	}
	col := func(name string) (string, bool) {
		for i, d := range res.Columns {
			if d.Name == name && i < len(res.Rows[0]) {
				v := res.Rows[0][i]
				return string(v), v != nil
			}
		}
		return "", false
	}
	io, _ := col("Slave_IO_Running")
	sqlRunning, _ := col("Slave_SQL_Running")
	if lag, ok := col("Seconds_Behind_Master"); ok {
		if s, err := strconv.Atoi(lag); err == nil {
			st.Lag = time.Duration(s) * time.Second
		}
	}
	st.Promoted = !r.readOnly.Load() && io != "Yes" && io != "Connecting" && sqlRunning != "Yes"
	max := r.opts.MaxReplicaLag
	switch {
	case io != "Yes":
		st.Why = fmt.Sprintf("replication IO thread is %q", io)
	case sqlRunning != "Yes":
		st.Why = fmt.Sprintf("replication SQL thread is %q", sqlRunning)
	case st.Lag < 0:
		st.Why = "Seconds_Behind_Master is NULL"
	case st.Lag > max:
		st.Why = fmt.Sprintf("lags %v behind its master (max_replica_lag %v)", st.Lag, max)
	default:
		st.Usable = true
	}
}

// WaitGTID waits on c, a connection to a replica, until the replica has
// applied gtid (one GTID, or a position: a list with one GTID per
// domain) or the timeout passes (MASTER_GTID_WAIT); it reports whether it
// has.
func WaitGTID(c *Conn, gtid string, timeout time.Duration) bool {
	list, ok := gtidList(gtid)
	if !ok {
		return false // also keeps anything but digits, dashes and commas out of the SQL
	}
	res, err := c.Exec(fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', %.3f)", list, timeout.Seconds()))
	return err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == 1 && string(res.Rows[0][0]) == "0"
}

// BinlogPos reads, on c (a connection to a node's master), the position a
// replica must reach to have applied every transaction the master had
// committed: @@gtid_binlog_pos, the last GTID the master wrote to its
// binary log in each domain, which is what its replicas apply. Not
// @@gtid_current_pos: on a master that once replicated without
// log_slave_updates it also holds domains that are in no binary log, and
// a replica would wait for them in vain. "" (a master that never wrote a
// transaction) needs no wait.
func BinlogPos(c *Conn) (string, error) {
	res, err := c.Exec("SELECT @@gtid_binlog_pos")
	if err != nil {
		return "", err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return "", fmt.Errorf("SELECT @@gtid_binlog_pos on %s returned %d rows", c.Node().Name, len(res.Rows))
	}
	pos := string(res.Rows[0][0])
	if pos == "" {
		return "", nil
	}
	list, ok := gtidList(pos)
	if !ok {
		return "", fmt.Errorf("@@gtid_binlog_pos on %s is %q, not a GTID list", c.Node().Name, pos)
	}
	return list, nil
}

// followPromotion moves the node's writes to a replica that was promoted:
// when the master is read-only or down, and exactly one replica is up,
// writable (read_only off) and no longer replicating, that replica is the
// master now, as the servers say (the check ProxySQL's monitor makes).
// Called after each health check of a node with replicas.
func (n *Node) followPromotion() {
	if n.fleetMaster.Load() || !n.readOnly.Load() && n.up.Load() {
		return
	}
	var cand *Replica
	for _, r := range n.Replicas() {
		st := r.status.Load()
		if !st.Promoted || !r.Up() || r.Addr() == n.Addr() {
			continue
		}
		if cand != nil {
			return // two writable candidates: the servers do not say which
		}
		cand = r
	}
	if cand != nil {
		n.SwitchMaster(cand.Addr())
	}
}

// SwitchMaster makes addr the node's master: new statements go there,
// idle connections to the old master are closed, and connections in use
// are closed when they come back; a session that holds one (a transaction,
// session state) learns it at its next statement (Conn.Stale).
func (n *Node) SwitchMaster(addr string) {
	old := n.Addr()
	if addr == old {
		return
	}
	n.addr.Store(&addr)
	n.moved.Add(1)
	n.gen.Add(1)
	n.readOnly.Store(false)
	n.closeIdle()
	n.up.Store(true)
	if n.onHealth != nil {
		n.onHealth(n.Name, true, fmt.Errorf("master moved from %s to %s", old, addr))
	}
}

// CheckSoon asks for a health check of the node and its replicas now,
// without waiting for it.
func (n *Node) CheckSoon() {
	for _, r := range n.Replicas() {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// AwaitMove waits up to master_switch_wait for the node's master to move
// away from from (a write met a read-only master: a switchover may be under
// way), checking the servers every 50 ms; it reports whether it moved.
func (n *Node) AwaitMove(from string) bool {
	deadline := time.Now().Add(n.opts.MasterSwitchWait)
	for {
		if n.Addr() != from {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		n.CheckSoon()
		select {
		case <-n.ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ReadOnly reports whether the node's master was read-only at its last
// check, or refused a write as read-only since (NoteReadOnly).
func (n *Node) ReadOnly() bool { return n.readOnly.Load() }

// NoteReadOnly records that the master refused a write as read-only (a
// switchover may be under way) and checks the servers now.
func (n *Node) NoteReadOnly() {
	n.readOnly.Store(true)
	n.CheckSoon()
}
