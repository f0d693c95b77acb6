package server_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// ifzProbeCols are what B reads of its session after each of A's
// statements, on every node A's session does not keep: A's variables
// (NULL for B), B's own, the session variables A's grammar sets, the
// transaction and LAST_INSERT_ID().
var ifzProbeCols = []string{"@a0", "@a1", "@a2", "@a3", "@b0", "@b1", "@@sql_mode", "@@time_zone", "@@group_concat_max_len",
	"@@div_precision_increment", "@@sql_select_limit", "@@tx_isolation", "@@autocommit", "@@in_transaction", "@@lock_wait_timeout",
	"@@character_set_client", "@@character_set_results", "@@collation_connection", "@@max_statement_time", "LAST_INSERT_ID()"}

var ifzProbe = func() string {
	var cols []string
	for _, c := range ifzProbeCols {
		cols = append(cols, "IFNULL("+c+", 'NULL')")
	}
	return "SELECT " + strings.Join(cols, ", ")
}()

func ifzHint(n int) string { return fmt.Sprintf("/*node%d*/ ", n+1) }

// ifzRun is one episode: client A's life, from its login to its logout,
// and client B's sessions during it.
type ifzRun struct {
	e      *ifzEnv
	px     *ifzProxy
	a, b   *ifzClient
	aPins  []int // the pooled connections A's session keeps, per node
	events []ifzEvent
	found  []ifzFinding
	aSteps int
	lastA  string // the production of A's last statement
	// hist is what each statement left: which nodes' connections its
	// client's session kept after it; a pinned-session failure is filed
	// under the statement that tied the session (creator).
	hist      []ifzHist
	aDiverged bool // A's statement failed on one side only: A's sessions differ from now on
	over      bool // B waited for a connection A keeps: the episode ends
}

// episode runs the statements src draws, probing after each of A's, then
// A logs out and B probes once more.
func (e *ifzEnv) episode(px *ifzProxy, src ifzSource) *ifzRun {
	r := &ifzRun{e: e, px: px, aPins: make([]int, len(e.direct)), lastA: "login"}
	var err error
	if r.a, err = e.client(px); err != nil {
		e.t.Fatalf("client A: %v", err)
	}
	for !r.over {
		ev, ok := src.next(r)
		if !ok {
			break
		}
		r.events = append(r.events, ev)
		if ev.who == 'B' {
			r.stepB(ev)
			continue
		}
		r.stepA(ev)
		if !r.over {
			r.probe(false)
		}
	}
	r.leave()
	return r
}

// find records a finding once per episode.
func (r *ifzRun) find(kind, what, prod, detail string) {
	f := ifzFinding{kind: kind, what: what, prod: prod, detail: detail, events: slices.Clone(r.events)}
	for _, g := range r.found {
		if g.key() == f.key() {
			return
		}
	}
	r.found = append(r.found, f)
}

// stepA runs one of A's statements through the proxy and on A's twin.
func (r *ifzRun) stepA(ev ifzEvent) {
	if !slices.Equal(r.px.inUse(), r.aPins) {
		r.recycleB() // B's burst left B's session keeping a connection
	}
	r.aSteps++
	r.lastA = ev.prod
	perr := ifzExec(r.a.p, render(ev.sql, "p"))
	if ifzBusy(perr) {
		r.over = true
		return
	}
	derr := ifzExec(r.a.d, render(ev.sql, "d"))
	if r.bug('A', ev, perr) {
		r.over = true // A's client connection is gone
		return
	}
	if !r.aDiverged && r.compareErrs('A', ev, perr, derr) {
		r.aDiverged = true
	}
	if strings.HasPrefix(ev.sql, "/*node") {
		// The twin read the hint as a comment: its state is no longer
		// where A's is (a temporary table on node2 only, ...).
		r.aDiverged = true
	}
	r.aPins = r.px.inUse()
	r.note('A', ev, r.aPins, nil)
}

// ifzHist is one statement of an episode and the nodes whose connection
// its client's session kept after it.
type ifzHist struct {
	who  byte
	ev   ifzEvent
	held []bool
}

