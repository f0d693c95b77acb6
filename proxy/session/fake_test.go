package session_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/fakebackend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
	"github.com/shardgate/shardgate/xa"
)

// The transition tests run a session.State against real backend.Node pools
// that dial fake servers (internal/fakebackend), one per node. A test is a
// sequence of steps, each one session call, or one client statement run as
// proxy/server runs it (Acquire, the statement, Release with what its
// answer said); it then compares, for every connection each fake accepted,
// what it received and where it ended: held by the session, back in its
// pool, or closed.

// nodeNames are the nodes every harness has; a case uses those it needs
// (a node no statement reaches has no connection).
var nodeNames = []string{"n1", "n2", "n3"}

// db is the session's database: connections are dialled into it, so a
// statement needs no COM_INIT_DB unless the session changes it.
const db = "app"

// harness is one client session and the fakes behind its nodes.
type harness struct {
	t     *testing.T
	fakes map[string]*fakebackend.Server
	nodes map[string]*backend.Node
	mode  string
	s     *session.State

	// sidecar and co are the XA decision log's fake and the coordinator
	// (transaction_mode xa only).
	sidecar *fakebackend.Server
	co      *xa.Coordinator

	gtrids map[string]string // gtrid -> g1, g2, ... in order of appearance
	// journal is the order in which the nodes' fakes received commands.
	journal fakebackend.Journal
	// order lists the fakes whose connections conns describes, nodeOf
	// the pool each one's connections belong to (a node's master, a new
	// master after a switch, a replica's pool), skip how many of a fake's
	// first connections to leave out (a replica's health check).
	order  []string
	nodeOf map[string]*backend.Node
	skip   map[string]int
	// split: reads may go to replicas (the schema splits reads).
	split bool
}

// xaDB is the sidecar database of the harness's coordinator; xaInstance its
// registration id there.
const (
	xaDB       = "sg_xa"
	xaInstance = 7
)

func newHarness(t *testing.T, mode string) *harness {
	t.Helper()
	if mode == "" {
		mode = config.TransactionMulti
	}
	h := &harness{t: t, fakes: map[string]*fakebackend.Server{}, nodes: map[string]*backend.Node{}, mode: mode,
		gtrids: map[string]string{}, nodeOf: map[string]*backend.Node{}, skip: map[string]int{}}
	opts := config.Default().Backend
	opts.AcquireTimeout = 2 * time.Second
	opts.DialTimeout = 5 * time.Second
	opts.CommandTimeout = 10 * time.Second // a fake that stops answering fails the test, not hangs it
	opts.PingAfterIdle = 0                 // no time-dependent PING in the logs
	opts.IdleTimeout, opts.MaxLifetime = 0, 0
	opts.HealthInterval = time.Hour // a replica's health checks: one, at its start
	for i, name := range nodeNames {
		f := fakebackend.Start(t, uint32(i+1)*100+1) // n1's connections are 101, 102, ...
		h.fakes[name] = f
		f.JournalTo(&h.journal, name)
		// No Start: no health checks (their connections would show in
		// the fakes), and nothing to Close.
		h.nodes[name] = backend.NewNode(config.Node{Name: name, Master: f.Addr(), User: "app", Password: "pw",
			MaxConnsLimit: 8, DownAfterNoalive: 1}, opts, nil)
		h.order = append(h.order, name)
		h.nodeOf[name] = h.nodes[name]
	}
	if mode == config.TransactionXA {
		h.startXA(opts)
	}
	h.s = h.newSession()
	return h
}

// newSession returns a session of a client that just logged in to db.
func (h *harness) newSession() *session.State {
	s := session.New(h.nodes, false, 45, 0, true) // utf8mb4_general_ci, as the pools dial
	s.SetTxnMode(h.mode, h.co)
	s.DB = db
	return s
}

