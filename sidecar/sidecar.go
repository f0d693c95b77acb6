package sidecar

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// Version is the version of the sidecar database's layout as a whole (its
// sidecar_version row) that this proxy writes; see the package doc.
const Version = 1

// erNoSuchTable is ER_NO_SUCH_TABLE 1146.
const erNoSuchTable = 1146

// Component is one user of the sidecar: its name in sidecar_migrations
// and its migrations in order. Migrations[i] brings the component's tables
// from version i to i+1: statements run in the sidecar database (table
// names unqualified), which must be idempotent (package doc).
type Component struct {
	Name       string
	Migrations [][]string
}

// Sidecar is the sidecar database on one server. Safe for concurrent use.
type Sidecar struct {
	where string // the server, for errors: "node node1" or an address
	db    string
	qdb   string // db quoted
	dial  func(context.Context) (*backend.Conn, error)

	conns chan idleConn // idle connections
	// idle closes a connection idle longer than this (0: kept until
	// Close), as the pools close theirs (backend.idle_timeout): servers
	// count the threads (Threads_connected, max_connections), and the
	// sidecar is used in bursts (a workflow's saves, a block of sequence
	// values, a commit decision). reaping is set while a reap is due.
	idle    atomic.Int64
	reaping atomic.Bool

	mu       sync.Mutex // serialises migrations; guards booted, closed
	booted   bool       // sidecar_version checked and sidecar_migrations exists
	closed   bool
	migrated sync.Map // component name -> struct{}: at its version
}

// New returns the sidecar database db on node. Nothing is done on the node
// until the first statement. Its idle connections close after the node's
// pools' idle timeout.
func New(node *backend.Node, db string) *Sidecar {
	s := newSidecar("node "+node.Name, db, node.Dial)
	s.CloseIdleAfter(node.IdleTimeout())
	return s
}

// NewAt returns the sidecar database db on the server at addr, logged in
// as user (for callers that know the server by its address, not as a
// backend node).
func NewAt(addr, user, password, db string) *Sidecar {
	o := backend.DialOptions{User: user, Password: password, DialTimeout: 5 * time.Second, CommandTimeout: time.Minute}
	return newSidecar(addr, db, func(ctx context.Context) (*backend.Conn, error) { return backend.Dial(ctx, addr, o) })
}

func newSidecar(where, db string, dial func(context.Context) (*backend.Conn, error)) *Sidecar {
	return &Sidecar{where: where, db: db, qdb: mysql.QuoteIdent(db), dial: dial, conns: make(chan idleConn, 8)}
}

// idleConn is a connection kept for the next statement, since it came back.
type idleConn struct {
	bc    *backend.Conn
	since time.Time
}

// CloseIdleAfter makes connections idle longer than d close (0: kept until
// Close, the default of NewAt). A reap armed with the former timeout still
// runs; the next connection that comes back arms one with d.
func (s *Sidecar) CloseIdleAfter(d time.Duration) {
	s.idle.Store(int64(d))
	s.reaping.Store(false)
}

// expired reports whether ic has been idle past the idle timeout.
func (s *Sidecar) expired(ic idleConn, now time.Time) bool {
	d := time.Duration(s.idle.Load())
	return d > 0 && now.Sub(ic.since) >= d
}

// keep puts ic back among the idle connections (closing it when they are
// full) and arms a reap when there is an idle timeout.
func (s *Sidecar) keep(ic idleConn) {
	select {
	case s.conns <- ic:
	default:
		ic.bc.Close()
		return
	}
	if d := time.Duration(s.idle.Load()); d > 0 && s.reaping.CompareAndSwap(false, true) {
		time.AfterFunc(d, s.reap)
	}
}

// reap closes the idle connections past the idle timeout; the others go
// back (and a reap is armed again for them).
func (s *Sidecar) reap() {
	s.reaping.Store(false)
	now := time.Now()
	var young []idleConn
	for n := len(s.conns); n > 0; n-- {
		select {
		case ic := <-s.conns:
			if s.expired(ic, now) {
				ic.bc.Close()
			} else {
				young = append(young, ic)
			}
		default:
			n = 1
		}
	}
	for _, ic := range young {
		s.keep(ic)
	}
}

// DB returns the database's name.
func (s *Sidecar) DB() string { return s.db }

// Table returns the quoted name of table in the sidecar database
// (`db`.`table`), for statements.
func (s *Sidecar) Table(table string) string { return s.qdb + "." + mysql.QuoteIdent(table) }

// Exec runs one autocommitted statement of component c, first bringing
// c's tables to their version (once per Sidecar). A server error is
// returned as the *mysql.SQLError it is, wrapped.
func (s *Sidecar) Exec(ctx context.Context, c *Component, sql string) (*backend.Result, error) {
	bc, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer s.put(bc)
	if _, ok := s.migrated.Load(c.Name); !ok {
		if err := s.migrate(ctx, bc, c); err != nil {
			return nil, err
		}
	}
	res, err := run(ctx, bc, sql)
	if err != nil {
		return nil, s.wrap(err)
	}
	return res, nil
}