// note records which nodes' connections the client's session keeps after
// ev: those in use beyond others' (A's, for B).
func (r *ifzRun) note(who byte, ev ifzEvent, inUse, others []int) {
	h := ifzHist{who: who, ev: ev, held: make([]bool, len(inUse))}
	for n, k := range inUse {
		h.held[n] = k > 0 && (others == nil || k > others[n])
	}
	r.hist = append(r.hist, h)
}

var (
	ifzStateOn   = regexp.MustCompile(`holds state on node node(\d)`)
	ifzCreatedBy = regexp.MustCompile(`created by an? (\w+) statement|stored routine's call \((\w+)\)`)
	ifzFirstWord = regexp.MustCompile(`^\s*(?:/\*.*?\*/\s*)*(\w+)`)
)

// creator names the production of the statement that tied who's session
// to the node a 1235 names: of who's last statements after each of which
// the session kept that node's connection, the earliest whose first word
// is the one the message names (if it names one). A statement that failed part way
// (already applied, already loaded) tied the session itself.
func (r *ifzRun) creator(who byte, ev ifzEvent, err error) string {
	msg := err.Error()
	if strings.Contains(msg, "already applied on") || strings.Contains(msg, "already loaded into") {
		return ev.prod + " (itself, part way)"
	}
	m := ifzStateOn.FindStringSubmatch(msg)
	if m == nil {
		return "?"
	}
	node := int(m[1][0] - '1')
	kw := ""
	if c := ifzCreatedBy.FindStringSubmatch(msg); c != nil {
		kw = c[1] + c[2]
	}
	// The session kept the node's connection from some statement on:
	// the earliest of that span whose first word is the message's.
	creator := "?"
	for i := len(r.hist) - 1; i >= 0; i-- {
		h := r.hist[i]
		if h.who != who {
			continue
		}
		if node >= len(h.held) || !h.held[node] {
			break
		}
		w := ifzFirstWord.FindStringSubmatch(render(h.ev.sql, "p"))
		if kw == "" || w != nil && strings.EqualFold(w[1], kw) {
			creator = h.ev.prod
		}
	}
	return creator
}

// stepB runs one of B's statements through the proxy and on B's twin,
// comparing the answers of those whose answer is B's own.
func (r *ifzRun) stepB(ev ifzEvent) {
	if !r.ensureB() {
		return // B cannot log in while A's session keeps the default node's connection
	}
	// The statements of one event run one after the other on each side;
	// the first that fails, or the last, is compared.
	var pr, dr [][]string
	var perr, derr error
	stmts := strings.Split(ev.sql, ";\n")
	for i, q := range stmts {
		if ev.cmp && i == len(stmts)-1 {
			pr, perr = ifzQuery(r.b.p, q)
		} else {
			perr = ifzExec(r.b.p, q)
		}
		if perr != nil {
			break
		}
	}
	if ifzBusy(perr) {
		// A's session keeps a connection B's statement needs: the twin
		// does not run it, and what it did on the other nodes (a write
		// across shards applies where it got a connection) is copied
		// once B's sessions, and their row locks, are gone.
		r.recycleB()
		r.e.resyncB()
		return
	}
	for i, q := range stmts {
		if ev.cmp && i == len(stmts)-1 {
			dr, derr = ifzQuery(r.b.d, q)
		} else {
			derr = ifzExec(r.b.d, q)
		}
		if derr != nil {
			break
		}
	}
	if r.bug('B', ev, perr) || r.compareErrs('B', ev, perr, derr) {
		r.recycleB()
		r.e.resyncB()
		return
	}
	if ev.cmp && perr == nil && joinRows(pr) != joinRows(dr) {
		r.find("differs", "B's answer differs from the direct one", ev.prod,
			fmt.Sprintf("%q: %q through the proxy, %q directly", ev.sql, joinRows(pr), joinRows(dr)))
		r.recycleB()
		r.e.resyncB()
		return
	}
	r.note('B', ev, r.px.inUse(), r.aPins)
}