// startXA starts a coordinator whose sidecar is a fake that registers it
// as instance 7 and writes every commit decision.
func (h *harness) startXA(opts config.BackendOptions) {
	h.sidecar = fakebackend.Start(h.t, 901)
	h.sidecar.On("INSERT INTO `"+xaDB+"`.xa_instances", fakebackend.Reply{InsertID: xaInstance, Affected: 1})
	h.sidecar.On("SELECT id, fenced", fakebackend.Reply{Columns: varchars("id", "fenced", "alive", "nodes"), Rows: [][]any{}})
	h.sidecar.On("INSERT INTO `"+xaDB+"`.xa_decisions", fakebackend.Reply{Affected: 1})
	h.sidecar.On("SELECT gtrid", fakebackend.Reply{Columns: varchars("gtrid"), Rows: [][]any{}})
	sc := backend.NewNode(config.Node{Name: "sidecar", Master: h.sidecar.Addr(), User: "app", Password: "pw", MaxConnsLimit: 8}, opts, nil)
	h.co = xa.New(xa.Options{Sidecar: sc, DB: xaDB, Nodes: func() []*backend.Node { return nil }, Name: "test",
		Interval: time.Hour, Lease: time.Hour})
	h.co.Start(context.Background())
	h.t.Cleanup(h.co.Close)
	if got := h.co.Instance(); got != xaInstance {
		h.t.Fatalf("the coordinator registered as instance %d, want %d", got, xaInstance)
	}
}

func varchars(names ...string) []*mysql.Column {
	cols := make([]*mysql.Column, len(names))
	for i, n := range names {
		cols[i] = &mysql.Column{Name: n, Type: mysql.TypeVarString, Charset: 33, Length: 255}
	}
	return cols
}

// answer scripts node's fake: commands starting with prefix get reply
// (times times; 0: always).
type answer struct {
	node, prefix string
	reply        fakebackend.Reply
	times        int
}

func (h *harness) script(as []answer) {
	for _, a := range as {
		f := h.fakes[a.node]
		if a.node == "sidecar" {
			f = h.sidecar
		}
		if a.times > 0 {
			f.OnN(a.prefix, a.times, a.reply)
		} else {
			f.On(a.prefix, a.reply)
		}
	}
}

// step is one thing the client (or the server on its behalf) does.
type step struct {
	name string
	do   func(h *harness) error
	// want checks the step's error; nil: it must succeed.
	want func(err error) string
}

// fails expects an error with code whose message holds each of parts.
func (st step) fails(code uint16, parts ...string) step {
	st.want = func(err error) string {
		var se *mysql.SQLError
		if !errors.As(err, &se) || se.Code != code {
			return fmt.Sprintf("error %v, want code %d", err, code)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				return fmt.Sprintf("error %q does not say %q", err, p)
			}
		}
		return ""
	}
	return st
}

// lost expects a *backend.LostError: a connection the session used died.
func (st step) lost() step {
	st.want = func(err error) string {
		var le *backend.LostError
		if !errors.As(err, &le) {
			return fmt.Sprintf("error %v, want a lost connection", err)
		}
		return ""
	}
	return st
}

// unknown expects session.ErrCommitUnknown: the commit may have happened.
func (st step) unknown() step {
	st.want = func(err error) string {
		if !errors.Is(err, session.ErrCommitUnknown) {
			return fmt.Sprintf("error %v, want ErrCommitUnknown", err)
		}
		return ""
	}
	return st
}

// failsAny expects some error.
func (st step) failsAny() step {
	st.want = func(err error) string {
		if err == nil {
			return "succeeded, want an error"
		}
		return ""
	}
	return st
}

func (h *harness) run(steps []step) {
	h.t.Helper()
	for i, st := range steps {
		err := st.do(h)
		switch {
		case st.want != nil:
			if msg := st.want(err); msg != "" {
				h.t.Fatalf("step %d (%s): %s", i+1, st.name, msg)
			}
		case err != nil:
			h.t.Fatalf("step %d (%s): %v", i+1, st.name, err)
		}
	}
}

// Steps.

func begin(sql string) step {
	return step{name: sql, do: func(h *harness) error {
		txn := router.ParseTxn(sql)
		if txn.Verb != router.TxnBegin {
			return fmt.Errorf("%q is not a BEGIN", sql)
		}
		return h.s.Begin(txn)
	}}
}

func commit() step {
	return step{name: "COMMIT", do: func(h *harness) error { return h.s.End(true) }}
}

func rollback() step {
	return step{name: "ROLLBACK", do: func(h *harness) error { return h.s.End(false) }}
}

// savepoint runs SAVEPOINT, ROLLBACK TO or RELEASE SAVEPOINT.
func savepoint(sql string) step {
	return step{name: sql, do: func(h *harness) error {
		txn := router.ParseTxn(sql)
		return h.s.Savepoint(txn.Verb, txn.Name, txn.SQL)
	}}
}

