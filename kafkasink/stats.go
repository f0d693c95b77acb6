package kafkasink

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// Stats is a sink's progress: what it committed to Kafka, and how far
// each node's binary log is ahead of that.
type Stats struct {
	Nodes []NodeStats
	// Commits, Transactions, Records and Bytes count the Kafka
	// transactions committed, the source transactions they covered, and
	// their records (positions included) and bytes of keys and values.
	Commits, Transactions, Records, Bytes int64
	// Changes counts the committed records of changes (snapshot rows
	// included; positions, tombstones and DDL not).
	Changes int64
	// SnapshotRows counts the op "r" records produced.
	SnapshotRows int64
	// Err is the error Run returned, if it failed.
	Err string
}

// NodeStats is one node's lag.
type NodeStats struct {
	Node string
	// Pos is the node's position committed in Kafka.
	Pos string
	// Behind is how many transactions the node's binary log has past Pos
	// (per GTID domain, summed), polled every second; -1 before the first
	// poll or while the node cannot be reached.
	Behind int64
	// LagSeconds is how long ago the oldest transaction the sink has
	// received but not committed was written to the binary log (its
	// binlog timestamp, whole seconds); 0 when every transaction read is
	// committed.
	LagSeconds float64
	// Committed is when the node's position last advanced in Kafka.
	Committed time.Time

	oldest int64 // binlog time of the oldest uncommitted transaction, 0 if none
}

// Stats returns a copy of the sink's progress; safe while Run runs.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Nodes = slices.Clone(st.Nodes)
	now := time.Now().Unix()
	for i := range st.Nodes {
		if o := st.Nodes[i].oldest; o > 0 && now > o {
			st.Nodes[i].LagSeconds = float64(now - o)
		}
	}
	return st
}

// node returns the stats of node, adding them; s.mu is held.
func (s *Sink) node(name string) *NodeStats {
	for i := range s.stats.Nodes {
		if s.stats.Nodes[i].Node == name {
			return &s.stats.Nodes[i]
		}
	}
	s.stats.Nodes = append(s.stats.Nodes, NodeStats{Node: name, Behind: -1})
	return &s.stats.Nodes[len(s.stats.Nodes)-1]
}

// setCommitted records the positions read at start.
func (s *Sink) setCommitted(pos map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, src := range s.sources {
		s.node(src.Node).Pos = pos[src.Node]
	}
}

// received notes the binlog time of a transaction read but not committed.
func (s *Sink) received(node string, t int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.node(node); n.oldest == 0 {
		n.oldest = t
	}
}

// committed records a commit of a batch.
func (s *Sink) committed(pos map[string]string, txns int, records, changes int64, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for node, p := range pos {
		n := s.node(node)
		n.Pos, n.Committed, n.oldest = p, now, 0
	}
	s.stats.Commits++
	s.stats.Transactions += int64(txns)
	s.stats.Records += records
	s.stats.Changes += changes
	s.stats.Bytes += int64(bytes)
}

func (s *Sink) snapshotRow() {
	s.mu.Lock()
	s.stats.SnapshotRows++
	s.mu.Unlock()
}

// pollBehind reads each node's @@gtid_binlog_pos every second until ctx
// ends and sets Behind from it and the committed position.
func (s *Sink) pollBehind(ctx context.Context) {
	dbs := make([]*sql.DB, len(s.sources))
	for i, src := range s.sources {
		c := gomysql.NewConfig()
		c.User, c.Passwd, c.Net, c.Addr, c.Timeout = src.User, src.Password, "tcp", src.Addr, 2*time.Second
		db, err := sql.Open("mysql", c.FormatDSN())
		if err != nil {
			continue
		}
		db.SetMaxOpenConns(1)
		defer db.Close()
		dbs[i] = db
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for i, src := range s.sources {
			behind := int64(-1)
			var head string
			if dbs[i] != nil && dbs[i].QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&head) == nil {
				s.mu.Lock()
				behind = gtidBehind(head, s.node(src.Node).Pos)
				s.mu.Unlock()
			}
			s.mu.Lock()
			s.node(src.Node).Behind = behind
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gtidBehind is how many transactions the GTID position head has past
// pos: per domain, head's sequence number minus pos's, summed.
func gtidBehind(head, pos string) int64 {
	seqs := func(p string) map[string]int64 {
		m := map[string]int64{}
		for _, g := range strings.Split(p, ",") {
			parts := strings.Split(strings.TrimSpace(g), "-")
			if len(parts) != 3 {
				continue
			}
			if n, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
				m[parts[0]] = n
			}
		}
		return m
	}
	h, p := seqs(head), seqs(pos)
	var n int64
	for d, seq := range h {
		if seq > p[d] {
			n += seq - p[d]
		}
	}
	return n
}