// bug files a proxy error that is no MariaDB error (1105, or a client
// connection the proxy closed), whatever the twin did; it reports
// whether the client connection is gone.
func (r *ifzRun) bug(who byte, ev ifzEvent, perr error) bool {
	if perr == nil || ifzBusy(perr) {
		return false
	}
	var me *gomysql.MySQLError
	if !errors.As(perr, &me) {
		r.find("fails", fmt.Sprintf("%c: the proxy closed the client connection", who), ev.prod,
			fmt.Sprintf("%q: %v through the proxy", render(ev.sql, "p"), perr))
		return true
	}
	if me.Number == 1105 {
		r.find("fails", fmt.Sprintf("%c: %s through the proxy (a proxy bug)", who, ifzErrClass(perr)), ev.prod,
			fmt.Sprintf("%q: %v through the proxy", render(ev.sql, "p"), perr))
	}
	return false
}

// compareErrs files a statement that succeeds on one side only; it
// reports whether it did.
func (r *ifzRun) compareErrs(who byte, ev ifzEvent, perr, derr error) bool {
	q := render(ev.sql, "p")
	switch {
	case perr == nil && derr == nil:
		return false
	case perr != nil && derr != nil:
		return false // both refuse it (how is not what this test is about)
	case ifzPinned(perr) && strings.HasPrefix(q, "/*node"):
		// A hint names another node than the one the session's state
		// is on: the client asked for what one MariaDB cannot be.
		return false
	case ifzPinned(perr) && derr == nil:
		// Filed under the statement that tied the session to the node.
		creator := r.creator(who, ev, perr)
		if strings.HasSuffix(creator, "-hint") {
			return true // the state is where a hint put it, on purpose
		}
		r.find("pinned", fmt.Sprintf("%c: a statement on another node than the state a %s statement left", who, creator), creator,
			fmt.Sprintf("%q (a %s statement): %v through the proxy, OK directly", q, ev.prod, perr))
	case perr != nil && derr == nil:
		r.find("fails", fmt.Sprintf("%c: error %s through the proxy", who, ifzCode(perr)), ev.prod, fmt.Sprintf("%q: %v through the proxy, OK directly", q, perr))
	case perr == nil:
		r.find("fails", fmt.Sprintf("%c: OK through the proxy, %s directly", who, ifzErrClass(derr)), ev.prod,
			fmt.Sprintf("%q: OK through the proxy, %v directly", q, derr))
	}
	return true
}

func ifzCode(err error) string { c, _, _ := strings.Cut(ifzErrClass(err), " "); return c }

// recycleB ends B's sessions (its twin's too); the next use of B logs in
// new ones.
func (r *ifzRun) recycleB() {
	if r.b == nil {
		return
	}
	r.b.close()
	r.b = nil
	// At most what A keeps: A's count is read right after its answer,
	// when a connection its statement used may not be back yet (fewer in
	// use later is no leak).
	if !r.px.waitInUseAtMost(r.aPins) {
		r.find("leak", "a connection stays checked out after its client left", r.lastA, fmt.Sprintf("in use %v, A keeps %v", r.px.inUse(), r.aPins))
	}
	if n := r.px.doublePuts(); n > 0 {
		r.find("leak", "a connection was returned to its pool twice", r.lastA, fmt.Sprintf("%d returns of connections not checked out", n))
	}
}

// ensureB logs B in if it is not; false when the login waited for a
// connection A's session keeps.
func (r *ifzRun) ensureB() bool {
	if r.b != nil {
		return true
	}
	if r.aPins[0] > 0 {
		return false // a login takes a connection of the default node
	}
	b, err := r.e.client(r.px)
	if ifzBusy(err) {
		return false
	}
	if err != nil {
		r.find("fails", "B's login: "+ifzErrClass(err), r.lastA, fmt.Sprintf("in use %v: %v", r.px.inUse(), err))
		return false
	}
	r.b = b
	return true
}