// on runs a client statement routed to nodes (one: forwarded; several: a
// write on each), as proxy/server runs it: the router's facts, Before, the
// statement on each node's connection (Acquire, the statement, Release
// with what its answer said), then After.
func on(sql string, nodes ...string) step {
	return step{name: strings.Join(nodes, ",") + ": " + sql, do: func(h *harness) error { return h.statement(sql, nodes) }}
}

// implicitCommit is what DDL does first.
func implicitCommit() step {
	return step{name: "CommitImplicitly", do: func(h *harness) error { return h.s.CommitImplicitly() }}
}

func outsideTxn(on bool) step {
	return step{name: fmt.Sprintf("SetOutsideTxn(%v)", on), do: func(h *harness) error { h.s.SetOutsideTxn(on); return nil }}
}

func unlock() step {
	return step{name: "UNLOCK TABLES", do: func(h *harness) error { return h.s.Unlock() }}
}

func keep() step {
	return step{name: "Keep", do: func(h *harness) error { h.s.Keep(); return nil }}
}

func reset() step {
	return step{name: "Reset", do: func(h *harness) error { h.s.Reset(); return nil }}
}

func releaseAll() step {
	return step{name: "ReleaseAll", do: func(h *harness) error { h.s.ReleaseAll(); return nil }}
}

// leave is the client leaving and another logging in: what the first left
// on pooled connections must not reach the second.
func leave() step {
	return step{name: "a new client", do: func(h *harness) error {
		h.s.ReleaseAll()
		h.s = h.newSession()
		return nil
	}}
}

func names(coll byte) step {
	return step{name: fmt.Sprintf("SET NAMES (collation %d)", coll), do: func(h *harness) error { h.s.SetNames(coll); return nil }}
}

// set runs a SET the session tracks on node, as the server does: outside
// any transaction where XA requires it, then the values are read back
// (the fake answers the read from reads, one value per column) and set
// again to check they can travel.
func set(node, sql string, vars []router.SetVar) step {
	return step{name: node + ": " + sql + " (tracked)", do: func(h *harness) error {
		s := h.s
		bc, err := s.AcquireOutsideTxn(node)
		if err != nil {
			return err
		}
		res, err := bc.Exec(sql)
		keep := false
		if err == nil {
			err = s.ReadBack(bc, vars)
			if err == nil && s.CheckCarry(bc, vars) != nil {
				keep = true
			}
		}
		if err != nil {
			if !bc.Broken() {
				s.Release(bc, false, backend.Outcome{})
				return err
			}
			s.Release(bc, false, backend.Outcome{})
			return &backend.LostError{Conn: bc, Cause: err}
		}
		if keep {
			s.Keep()
		}
		s.Release(bc, false, backend.Outcome{OK: true, Status: res.OK.Status, Warnings: res.OK.Warnings})
		return nil
	}}
}

// kill closes, from the server's side, the connection the session holds
// to node (a KILL from elsewhere, a crash): the session finds out at its
// next use.
func kill(node string) step {
	return step{name: "the server closes the session's connection on " + node, do: func(h *harness) error {
		c := h.held(node)
		if c == nil {
			return fmt.Errorf("the session holds no connection to %s", node)
		}
		c.Kill()
		<-c.Done()
		return nil
	}}
}

// implicitXA opens the one-statement XA transaction of a write on nodes.
func implicitXA(nodes ...string) step {
	return step{name: "BeginImplicitXA", do: func(h *harness) error {
		if !h.s.BeginImplicitXA(nodes) {
			return errors.New("no implicit XA transaction opened")
		}
		return nil
	}}
}

// check runs f (assertions on the session at that point).
func check(name string, f func(h *harness) error) step { return step{name: name, do: f} }

