package server

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/router"
)

// The statements that look at or act on other sessions: SHOW PROCESSLIST
// and KILL, over the proxy's own connection ids.

// activity is what SHOW PROCESSLIST reports about a session. The owner
// goroutine writes it; SHOW PROCESSLIST in other sessions reads it.
type activity struct {
	mu    sync.Mutex
	user  string
	db    string
	cmd   string
	info  string
	since time.Time
}

func (a *activity) set(cmd, info string) {
	now := time.Now()
	a.mu.Lock()
	a.cmd, a.info, a.since = cmd, info, now
	a.mu.Unlock()
}

// setDB records the session's database.
func (a *activity) setDB(db string) {
	a.mu.Lock()
	a.db = db
	a.mu.Unlock()
}

// setUser records the session's user (login, COM_CHANGE_USER).
func (a *activity) setUser(user string) {
	a.mu.Lock()
	a.user = user
	a.mu.Unlock()
}

// owner returns the session's user.
func (a *activity) owner() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.user
}

func (a *activity) get() (user, db, cmd, info string, since time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.user, a.db, a.cmd, a.info, a.since
}

// showProcesslist answers SHOW [FULL] PROCESSLIST for c with the proxy's
// own sessions, so the ids it shows are the ones KILL takes.
func (r *registry) showProcesslist(c *conn, full bool) error {
	list := r.list()
	cols := []mysql.Column{
		{Name: "Id", Type: mysql.TypeLongLong, Length: 21, Charset: 63, Flags: mysql.FlagNotNull | mysql.FlagNum},
		{Name: "User", Type: mysql.TypeVarString, Length: 128 * 4, Charset: 45},
		{Name: "Host", Type: mysql.TypeVarString, Length: 64 * 4, Charset: 45},
		{Name: "db", Type: mysql.TypeVarString, Length: 64 * 4, Charset: 45},
		{Name: "Command", Type: mysql.TypeVarString, Length: 16 * 4, Charset: 45},
		{Name: "Time", Type: mysql.TypeLong, Length: 7, Charset: 63, Flags: mysql.FlagNotNull | mysql.FlagNum},
		{Name: "State", Type: mysql.TypeVarString, Length: 30 * 4, Charset: 45},
		{Name: "Info", Type: mysql.TypeVarString, Length: 100 * 4, Charset: 45},
	}
	now := time.Now()
	var rows [][][]byte
	for _, o := range list {
		user, db, cmd, info, since := o.act.get()
		if user != c.user {
			continue // MySQL shows only your own threads without PROCESS
		}
		state := ""
		if o.idle.Load() {
			cmd, info = "Sleep", ""
		} else {
			state = "executing"
		}
		if !full && len(info) > 100 {
			info = info[:100]
		}
		secs := int64(0)
		if !since.IsZero() {
			secs = int64(now.Sub(since) / time.Second)
		}
		row := [][]byte{
			[]byte(strconv.FormatUint(uint64(o.id), 10)),
			[]byte(user),
			[]byte(o.addr()),
			engine.Nullable(db),
			[]byte(cmd),
			[]byte(strconv.FormatInt(secs, 10)),
			[]byte(state),
			engine.Nullable(info),
		}
		rows = append(rows, row)
	}
	return engine.WriteResultSet(c, cols, rows)
}

// kill implements KILL [QUERY] id and COM_PROCESS_KILL, sent by c, on the
// proxy's own connection ids and the thread ids of the backend
// connections sessions hold.
func (r *registry) kill(c *conn, k router.Kill) error {
	if k.User != "" {
		return r.killUser(c, k)
	}
	if k.ID > uint64(^uint32(0)) && !k.Self {
		return mysql.NewError(mysql.ErUnknownThread, "Unknown thread id: %d", k.ID)
	}
	target := r.killTarget(c, k)
	if target == nil || target.act.owner() != c.act.owner() && target.st.Dedicated() != nil {
		// Not a session of the proxy, or one logged in with another
		// MariaDB account: the server decides, by the privileges of the
		// killer's account (its own, or the node's for a user_list
		// session, whose statements all run with the node's).
		return r.killThread(c, k)
	}
	if target.act.owner() != c.act.owner() {
		return mysql.NewError(mysql.ErKillDenied, "You are not owner of thread %d", k.ID)
	}
	return r.killSession(c, target, k)
}

// killTarget returns the session KILL id names, nil when it names none:
// an id in the sessions' range (newConnID) names the session with that id
// (what the handshake gave, what SHOW PROCESSLIST shows); any other id is
// a backend thread (what CONNECTION_ID() gave on a session's connection)
// and names the session that holds it, one of c's account's first.
// Session ids are apart from MariaDB's thread ids, which are small, so
// neither kind can stand for the other (only a thread id that reached the
// range and equals an open session's id names the session).
func (r *registry) killTarget(c *conn, k router.Kill) *conn {
	if k.Self {
		return c
	}
	if sessionID(k.ID) {
		if s := r.session(uint32(k.ID)); s != nil {
			return s
		}
	}
	if s := r.sessionHolding(k.ID, c.act.owner()); s != nil {
		return s
	}
	return r.sessionHolding(k.ID, "") // another account's: 1095
}

