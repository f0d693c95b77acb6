package session

import (
	"fmt"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// ReadMode says whether the next statement may read from a replica.
type ReadMode uint8

const (
	// ReadMaster: the statement goes to the master (writes, state
	// changes, anything not known to be a plain read).
	ReadMaster ReadMode = iota
	// ReadFollow: a read that may use a replica connection the session
	// still holds from the statement before (SHOW WARNINGS after a read
	// there), but does not pick a replica itself.
	ReadFollow
	// ReadReplica: a plain read that may go to a replica.
	ReadReplica
)

// readState is where the session's reads go: the statement under way's
// read mode, the schema's read_consistency, and per node the GTID of the
// session's last commit there (read-your-writes). It is part of State
// (embedded).
type readState struct {
	s *State
	// ReplicaReads counts the reads the session sent to replicas (for the
	// metrics of where statements ran).
	ReplicaReads uint64

	// Read says whether the statement under way may read from a replica
	// (set by the caller for each statement); Consistency is the schema's
	// read_consistency. gtids holds, per node, the GTID of the session's
	// last commit there.
	Read        ReadMode
	Consistency string
	gtids       map[string]string
}

// replicaAllowed reports whether the session may read from a replica
// now: outside transactions, with nothing the session keeps on a
// connection of its own.
func (rs *readState) replicaAllowed() bool {
	s := rs.s
	return s.Consistency != config.ConsistencyStrong && s.dedicated == nil && !s.sticky && !s.InTxn() &&
		s.Status&mysql.StatusAutocommit != 0 && len(s.locked) == 0
}

// replicaConn returns a connection to a replica of n for the next read,
// or nil when the read goes to the master: no replica is usable, or none
// has applied what the read must see, even after waiting replica_wait for
// one: under read_consistency session the session's last write on n,
// under universal the master's position read now (every write committed
// before the read arrived, through any proxy).
func (rs *readState) replicaConn(n *backend.Node) *backend.Conn {
	s := rs.s
	if len(n.Replicas()) == 0 || !s.replicaAllowed() {
		return nil
	}
	var gtid string
	switch s.Consistency {
	case config.ConsistencyEventual:
	case config.ConsistencyUniversal:
		pos, ok := rs.masterPos(n)
		if !ok {
			return nil
		}
		gtid = pos
	default:
		gtid = s.gtids[n.Name]
	}
	r, covered := n.PickReplica(gtid)
	if r == nil {
		return nil
	}
	bc, err := r.Get(s.ctx, s.Variant, s.DB, s.Coll)
	if err != nil {
		return nil
	}
	if gtid != "" && !covered {
		if wait := n.ReplicaWait(); wait <= 0 || !backend.WaitGTID(bc, gtid, wait) {
			r.Put(bc)
			return nil
		}
	}
	s.ReplicaReads++
	return bc
}

// masterPos reads the binary log position of n's master for a read under
// read_consistency universal, on a pooled connection given back at once;
// false when the master cannot say (the read goes to the master, which
// answers it or gives the client its error).
func (rs *readState) masterPos(n *backend.Node) (string, bool) {
	s := rs.s
	bc, err := n.Get(s.ctx, s.Variant, s.DB, s.Coll)
	if err != nil {
		return "", false
	}
	pos, err := backend.BinlogPos(bc)
	n.Put(bc)
	return pos, err == nil
}

// replicaPinnedOn returns the connection to a replica of n the session
// keeps (a read there left warnings), if any.
func (rs *readState) replicaPinnedOn(n *backend.Node) *backend.Conn {
	s := rs.s
	for _, bc := range s.pinned {
		if bc.Node().Primary() == n {
			return bc
		}
	}
	return nil
}

// noteGTID records the GTID of a commit on bc's node (last_gtid): reads
// under read_consistency session wait for replicas to have applied it.
func (rs *readState) noteGTID(bc *backend.Conn, gtid string) {
	s := rs.s
	n := bc.Node()
	if n.Primary() != nil || gtid == "" {
		return // a replica's own GTIDs are not the session's writes
	}
	if s.gtids == nil {
		s.gtids = make(map[string]string, 2)
	}
	s.gtids[n.Name] = gtid
}

// masterMoved deals with a connection the session holds to a server that
// is no longer its node's master. An open transaction is rolled back
// everywhere and the statement gets 1927 (the client retries it, as after
// a deadlock); session state that lived only there is lost as in a crash
// (the caller closes the client's connection); a connection kept for
// nothing but warnings is simply dropped.
func (rs *readState) masterMoved(bc *backend.Conn) (*backend.Conn, error) {
	s := rs.s
	n := bc.Node()
	s.unpin(bc)
	bc.MarkBroken()
	n.Put(bc)
	switch {
	case s.InTxn():
		_ = s.End(false) // the other nodes' part of it, if any
		return nil, mysql.NewError(mysql.ErConnectionKilled, "Connection was killed: the master of node %s moved to %s during this transaction, which was rolled back; run it again", n.Name, n.Addr())
	case s.sticky:
		return nil, &backend.LostError{Conn: bc, Cause: fmt.Errorf("the master of node %s moved to %s", n.Name, n.Addr())}
	}
	return nil, nil
}

// HoldsNode reports whether the session keeps a connection to node's
// master (a transaction or session state there).
func (s *State) HoldsNode(node string) bool { return s.pinnedOn(s.node(node)) != nil }