// statement is on's work.
func (h *harness) statement(sql string, nodes []string) error {
	s := h.s
	st := router.Classify(sql, s.Mode())
	// The plan kinds the router gives: LOCK TABLES on several nodes is a
	// fan-out whose connections keep the locks; a read on several is a
	// concatenation; any other statement on several sums their OKs.
	plan := &router.Plan{Kind: router.Forward}
	switch {
	case len(nodes) == 1:
	case st.LockTables:
		plan.Kind, plan.Sticky = router.Fanout, true
	case st.Kind == router.KindRead:
		plan.Kind = router.Concat
	default:
		plan.Kind = router.SumOK
	}
	for _, n := range nodes {
		plan.Targets = append(plan.Targets, router.Target{Node: n})
	}
	if err := s.Before(&st); err != nil {
		return err
	}
	s.Route(&st, plan.Kind, h.split)
	// In transaction_mode xa a write outside any transaction that reaches
	// several nodes is one XA transaction, committed before its answer.
	implicit := plan.Kind == router.SumOK && s.BeginImplicitXA(nodes)
	var err error
	ok := false
	for _, n := range nodes {
		var res *backend.Result
		if res, err = h.exec(n, sql, st.Sticky || plan.Sticky, st.UsesLastInsertID); err != nil {
			break
		}
		ok = res.Columns == nil
	}
	if implicit {
		if err == nil {
			err = s.End(true)
		} else if s.TxnSQL() != "" {
			s.End(false)
		}
	}
	if aerr := s.After(&st, sql, plan, session.Outcome{Err: err, OK: ok}); err == nil {
		err = aerr
	}
	return err
}

// exec runs sql on node for the client as proxy/server forwards a
// statement: the session's connection there, the statement, then Release
// with what its answer said. A backend ERR is returned as it is; a
// connection that failed is a *backend.LostError.
func (h *harness) exec(node, sql string, sticky, usesLastID bool) (*backend.Result, error) {
	bc, err := h.s.Acquire(node, usesLastID)
	if err != nil {
		return nil, err
	}
	res, err := bc.Exec(sql)
	var se *mysql.SQLError
	switch {
	case err == nil:
		h.s.Release(bc, sticky, backend.Outcome{OK: true, Status: res.OK.Status, Warnings: res.OK.Warnings,
			InsertID: res.OK.LastInsertID, Sent: true, StateChanged: res.OK.Status&mysql.StatusSessionStateChange != 0, State: res.State})
		return res, nil
	case !bc.Broken() && errors.As(err, &se):
		h.s.Release(bc, false, backend.Outcome{Sent: true, ErrCode: se.Code})
		return nil, err
	default:
		h.s.Release(bc, false, backend.Outcome{})
		return nil, &backend.LostError{Conn: bc, Cause: err}
	}
}

// switchMaster moves node's master to a new fake, named node' in conns (a
// replica was promoted): connections to the old one are stale.
func switchMaster(node string) step {
	return step{name: "the master of " + node + " moves", do: func(h *harness) error {
		name := node + "'"
		f := fakebackend.Start(h.t, uint32(slices.Index(nodeNames, node)+1)*100+51)
		f.JournalTo(&h.journal, name)
		h.fakes[name] = f
		h.nodeOf[name] = h.nodes[node]
		at := slices.Index(h.order, node)
		h.order = slices.Insert(h.order, at+1, name)
		h.nodes[node].SwitchMaster(f.Addr())
		return nil
	}}
}

// addReplica gives n1 a healthy replica, named n1r in conns, that has
// applied the transactions up to gtidPos, and lets reads go to replicas
// under read_consistency consistency.
func (h *harness) addReplica(consistency, gtidPos string) {
	f := fakebackend.Start(h.t, 191)
	f.On("SHOW GLOBAL VARIABLES", fakebackend.Reply{Columns: varchars("Variable_name", "Value"),
		Rows: [][]any{{"read_only", "ON"}, {"gtid_slave_pos", gtidPos}}})
	f.On("SHOW SLAVE STATUS", fakebackend.Reply{Columns: varchars("Slave_IO_Running", "Slave_SQL_Running", "Seconds_Behind_Master"),
		Rows: [][]any{{"Yes", "Yes", "0"}}})
	f.JournalTo(&h.journal, "n1r")
	n := h.nodes["n1"]
	n.SetReplicas([]config.Replica{{Addr: f.Addr(), Weight: 1}})
	h.t.Cleanup(func() { n.SetReplicas(nil) })
	rep := n.Replicas()[0]
	if st := rep.Status(); !st.Usable {
		h.t.Fatalf("the replica is not usable: %s", st.Why)
	}
	h.fakes["n1r"] = f
	h.nodeOf["n1r"] = rep.Node
	h.skip["n1r"] = len(f.Conns()) // its health check
	h.order = slices.Insert(h.order, 1, "n1r")
	h.split = true
	h.s.Consistency = consistency
}