// killSession stops target's statement (k.Query) or ends target, a
// session of c's account (c itself too).
func (r *registry) killSession(c *conn, target *conn, k router.Kill) error {
	if target == c {
		if k.Query {
			return c.okStatus()
		}
		c.writeErr(mysql.NewError(mysql.ErConnectionKilled, "Connection was killed"))
		c.c.Flush()
		return errCloseSession
	}
	if bc := target.running.Load(); bc != nil {
		if err := killOn(bc, k.Query, func() bool { return target.running.Load() == bc }); err != nil {
			return err
		}
	} else if _, _, cmd, _, _ := target.act.get(); k.Query && cmd != "Sleep" {
		// Busy between two backend statements: the next one stops.
		target.interrupted.Store(true)
	}
	if many := target.runningMany.Load(); many != nil {
		for _, bc := range *many {
			if err := killOn(bc, k.Query, func() bool { return target.runningMany.Load() == many }); err != nil {
				return err
			}
		}
	}
	if !k.Query {
		target.nc.Close()
	}
	return c.okStatus()
}

// killThread runs KILL [QUERY] id on the server of c's default node, for
// a thread that is no session of the proxy's (an event, a replication or
// another application's thread) or the own connection of a session
// logged in with another MariaDB account: with the session's own account
// when it has one, else with the node's. The server then checks the
// privileges (the account's own threads, CONNECTION ADMIN). The proxy's
// pooled connections (of any node: two may name the same server) carry
// other clients' sessions: their ids stay unknown (1094) to every client.
func (r *registry) killThread(c *conn, k router.Kill) error {
	node, _ := r.conf.rt().DefaultNode(c.user)
	n := r.conf.node(node)
	unknown := n == nil
	for _, other := range r.conf.nodeMap() {
		// Any node's: two nodes may name the same server.
		unknown = unknown || other.HasThread(uint32(k.ID))
	}
	if unknown {
		return mysql.NewError(mysql.ErUnknownThread, "Unknown thread id: %d", k.ID)
	}
	kc, done, err := killerConn(c, n)
	if err != nil {
		return err
	}
	defer done()
	if err := kc.KillQuery(uint32(k.ID), k.Query); err != nil {
		return err
	}
	return c.okStatus()
}

// killUserSpec is the account of KILL ... USER the proxy passes on: a
// name (quoted or not) of plain characters, with a host of the same or %.
var killUserSpec = regexp.MustCompile(`^(?:'([A-Za-z0-9_$.-]+)'|` + "`([A-Za-z0-9_$.-]+)`" + `|([A-Za-z0-9_$.-]+))(?:@(?:'[A-Za-z0-9_$.%-]+'|[A-Za-z0-9_$.%-]+))?$`)

// killUser runs KILL ... USER account on the server of c's default node,
// with the session's own MariaDB account when it has one, else with the
// node's: the server kills that account's threads its privileges allow
// and says how many. The accounts the proxy's pools log in with are
// refused (1095): their threads are every client's sessions.
func (r *registry) killUser(c *conn, k router.Kill) error {
	m := killUserSpec.FindStringSubmatch(k.User)
	if m == nil {
		// CURRENT_USER(), escapes, comments: the proxy must know which
		// account the server will take.
		return mysql.NewError(mysql.ErNotSupported, "this form of KILL USER is not supported by shardgate: name the account with letters, digits, _ $ . - only ('user'@'host' or user)")
	}
	name := m[1] + m[2] + m[3] // one of the three spellings
	for _, n := range r.conf.nodeMap() {
		if strings.EqualFold(n.User(), name) {
			return mysql.NewError(mysql.ErKillDenied, "You are not owner of thread %s: the account's connections are the proxy's pool, every client's", k.User)
		}
	}
	node, _ := r.conf.rt().DefaultNode(c.user)
	n := r.conf.node(node)
	kc, done, err := killerConn(c, n)
	if err != nil {
		return err
	}
	defer done()
	res, err := kc.Exec(k.SQL)
	if err != nil {
		return err
	}
	return c.writeOK(mysql.OK{AffectedRows: res.OK.AffectedRows, Status: c.st.Status})
}

// killerConn returns the connection a KILL of c's runs on: c's own
// (a backend account's login), else a new one to n with the node's
// account; done closes what it opened.
func killerConn(c *conn, n *backend.Node) (kc *backend.Conn, done func(), err error) {
	if kc = c.st.Dedicated(); kc != nil {
		return kc, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if kc, err = n.Dial(ctx); err != nil {
		return nil, nil, err
	}
	return kc, func() { kc.Close() }, nil
}

// killOn stops the statement running on bc from a new connection to its
// node, if still is true once that connection is up (bc may have gone back
// to the pool meanwhile): KILL QUERY when query is set, else KILL
// CONNECTION, for a session that ends (MariaDB's KILL QUERY does not stop
// a compound statement such as LOOP ... END LOOP; killing the connection
// does, and the session's connections end with it anyway).
func killOn(bc *backend.Conn, query bool, still func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	kc, err := bc.Node().Dial(ctx)
	cancel()
	if err != nil {
		return err
	}
	defer kc.Close()
	if !still() {
		return nil
	}
	if err := kc.KillQuery(bc.ThreadID, query); err != nil {
		var se *mysql.SQLError
		if !errors.As(err, &se) || se.Code != mysql.ErUnknownThread {
			return err
		}
	}
	return nil
}
