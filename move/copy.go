package move

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gmysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/router"
)

// Env is what a workflow needs of the proxy running it.
type Env interface {
	// Endpoint returns where node's master is now.
	Endpoint(node string) (Endpoint, error)
	// Lag is the replication lag of node's most lagging replica (0 when
	// it has none): the copy slows down while it grows.
	Lag(node string) time.Duration
	// Pause holds new statements on the logical table db.table and waits,
	// until ctx ends, for the transactions that touched it to end. resume
	// releases the held statements, after swapping the table's rule for to
	// when to is not nil. When Pause fails, nothing is held.
	Pause(ctx context.Context, db, table string) (resume func(to *config.ShardRule) error, err error)
}

// copySource is one table the copy reads.
type copySource struct {
	key      string // its checkpoint key (Copied) and name in messages
	node     string // its node, for the replication lag
	ep       Endpoint
	db, name string
}

// copyTarget is one subtable the copy writes.
type copyTarget struct {
	node, db, name string
}

// copier copies rows from sources to the targets of a placement.
type copier struct {
	def      *tableDef
	place    *router.Placement
	targets  []copyTarget
	env      Env
	workers  int
	batch    int
	throttle time.Duration
	keyCol   int // index in def.cols of the new rule's shard key

	rows atomic.Int64 // rows written
	// noLocal: a target refused LOAD DATA LOCAL; batches are REPLACEs.
	noLocal atomic.Bool
	// checkpoint records that source key has been copied through pk (a
	// JSON array of SQL literals), "done" at its end.
	checkpoint func(key, pk string, rows int64) error
}

// job is one batch of rows for one target. rows belong to the reader's
// result, which stays alive until the job's wg is done.
type job struct {
	target int
	rows   [][]gmysql.FieldValue
	wg     *sync.WaitGroup
	err    *errOnce
}

type errOnce struct {
	mu  sync.Mutex
	err error
}

func (e *errOnce) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *errOnce) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// run copies every source from its checkpoint (resume: key -> pk, "done").
func (c *copier) run(ctx context.Context, sources []copySource, resume map[string]string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queues := make([]chan job, c.workers)
	var wwg sync.WaitGroup
	for w := range queues {
		queues[w] = make(chan job, 4)
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			c.writer(ctx, queues[w])
		}()
	}
	defer func() {
		for _, q := range queues {
			close(q)
		}
		wwg.Wait()
	}()
	// Sources are read in parallel, at most workers at a time.
	sem := make(chan struct{}, c.workers)
	var rwg sync.WaitGroup
	fail := &errOnce{}
	for _, src := range sources {
		if resume[src.key] == "done" {
			continue
		}
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if err := c.copyOne(ctx, src, resume[src.key], queues); err != nil {
				fail.set(fmt.Errorf("copying %s: %w", src.key, err))
				cancel()
			}
		}()
	}
	rwg.Wait()
	if err := fail.get(); err != nil {
		return err
	}
	return ctx.Err()
}

// copyOne copies one source table after pk (JSON array of literals; ""
// from its start).
func (c *copier) copyOne(ctx context.Context, src copySource, after string, queues []chan job) error {
	conn, err := dial(src.ep)
	if err != nil {
		return err
	}
	defer conn.Close()
	var last []string
	if after != "" {
		if err := json.Unmarshal([]byte(after), &last); err != nil {
			return fmt.Errorf("checkpoint %q: %w", after, err)
		}
	}
	chunk := c.batch * len(c.targets)
	if chunk < 1000 {
		chunk = 1000
	}
	if chunk > 50000 {
		chunk = 50000
	}
	sel := "SELECT " + c.def.selectList() + " FROM " + qualified(src.db, src.name)
	order := " ORDER BY " + c.def.pkList() + " LIMIT " + fmt.Sprint(chunk)
	// The next chunk is read while the writers still write the one before:
	// the source's read and the targets' writes overlap. A chunk is
	// checkpointed once all its rows are written, in order.
	var prev *inFlight
	finish := func(f *inFlight) error {
		if f == nil {
			return nil
		}
		f.wg.Wait()
		if err := f.err.get(); err != nil {
			return err
		}
		return c.checkpoint(src.key, f.pk, f.rows)
	}
	defer func() {
		if prev != nil {
			prev.wg.Wait() // its rows belong to a result this function owns
		}
	}()
	for {
		if err := c.wait(ctx, conn, src); err != nil {
			return err
		}
		q := sel
		if last != nil {
			q += " WHERE (" + c.def.pkList() + ") > (" + strings.Join(last, ", ") + ")"
		}
		res, err := conn.Execute(q + order)
		if err != nil {
			return err
		}
		err, prev = finish(prev), nil
		if err != nil {
			return err
		}
		n := len(res.Values)
		if n == 0 {
			return c.checkpoint(src.key, "done", 0)
		}
		lastRow := res.Values[n-1]
		last = last[:0]
		for _, j := range c.def.pk {
			var b strings.Builder
			literal(&b, &lastRow[j])
			last = append(last, b.String())
		}
		pk, _ := json.Marshal(last)
		cur := &inFlight{err: &errOnce{}, pk: string(pk), rows: int64(n)}
		if err := c.dispatch(ctx, res, cur, queues); err != nil {
			cur.wg.Wait()
			return err
		}
		prev = cur
		if n < chunk {
			err, prev = finish(cur), nil
			if err != nil {
				return err
			}
			return c.checkpoint(src.key, "done", 0)
		}
	}
}

