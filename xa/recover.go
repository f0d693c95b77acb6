package xa

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// Report is what one recovery round found and did.
type Report struct {
	Prepared    int      // shardgate branches XA RECOVER listed
	Committed   int      // branches committed
	RolledBack  int      // branches rolled back
	Left        int      // branches left to their session or to a live proxy
	Unreachable []string // nodes that did not answer
}

// registration is an xa_instances row as a round starts.
type registration struct {
	fenced, alive bool
	nodes         []string // the nodes its branches can be on; nil when not recorded
}

// Recover finishes the prepared branches nobody else is finishing: this
// instance's that are not in flight, and those of instances that are not
// alive (fenced here first). A branch commits when its transaction has a
// commit decision and rolls back otherwise. Once every node answered and
// every branch was finished, the decisions of instances fenced before the
// round began, and of transactions their sessions left to recovery, are
// deleted. Every action is logged.
func (c *Coordinator) Recover(ctx context.Context) (Report, error) {
	c.recoverMu.Lock()
	defer c.recoverMu.Unlock()
	var rep Report
	own := c.instance.Load()
	started := time.Now()

	res, err := c.exec(ctx, "SELECT id, fenced IS NOT NULL, heartbeat >= "+c.leaseAgo()+", nodes FROM "+c.db+".xa_instances")
	if err != nil {
		return rep, err
	}
	regs := make(map[uint64]registration, len(res.Rows))
	var newest uint64 // registrations after it began after this read
	for _, r := range res.Rows {
		id, _ := strconv.ParseUint(string(r[0]), 10, 64)
		reg := registration{fenced: string(r[1]) == "1", alive: string(r[2]) == "1"}
		if r[3] != nil {
			reg.nodes = strings.Split(string(r[3]), ",")
		}
		regs[id] = reg
		newest = max(newest, id)
	}

	// The prepared branches, node by node, on connections of their own
	// (outside the pools: XA RECOVER and XA COMMIT leave nothing behind,
	// but recovery must not wait behind clients).
	type listed struct {
		node     *backend.Node
		conn     *backend.Conn
		branches []Branch
	}
	var lists []listed
	defer func() {
		for _, l := range lists {
			l.conn.Close()
		}
	}()
	for _, n := range c.o.Nodes() {
		bs, bc, err := list(ctx, n)
		if err != nil {
			rep.Unreachable = append(rep.Unreachable, n.Name)
			c.o.Log.Warn("xa recovery: cannot list prepared branches", zap.String("node", n.Name), zap.Error(err))
			continue
		}
		rep.Prepared += len(bs)
		lists = append(lists, listed{n, bc, bs})
	}

	// What is whose: read after the listing, so a transaction this proxy
	// finished after its branch was listed is seen as finished.
	c.mu.Lock()
	inFlight := func(t Txn) bool { _, ok := c.inFlight[t]; return ok }
	var take []Branch
	fence := map[uint64]bool{}
	for _, l := range lists {
		for _, b := range l.branches {
			r, known := regs[b.Txn.Instance]
			switch {
			case own != 0 && b.Txn.Instance == own:
				if inFlight(b.Txn) {
					rep.Left++
					continue
				}
			case known && !r.fenced && r.alive, !known && b.Txn.Instance > newest:
				rep.Left++ // another live proxy's (or one that registered since)
				continue
			case known && !r.fenced:
				fence[b.Txn.Instance] = true
			}
			take = append(take, b)
		}
	}
	owedBefore := map[Txn]bool{}
	for t, at := range c.owed {
		if at.Before(started) {
			owedBefore[t] = true
		}
	}
	c.mu.Unlock()
	for id, r := range regs {
		if id != own && !r.fenced && !r.alive {
			fence[id] = true // no branches, but its decisions are garbage once fenced
		}
	}

	// Fence before reading decisions: a fenced instance cannot write one
	// any more, so what is read is final.
	for id := range fence {
		res, err := c.exec(ctx, "UPDATE "+c.db+".xa_instances SET fenced = NOW(6) WHERE id = "+strconv.FormatUint(id, 10)+
			" AND fenced IS NULL AND heartbeat < "+c.leaseAgo())
		if err != nil {
			return rep, err
		}
		if res.OK.AffectedRows == 0 {
			// It renewed its registration meanwhile: alive after all.
			take = slices.DeleteFunc(take, func(b Branch) bool {
				if b.Txn.Instance == id {
					rep.Left++
					return true
				}
				return false
			})
			continue
		}
		c.o.Log.Info("xa recovery: fenced an instance that stopped renewing its registration", zap.Uint64("instance", id))
	}

	commit, err := c.commitDecisions(ctx, take)
	if err != nil {
		return rep, err
	}
	// No commit decision is final only once none can be written: an
	// unfenced instance (this one, after a decision whose answer was lost)
	// may have an insert still on its way. An abort row, inserted unless a
	// row is there, settles it; what is there then is the outcome.
	if err := c.settleAborts(ctx, take, commit); err != nil {
		return rep, err
	}
	// What this round listed keeps its decision, whatever happened to
	// it here: XA COMMIT from another connection answers "unknown XID"
	// while the branch is still attached to a session the server has not
	// dropped yet, and only a later listing without it shows it finished.
	listedInst, listedTxn := map[uint64]bool{}, map[Txn]bool{}
	for _, l := range lists {
		for _, b := range l.branches {
			listedInst[b.Txn.Instance], listedTxn[b.Txn] = true, true
		}
	}
	clean := len(rep.Unreachable) == 0
	for _, b := range take {
		l := lists[slices.IndexFunc(lists, func(l listed) bool { return l.node.Name == b.Node })]
		verb := "XA ROLLBACK "
		if commit[b.Gtrid] {
			verb = "XA COMMIT "
		}
		_, err := l.conn.Exec(verb + xidSQL(b.Gtrid, b.Bqual))
		var se *mysql.SQLError
		switch {
		case err == nil:
			if commit[b.Gtrid] {
				rep.Committed++
				c.recCommit.Add(1)
			} else {
				rep.RolledBack++
				c.recAbort.Add(1)
			}
			c.o.Log.Info("xa recovery: finished a prepared branch", zap.String("node", b.Node), zap.String("gtrid", b.Gtrid),
				zap.String("action", strings.TrimSpace(verb)))
		case errors.As(err, &se) && (se.Code == mysql.ErXAERNota || !commit[b.Gtrid] && se.Code == mysql.ErXARBRollback):
			// Finished meanwhile (by its session or another proxy), or
			// rolled back (MariaDB answers XA_RBROLLBACK for a branch
			// that wrote nothing).
		default:
			clean = false
			c.o.Log.Warn("xa recovery: cannot finish a prepared branch", zap.String("node", b.Node), zap.String("gtrid", b.Gtrid),
				zap.String("action", strings.TrimSpace(verb)), zap.Error(err))
		}
	}
	if !clean {
		return rep, nil
	}
	// Every node answered: the decisions of instances fenced before this
	// round, and of the transactions left to recovery before it, are no
	// longer needed once this round listed none of their branches, on
	// every node they could have used (proxies sharing a sidecar need not
	// have the same nodes).
	listedNodes := map[string]bool{}
	for _, l := range lists {
		listedNodes[l.node.Name] = true
	}
	for id, r := range regs {
		if !r.fenced || id == own || listedInst[id] || r.nodes == nil ||
			slices.ContainsFunc(r.nodes, func(n string) bool { return !listedNodes[n] }) {
			continue
		}
		if _, err := c.exec(ctx, "DELETE FROM "+c.db+".xa_decisions WHERE instance = "+strconv.FormatUint(id, 10)); err != nil {
			return rep, err
		}
		if _, err := c.exec(ctx, "DELETE FROM "+c.db+".xa_instances WHERE id = "+strconv.FormatUint(id, 10)); err != nil {
			return rep, err
		}
	}
	for t := range owedBefore {
		if listedTxn[t] {
			continue
		}
		if _, err := c.exec(ctx, "DELETE FROM "+c.db+".xa_decisions WHERE gtrid = "+quote(t.Gtrid())); err != nil {
			return rep, err
		}
		c.mu.Lock()
		delete(c.owed, t)
		c.mu.Unlock()
	}
	return rep, nil
}

