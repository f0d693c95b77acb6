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
	// checkpoint records that source key has been copied through pk (a
	// JSON array of SQL literals), "done" at its end.
	checkpoint func(key, pk string, rows int64) error
}

// job is one multi-row REPLACE for one target.
type job struct {
	target int
	sql    string
	rows   int
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
		n := len(res.Values)
		if n == 0 {
			return c.checkpoint(src.key, "done", 0)
		}
		// Split the chunk by target, in key order, into batches.
		per := make([][]int, len(c.targets))
		for i := range res.Values {
			t, err := c.place.Locate(fieldAny(&res.Values[i][c.keyCol]))
			if err != nil {
				return err
			}
			per[t] = append(per[t], i)
		}
		var wg sync.WaitGroup
		jerr := &errOnce{}
		for t, rows := range per {
			for len(rows) > 0 {
				k := min(len(rows), c.batch)
				var b strings.Builder
				b.WriteString("REPLACE INTO ")
				b.WriteString(qualified(c.targets[t].db, c.targets[t].name))
				b.WriteString(" (")
				b.WriteString(c.def.colList())
				b.WriteString(") VALUES ")
				for j, ri := range rows[:k] {
					if j > 0 {
						b.WriteByte(',')
					}
					b.WriteByte('(')
					for ci := range res.Values[ri] {
						if ci > 0 {
							b.WriteByte(',')
						}
						literal(&b, &res.Values[ri][ci])
					}
					b.WriteByte(')')
				}
				wg.Add(1)
				select {
				case queues[t%len(queues)] <- job{target: t, sql: b.String(), rows: k, wg: &wg, err: jerr}:
				case <-ctx.Done():
					wg.Done()
					wg.Wait()
					return ctx.Err()
				}
				rows = rows[k:]
			}
		}
		wg.Wait()
		if err := jerr.get(); err != nil {
			return err
		}
		lastRow := res.Values[n-1]
		last = last[:0]
		for _, j := range c.def.pk {
			var b strings.Builder
			literal(&b, &lastRow[j])
			last = append(last, b.String())
		}
		pk, _ := json.Marshal(last)
		if err := c.checkpoint(src.key, string(pk), int64(n)); err != nil {
			return err
		}
		if n < chunk {
			return c.checkpoint(src.key, "done", 0)
		}
	}
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
			c.rows.Add(int64(j.rows))
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
			if cn, err = dial(ep); err != nil {
				return err
			}
			conns[t.node] = cn
		}
		_, err := cn.Execute(j.sql)
		if err == nil || attempt == 1 || isServerError(err) {
			return err
		}
		// The connection failed: the REPLACE is idempotent, run it again
		// on a new one.
		cn.Close()
		delete(conns, t.node)
	}
}