// held returns the fake's side of the connection the session holds to
// node's master, or nil.
func (h *harness) held(node string) *fakebackend.Conn {
	for _, id := range h.s.AppendBackendIDs(nil) {
		if c := h.fakes[node].Conn(id); c != nil {
			return c
		}
	}
	return nil
}

// conns describes every connection the fakes accepted, node by node in the
// order they were dialled: "n1.2 held: stmt; stmt", where the state is
// held (by the session), pooled (idle in its node's pool) or closed.
func (h *harness) conns() []string {
	h.t.Helper()
	held := h.s.AppendBackendIDs(nil)
	var dedicated uint32
	if bc := h.s.Dedicated(); bc != nil {
		dedicated = bc.ThreadID
	}
	var out []string
	inUse := map[*backend.Node]int{}
	for _, name := range h.order {
		n := h.nodeOf[name]
		inUse[n] += 0
		for i, c := range h.fakes[name].Conns()[h.skip[name]:] {
			var state string
			switch {
			case slices.Contains(held, c.ID):
				state = "held"
				if c.ID != dedicated {
					inUse[n]++
				}
			case n.HasThread(c.ID):
				state = "pooled"
				if c.InTxn() {
					// Never expected: the next client would work inside
					// this session's transaction.
					state = "POOLED INSIDE A TRANSACTION"
				}
			default:
				// Neither held nor in the pool: the client side closed
				// it, so the fake sees the end at once.
				select {
				case <-c.Done():
					state = "closed"
				case <-time.After(10 * time.Second):
					state = "LEAKED"
				}
			}
			out = append(out, fmt.Sprintf("%s.%d %s: %s", name, i+1, state, strings.Join(h.normalize(c.Log()), "; ")))
		}
	}
	for n, held := range inUse {
		if st := n.Stats(); st.InUse != held {
			h.t.Errorf("pool %s: %d connections checked out, but the session holds %d", n.Name, st.InUse, held)
		}
	}
	return out
}

// trackingSQL starts what every login runs (backend.Conn turns session
// tracking on); the logs leave it out.
const trackingSQL = "SET SESSION session_track_state_change = ON"

var xidRE = regexp.MustCompile(`X'([0-9a-f]*)',X'([0-9a-f]*)',` + strconv.Itoa(xa.FormatID))
var gtridRE = regexp.MustCompile(`'(sg-\d+-\d+)'`)

// normalize drops the logins' tracking SET and names XA ids by their
// transaction's order of appearance: xid(g1,n2) is the first transaction's
// branch on n2.
func (h *harness) normalize(log []string) []string {
	out := log[:0]
	for _, e := range log {
		if strings.HasPrefix(e, trackingSQL) {
			continue
		}
		e = xidRE.ReplaceAllStringFunc(e, func(x string) string {
			m := xidRE.FindStringSubmatch(x)
			g, _ := hex.DecodeString(m[1])
			b, _ := hex.DecodeString(m[2])
			return "xid(" + h.gtrid(string(g)) + "," + string(b) + ")"
		})
		e = gtridRE.ReplaceAllStringFunc(e, func(x string) string { return h.gtrid(strings.Trim(x, "'")) })
		out = append(out, e)
	}
	return out
}

func (h *harness) gtrid(g string) string {
	if name, ok := h.gtrids[g]; ok {
		return name
	}
	name := "g" + strconv.Itoa(len(h.gtrids)+1)
	h.gtrids[g] = name
	return name
}