// settleAborts inserts an abort decision for every branch's transaction
// that has no commit decision, unless a decision is there by then, and
// reads back the commit decisions that won (into commit).
func (c *Coordinator) settleAborts(ctx context.Context, bs []Branch, commit map[string]bool) error {
	var open []Branch
	seen := map[string]bool{}
	for _, b := range bs {
		if !commit[b.Gtrid] && !seen[b.Gtrid] {
			seen[b.Gtrid] = true
			open = append(open, b)
		}
	}
	for rest := open; len(rest) > 0; {
		n := min(len(rest), 500)
		var q strings.Builder
		q.WriteString("INSERT IGNORE INTO " + c.db + ".xa_decisions (gtrid, instance, outcome) VALUES ")
		for i, b := range rest[:n] {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(" + quote(b.Gtrid) + "," + strconv.FormatUint(b.Txn.Instance, 10) + ",'abort')")
		}
		if _, err := c.exec(ctx, q.String()); err != nil {
			return err
		}
		rest = rest[n:]
	}
	late, err := c.commitDecisions(ctx, open)
	if err != nil {
		return err
	}
	for g := range late {
		commit[g] = true
	}
	return nil
}

// commitDecisions returns which of the branches' transactions have a
// commit decision.
func (c *Coordinator) commitDecisions(ctx context.Context, bs []Branch) (map[string]bool, error) {
	commit := map[string]bool{}
	gs := make([]string, len(bs))
	for i, b := range bs {
		gs[i] = b.Gtrid
	}
	for len(gs) > 0 {
		n := min(len(gs), 500)
		res, err := c.exec(ctx, "SELECT gtrid FROM "+c.db+".xa_decisions WHERE outcome = 'commit' AND gtrid IN "+inList(gs[:n]))
		if err != nil {
			return nil, err
		}
		for _, r := range res.Rows {
			commit[string(r[0])] = true
		}
		gs = gs[n:]
	}
	return commit, nil
}