// Read runs a statement that only reads c's tables. Before c's tables were
// brought to their version by this Sidecar it creates nothing: when the
// database or the table does not exist (no proxy wrote any), the answer is
// an empty result.
func (s *Sidecar) Read(ctx context.Context, c *Component, sql string) (*backend.Result, error) {
	if _, ok := s.migrated.Load(c.Name); ok {
		return s.Exec(ctx, c, sql)
	}
	bc, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer s.put(bc)
	res, err := run(ctx, bc, sql)
	var se *mysql.SQLError
	if errors.As(err, &se) && (se.Code == erNoSuchTable || se.Code == mysql.ErBadDB) {
		return &backend.Result{}, nil
	}
	if err != nil {
		return nil, s.wrap(err)
	}
	return res, nil
}

// Close closes the idle connections; statements running keep theirs,
// closed when they end.
func (s *Sidecar) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for {
		select {
		case ic := <-s.conns:
			ic.bc.Close()
		default:
			return
		}
	}
}

func (s *Sidecar) wrap(err error) error {
	return fmt.Errorf("sidecar %s on %s: %w", s.db, s.where, err)
}

// conn returns an idle connection or dials one.
func (s *Sidecar) conn(ctx context.Context) (*backend.Conn, error) {
	for len(s.conns) > 0 {
		select {
		case ic := <-s.conns:
			if !s.expired(ic, time.Now()) {
				return ic.bc, nil
			}
			ic.bc.Close()
		default:
		}
	}
	bc, err := s.dial(ctx)
	if err != nil {
		return nil, s.wrap(err)
	}
	return bc, nil
}

func (s *Sidecar) put(bc *backend.Conn) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if bc.Broken() || closed {
		bc.Close()
		return
	}
	s.keep(idleConn{bc: bc, since: time.Now()})
}

// run runs sql on bc, closing bc under it if ctx ends first.
func run(ctx context.Context, bc *backend.Conn, sql string) (*backend.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, bc.Abort)
	res, err := bc.Exec(sql)
	if !stop() {
		bc.MarkBroken()
		if err != nil {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	}
	return res, err
}

// migrate brings c's tables to their version on bc: the database, the
// version tables (once per Sidecar), then c's migrations past the version
// recorded, each recorded once its statements ran.
func (s *Sidecar) migrate(ctx context.Context, bc *backend.Conn, c *Component) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.migrated.Load(c.Name); ok {
		return nil
	}
	exec := func(sql string) (*backend.Result, error) {
		res, err := run(ctx, bc, sql)
		if err != nil {
			return nil, fmt.Errorf("sidecar %s on %s: bringing the tables of %s to version %d: %w", s.db, s.where, c.Name, len(c.Migrations), err)
		}
		return res, nil
	}
	if _, err := exec("CREATE DATABASE IF NOT EXISTS " + s.qdb); err != nil {
		return err
	}
	if _, err := exec("USE " + s.qdb); err != nil {
		return err
	}
	if !s.booted {
		for _, q := range []string{
			"CREATE TABLE IF NOT EXISTS sidecar_version (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, version INT UNSIGNED NOT NULL) ENGINE=InnoDB",
			"INSERT IGNORE INTO sidecar_version VALUES (1, " + strconv.Itoa(Version) + ")",
		} {
			if _, err := exec(q); err != nil {
				return err
			}
		}
		res, err := exec("SELECT version FROM sidecar_version WHERE id = 1")
		if err != nil {
			return err
		}
		if v, ok := version(res); ok && v > Version {
			return fmt.Errorf("sidecar %s on %s has layout version %d; this proxy knows versions up to %d (upgrade the proxy)", s.db, s.where, v, Version)
		}
		if _, err := exec("CREATE TABLE IF NOT EXISTS sidecar_migrations (component VARCHAR(64) NOT NULL PRIMARY KEY, " +
			"version INT UNSIGNED NOT NULL, updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP) ENGINE=InnoDB"); err != nil {
			return err
		}
		s.booted = true
	}
	name := mysql.QuoteString(c.Name, "utf8mb4")
	res, err := exec("SELECT version FROM sidecar_migrations WHERE component = " + name)
	if err != nil {
		return err
	}
	have, _ := version(res)
	if have > len(c.Migrations) {
		return fmt.Errorf("sidecar %s on %s has the tables of %s at version %d; this proxy knows versions up to %d (upgrade the proxy)",
			s.db, s.where, c.Name, have, len(c.Migrations))
	}
	for v := have; v < len(c.Migrations); v++ {
		for _, q := range c.Migrations[v] {
			if _, err := exec(q); err != nil {
				return err
			}
		}
		if _, err := exec("INSERT INTO sidecar_migrations (component, version) VALUES (" + name + ", " + strconv.Itoa(v+1) +
			") ON DUPLICATE KEY UPDATE version = GREATEST(version, VALUES(version))"); err != nil {
			return err
		}
	}
	s.migrated.Store(c.Name, struct{}{})
	return nil
}

// version reads the one number a version query answers; ok is false when
// it answered no row.
func version(res *backend.Result) (int, bool) {
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return 0, false
	}
	v, err := strconv.Atoi(string(res.Rows[0][0]))
	return v, err == nil
}