// ends returns the journal's statements that end transactions or
// branches, normalised.
func (h *harness) ends() []string {
	var out []string
	for _, e := range h.normalize(h.journal.Entries()) {
		_, q, _ := strings.Cut(e, ": ")
		for _, p := range []string{"COMMIT", "ROLLBACK", "XA PREPARE", "XA COMMIT", "XA ROLLBACK"} {
			if strings.HasPrefix(q, p) && !strings.HasPrefix(q, "ROLLBACK TO") {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// decisions summarises what the coordinator wrote to and read from the
// decision log: "commit g1" (a commit decision), "abort g1" (an abort
// decision, inserted unless one is there), "read g1" (the commit decisions
// read back). Registration, recovery and clean-up are left out.
func (h *harness) decisions() []string {
	var out []string
	for _, e := range h.normalize(h.sidecar.Log()) {
		var verb string
		switch {
		case strings.HasPrefix(e, "INSERT INTO `"+xaDB+"`.xa_decisions"):
			verb = "commit"
		case strings.HasPrefix(e, "INSERT IGNORE INTO `"+xaDB+"`.xa_decisions"):
			verb = "abort"
		case strings.HasPrefix(e, "SELECT gtrid FROM"):
			verb = "read"
		default:
			continue
		}
		g := regexp.MustCompile(`\bg\d+\b`).FindString(e)
		out = append(out, verb+" "+g)
	}
	return out
}

// facts describes the session's transaction and state as its exported
// methods report them, in a fixed order: in-txn, txn=<its statement>,
// autocommit-off, holds-state, locked, lost=<node>, xa.
func (h *harness) facts() string {
	s := h.s
	var f []string
	if s.InTxn() {
		f = append(f, "in-txn")
	}
	if q := s.TxnSQL(); q != "" {
		f = append(f, "txn="+q)
	}
	if s.Status&mysql.StatusAutocommit == 0 {
		f = append(f, "autocommit-off")
	}
	if s.HoldsState() {
		f = append(f, "holds-state")
	}
	if s.Locked() {
		f = append(f, "locked")
	}
	if n := s.TxnLost(); n != "" {
		f = append(f, "lost="+n)
	}
	if s.XATxn().ID != 0 {
		f = append(f, "xa")
	}
	return strings.Join(f, " ")
}

// transition is one table case: a script for the fakes, the steps, and
// what must hold after them.
type transition struct {
	name   string
	mode   string // transaction_mode; "" is multi
	script []answer
	steps  []step
	// conns are the fakes' connections (harness.conns); facts the
	// session's (harness.facts).
	conns []string
	facts string
	// replica gives n1 a replica (harness.addReplica) with consistency
	// read_consistency, at gtidPos.
	replica              bool
	consistency, gtidPos string
	// ends, when set, are the statements that end transactions (COMMIT,
	// ROLLBACK, XA PREPARE, XA COMMIT, XA ROLLBACK) across nodes, in the
	// order the nodes received them: "n2: COMMIT".
	ends []string
	// decisions, in transaction_mode xa, are what the coordinator wrote
	// to the decision log (harness.decisions); xa its counters as
	// "onephase=N decided=N refused=N owed=N".
	decisions []string
	xa        string
	// then checks anything else.
	then func(t *testing.T, h *harness)
}

func runTransitions(t *testing.T, cases []transition) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.mode)
			if tc.replica {
				h.addReplica(tc.consistency, tc.gtidPos)
			}
			h.script(tc.script)
			h.run(tc.steps)
			if got := h.conns(); !slices.Equal(got, tc.conns) {
				t.Errorf("connections:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.conns, "\n"))
			}
			if tc.ends != nil {
				if got := h.ends(); !slices.Equal(got, tc.ends) {
					t.Errorf("transaction ends in order: %q, want %q", got, tc.ends)
				}
			}
			if got := h.facts(); got != tc.facts {
				t.Errorf("session: %q, want %q", got, tc.facts)
			}
			if h.co != nil {
				if got := h.decisions(); !slices.Equal(got, tc.decisions) {
					t.Errorf("decision log: %q, want %q", got, tc.decisions)
				}
				st := h.co.Stats()
				got := fmt.Sprintf("onephase=%d decided=%d refused=%d owed=%d", st.OnePhase, st.Decided, st.Refused, st.Owed)
				if tc.xa != "" && got != tc.xa {
					t.Errorf("coordinator: %s, want %s", got, tc.xa)
				}
				if st.InFlight != 0 {
					t.Errorf("coordinator: %d transactions still in flight", st.InFlight)
				}
			}
			if tc.then != nil {
				tc.then(t, h)
			}
		})
	}
}

// holding checks that the session holds connections to exactly nodes now.
func holding(nodes ...string) step {
	return check(fmt.Sprintf("holds %v", nodes), func(h *harness) error {
		var got []string
		for _, n := range nodeNames {
			if h.held(n) != nil {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, nodes) {
			return fmt.Errorf("the session holds connections to %v, want %v", got, nodes)
		}
		return nil
	})
}

// sessionIs checks the session's facts (harness.facts) now.
func sessionIs(facts string) step {
	return check("session is "+facts, func(h *harness) error {
		if got := h.facts(); got != facts {
			return fmt.Errorf("session: %q, want %q", got, facts)
		}
		return nil
	})
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