// freeNodes are the nodes where A's session keeps no connection: B's
// statements there get the pooled connection A used last.
func (r *ifzRun) freeNodes() []int {
	var out []int
	for n, k := range r.aPins {
		if k == 0 {
			out = append(out, n)
		}
	}
	return out
}

// probe looks for A in B's session and in the pool after A's statement.
func (r *ifzRun) probe(left bool) {
	r.checkLocks(left)
	aTwin, err := ifzQuery(r.a.d, ifzProbe)
	if err != nil {
		r.e.t.Fatalf("probe of A's twin: %v", err)
	}
	r.probeB(aTwin[0])
	r.probeFresh(false)
}

// checkLocks reads, on each server, which backend connection holds A's
// named locks: while A is connected one its session keeps, after it left
// none (the server releases a closed connection's locks a moment after
// the close, so that check waits up to a second).
func (r *ifzRun) checkLocks(left bool) {
	deadline := time.Now().Add(time.Second)
	for n, d := range r.e.direct {
		for {
			held := ifzLocksHeld(r.e.t, d)
			if len(held) > 0 && left && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			for _, h := range held {
				detail := fmt.Sprintf("lock %s on node%d is held by backend thread %s", h[0], n+1, h[1])
				switch {
				case left:
					r.find("leak", "A's named lock is held after A left", r.lastA, detail)
				case r.aPins[n] == 0:
					r.find("leak", "A's named lock is held by a pooled connection A's session does not keep", r.lastA, detail)
				}
			}
			break
		}
	}
}

// ifzLocksHeld returns the names of A's locks held on d's server, each
// with its holder's thread id.
func ifzLocksHeld(t *testing.T, d *sql.DB) [][2]string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var held [3]sql.NullString
	err := d.QueryRowContext(ctx, "SELECT IS_USED_LOCK('ifz_p_0'), IS_USED_LOCK('ifz_p_1'), IS_USED_LOCK('ifz_p_2')").Scan(&held[0], &held[1], &held[2])
	if err != nil {
		t.Fatalf("A's locks: %v", err)
	}
	var out [][2]string
	for i, h := range held {
		if h.Valid {
			out = append(out, [2]string{fmt.Sprintf("ifz_p_%d", i), h.String})
		}
	}
	return out
}

// probeB compares what B sees of its session on each free node with its
// twin's view; aTwin is A's twin's view, which tells a leak (B sees A's
// value) from B's own state lost. It also looks for A's temporary tables.
func (r *ifzRun) probeB(aTwin []string) {
	if !r.ensureB() {
		return
	}
	twin, err := ifzQuery(r.b.d, ifzProbe)
	if err != nil {
		r.e.t.Fatalf("probe of B's twin: %v", err)
	}
	for _, n := range r.freeNodes() {
		got, err := ifzQuery(r.b.p, ifzHint(n)+ifzProbe)
		if ifzBusy(err) {
			continue
		}
		if err != nil {
			r.find("fails", "B's probe: "+ifzErrClass(err), r.lastA, fmt.Sprintf("node%d: %v", n+1, err))
			r.recycleB()
			return
		}
		bad := false
		for i, col := range ifzProbeCols {
			g, w := got[0][i], twin[0][i]
			if g == w {
				continue
			}
			bad = true
			detail := fmt.Sprintf("B reads %s = %q on node%d, its twin %q, A's twin %q", col, g, n+1, w, aTwin[i])
			switch {
			case strings.HasPrefix(col, "@a"):
				r.find("leak", "B sees A's user variable", r.lastA, detail)
			case g == aTwin[i]:
				r.find("leak", "B sees A's "+col, r.lastA, detail)
			default:
				r.find("differs", "B's own "+col+" differs from its twin's", r.lastA, detail)
			}
		}
		for _, tmp := range ifzTmpTables {
			if err := ifzExec(r.b.p, ifzHint(n)+"SELECT COUNT(*) FROM "+tmp); err == nil {
				bad = true
				r.find("leak", "B sees A's temporary table", r.lastA, fmt.Sprintf("%s on node%d", tmp, n+1))
			}
		}
		if bad {
			r.recycleB()
			return
		}
	}
}