// list returns the prepared shardgate branches on n (XA RECOVER) and the
// connection that listed them.
func list(ctx context.Context, n *backend.Node) ([]Branch, *backend.Conn, error) {
	bc, err := n.Dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	res, err := bc.Exec("XA RECOVER")
	if err != nil {
		bc.Close()
		return nil, nil, err
	}
	var bs []Branch
	for _, r := range res.Rows {
		if len(r) != 4 {
			bc.Close()
			return nil, nil, fmt.Errorf("XA RECOVER on node %s: %d columns", n.Name, len(r))
		}
		format, _ := strconv.Atoi(string(r[0]))
		gl, _ := strconv.Atoi(string(r[1]))
		bl, _ := strconv.Atoi(string(r[2]))
		data := r[3]
		if format != FormatID || gl < 0 || bl < 0 || gl+bl != len(data) {
			continue // another transaction manager's
		}
		b := Branch{Node: n.Name, Gtrid: string(data[:gl]), Bqual: string(data[gl:])}
		t, ok := parseGtrid(b.Gtrid)
		if !ok {
			continue
		}
		b.Txn = t
		bs = append(bs, b)
	}
	return bs, bc, nil
}

// Pending lists the prepared shardgate branches on the nodes, node by
// node, as XA RECOVER shows them (the tests' view of what is left).
func Pending(ctx context.Context, nodes []*backend.Node) ([]Branch, error) {
	var all []Branch
	for _, n := range nodes {
		bs, bc, err := list(ctx, n)
		if err != nil {
			return all, fmt.Errorf("node %s: %w", n.Name, err)
		}
		bc.Close()
		all = append(all, bs...)
	}
	return all, nil
}