// inFlight is a chunk whose rows the writers have: done when wg is.
type inFlight struct {
	wg   sync.WaitGroup
	err  *errOnce
	pk   string // the chunk's last key (JSON array of literals)
	rows int64
}

// dispatch splits a chunk's rows by target, in key order, into batches
// and queues them to the writers.
func (c *copier) dispatch(ctx context.Context, res *gmysql.Result, f *inFlight, queues []chan job) error {
	byTarget := make([][]int, len(c.targets))
	for i := range res.Values {
		t, err := c.place.Locate(fieldAny(&res.Values[i][c.keyCol]))
		if err != nil {
			return err
		}
		byTarget[t] = append(byTarget[t], i)
	}
	for t, rows := range byTarget {
		for len(rows) > 0 {
			k := min(len(rows), c.batch)
			batch := make([][]gmysql.FieldValue, k)
			for j, ri := range rows[:k] {
				batch[j] = res.Values[ri]
			}
			f.wg.Add(1)
			select {
			case queues[t%len(queues)] <- job{target: t, rows: batch, wg: &f.wg, err: f.err}:
			case <-ctx.Done():
				f.wg.Done()
				return ctx.Err()
			}
			rows = rows[k:]
		}
	}
	return nil
}

// wait throttles the copy: while a probe on the source takes longer than
// the throttle latency, or its replicas lag, it backs off.
func (c *copier) wait(ctx context.Context, conn *client.Conn, src copySource) error {
	for tries := 0; tries < 20; tries++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var pause time.Duration
		if c.throttle > 0 {
			t0 := time.Now()
			if _, err := conn.Execute("DO 1"); err != nil {
				return err
			}
			if d := time.Since(t0); d > c.throttle {
				pause = 4 * d
			}
		}
		if lag := c.env.Lag(src.node); lag > time.Second {
			pause = max(pause, lag/2)
		}
		if pause == 0 {
			return nil
		}
		select {
		case <-time.After(min(pause, time.Second)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// writer runs jobs, keeping one connection per target node.
func (c *copier) writer(ctx context.Context, q <-chan job) {
	conns := map[string]*client.Conn{}
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	for j := range q {
		err := j.err.get()
		if err == nil && ctx.Err() == nil {
			err = c.write(conns, j)
		}
		if err != nil {
			j.err.set(err)
		} else {
			c.rows.Add(int64(len(j.rows)))
		}
		j.wg.Done()
	}
}

func (c *copier) write(conns map[string]*client.Conn, j job) error {
	t := c.targets[j.target]
	for attempt := 0; ; attempt++ {
		cn := conns[t.node]
		if cn == nil {
			ep, err := c.env.Endpoint(t.node)
			if err != nil {
				return err
			}
			if cn, err = dialLocalFiles(ep); err != nil {
				return err
			}
			conns[t.node] = cn
		}
		var err error
		if !c.noLocal.Load() {
			err = c.load(cn, t, j.rows)
			if isNotAllowed(err) {
				// The server refuses LOAD DATA LOCAL (local_infile=OFF):
				// REPLACE statements from now on.
				c.noLocal.Store(true)
				err = c.replace(cn, t, j.rows)
			}
		} else {
			err = c.replace(cn, t, j.rows)
		}
		if err == nil || attempt == 1 || isServerError(err) {
			return err
		}
		// The connection failed: LOAD DATA ... REPLACE and REPLACE are
		// idempotent, run it again on a new one.
		cn.Close()
		delete(conns, t.node)
	}
}

// replace writes rows to t with one multi-row REPLACE (values as _binary
// literals).
func (c *copier) replace(cn *client.Conn, t copyTarget, rows [][]gmysql.FieldValue) error {
	var b strings.Builder
	b.WriteString("REPLACE INTO ")
	b.WriteString(qualified(t.db, t.name))
	b.WriteString(" (")
	b.WriteString(c.def.colList())
	b.WriteString(") VALUES ")
	for j, row := range rows {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for ci := range row {
			if ci > 0 {
				b.WriteByte(',')
			}
			literal(&b, &row[ci])
		}
		b.WriteByte(')')
	}
	_, err := cn.Execute(b.String())
	return err
}