// probeFresh logs a new client in on each free node: it must see no
// LASTVAL of A's sequences and, with full, the session variables of a
// new session (after A left). The client leaves after each node.
func (r *ifzRun) probeFresh(full bool) {
	before := r.px.inUse()
	if before[0] > 0 {
		return // a login takes a connection of the default node
	}
	for n := range before {
		if before[n] > 0 {
			continue
		}
		if full {
			vars, err := r.e.sessionVars(r.px, n)
			if err != nil && !ifzBusy(err) {
				r.find("fails", "a new client's probe: "+ifzErrClass(err), r.lastA, err.Error())
			}
			if d := diffVars(vars, r.e.baseline[n]); err == nil && len(d) > 0 {
				r.find("leak", "a new client after A left has other session variables", r.lastA,
					fmt.Sprintf("node%d: %s", n+1, strings.Join(d, ", ")))
			}
			if !r.px.waitInUseAtMost(before) {
				r.find("leak", "a connection stays checked out after its client left", r.lastA,
					fmt.Sprintf("a new client read its session variables on node%d and left: in use %v, before it %v", n+1, r.px.inUse(), before))
				return
			}
		}
		db, err := sql.Open("mysql", r.px.dsn())
		if err != nil {
			r.e.t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := db.Conn(ctx)
		cancel()
		if err == nil {
			rows, err := ifzQuery(c, ifzHint(n)+"SELECT IFNULL(LASTVAL(s1), 'NULL'), IFNULL(LASTVAL(s2), 'NULL')")
			switch {
			case err != nil && !ifzBusy(err):
				r.find("fails", "a new client's probe: "+ifzErrClass(err), r.lastA, err.Error())
			case err == nil && joinRows(rows) != "NULL,NULL":
				r.find("leak", "a new client sees A's sequence LASTVAL", r.lastA,
					fmt.Sprintf("node%d: LASTVAL(s1), LASTVAL(s2) = %s", n+1, joinRows(rows)))
			}
			c.Close()
		}
		db.Close()
		if !r.px.waitInUseAtMost(before) {
			r.find("leak", "a connection stays checked out after its client left", r.lastA,
				fmt.Sprintf("a new client read LASTVAL on node%d and left: in use %v, before it %v", n+1, r.px.inUse(), before))
			return
		}
	}
}

// leave ends A's sessions and probes what they left: no lock, no
// variable, nothing in B's session or a new one's, on any node.
func (r *ifzRun) leave() {
	aTwin, err := ifzQuery(r.a.d, ifzProbe)
	if err != nil {
		r.e.t.Fatalf("probe of A's twin: %v", err)
	}
	r.lastA = "logout"
	r.a.close()
	r.aPins = make([]int, len(r.aPins))
	// B's sessions keep nothing either: they leave too (recycleB waits
	// for every connection to be back), and new ones look.
	r.recycleB()
	r.checkLocks(true)
	r.probeB(aTwin[0])
	r.probeFresh(true)
	r.recycleB()
}

// resyncB copies B's rows (ids from 1000) from the proxy's subtables to
// the twins' table, after a statement of B ran on one side only.
func (e *ifzEnv) resyncB() {
	var rows [][]string
	for _, sub := range hashSubs("t") {
		rows = append(rows, queryStrings(e.t, e.direct[sub.node], "SELECT id, c, n FROM "+sub.name+" WHERE id >= 1000")...)
	}
	ref := openDB(e.t, e.refDSN)
	defer ref.Close()
	mustExec(e.t, ref, "DELETE FROM t WHERE id >= 1000")
	for _, row := range rows {
		if _, err := ref.Exec("INSERT INTO t (id, c, n) VALUES (?, ?, ?)", row[0], row[1], row[2]); err != nil {
			e.t.Fatalf("resync of B's rows: %v", err)
		}
	}
}
