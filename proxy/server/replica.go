package server

import (
	"errors"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
)

// readSplit reports whether the session's schema sends reads to replicas;
// it also sets the session's read_consistency, again after a reload.
func (c *conn) readSplit() bool {
	lv := c.srv.lv()
	if c.rwVersion != lv.version {
		c.rwVersion, c.rwSplit = lv.version, false
		if sc := lv.cfg.SchemaFor(c.user); sc != nil {
			c.st.Consistency = sc.Consistency()
			c.rwSplit = sc.ReadSplit() && c.srv.hasReplicas.Load()
		} else {
			c.st.Consistency = config.ConsistencyStrong
		}
	}
	return c.rwSplit
}

// replicaLost reports whether err is a replica connection that failed (it
// is marked unusable until its next check says otherwise).
func replicaLost(err error) bool {
	var lost *backend.LostError
	if !errors.As(err, &lost) {
		return false
	}
	r := lost.Conn.Node().Replica()
	if r == nil {
		return false
	}
	r.Suspect(lost)
	return true
}

// errReadOnlyMaster is readOnlyGuard's answer: the master refused the
// statement with 1290 (read-only), before the client saw anything.
var errReadOnlyMaster = errors.New("the master is read-only")

// readOnlyGuard relays like inner, except that an ERR 1290 (read-only)
// from a node's master marks the node read-only (a switchover may be under
// way) and, with intercept, is kept from the client and returned as
// errReadOnlyMaster: the statement did not run, and may run again on the
// master the node moves to.
func readOnlyGuard(inner engine.Relay, intercept bool) engine.Relay {
	return func(x *engine.Executor, bc *backend.Conn) (backend.Outcome, error) {
		code, isErr, err := bc.PeekErrCode()
		if err == nil && isErr && code == mysql.ErOptionPreventsStatement && bc.Node().Primary() == nil {
			bc.Node().NoteReadOnly()
			if intercept {
				if _, err := bc.ReadPacket(); err != nil {
					return backend.Outcome{}, err
				}
				return backend.Outcome{}, errReadOnlyMaster
			}
		}
		return inner(x, bc)
	}
}

// watchesReadOnly reports whether statements for node watch for a
// read-only master: it has replicas, so a switchover can happen.
func (h *handler) watchesReadOnly(node string) bool {
	c := h.c
	if !c.srv.hasReplicas.Load() || c.srv.cfg().Backend.MasterSwitchWait <= 0 {
		return false
	}
	n := c.srv.node(node)
	return n != nil && len(n.Replicas()) > 0
}

// beforeMasterStatement prepares a statement for node's master: when the
// session has nothing there yet it returns the master's address (the
// statement can run again after a switch) and, inside a transaction on a
// master known to be read-only, first waits for the switch, so the
// transaction begins on the master that will take its writes.
func (h *handler) beforeMasterStatement(node string) (from string) {
	if !h.watchesReadOnly(node) || h.c.st.HoldsNode(node) {
		return ""
	}
	n := h.c.srv.node(node)
	from = n.Addr()
	if h.c.st.InTxn() && n.ReadOnly() {
		n.AwaitMove(from)
		from = n.Addr()
	}
	return from
}

// afterReadOnly waits for node's master to move away from the read-only
// one at from and runs the statement again there (run); without a move
// in master_switch_wait the client gets the server's 1290.
func (h *handler) afterReadOnly(node, from string, run func() (backend.Outcome, error)) (backend.Outcome, error) {
	n := h.c.srv.node(node)
	if n.AwaitMove(from) {
		return run()
	}
	return backend.Outcome{}, mysql.NewError(mysql.ErOptionPreventsStatement,
		"The MariaDB server is running with the --read-only option so it cannot execute this statement")
}
