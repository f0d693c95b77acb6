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
	// when to is not nil, and returns how long they were held: the one
	// measure of the pause, which the workflow's state (pause_ms, what
	// shardgate status prints), its log and the proxy's metrics all give.
	// When Pause fails, nothing is held.
	Pause(ctx context.Context, db, table string) (resume func(to *config.ShardRule) (paused time.Duration, err error), err error)
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

// job is one batch of rows for one target, encoded by the reader: the
// lines of a LOAD DATA (tab-separated), or where the targets refuse it
// (copier.noLocal) the tuples of a REPLACE's VALUES.
type job struct {
	target int
	data   *[]byte // from jobBufs; the writer puts it back
	rows   int
	wg     *sync.WaitGroup
	err    *errOnce
}

// jobBufs recycles the jobs' encoded rows.
var jobBufs = sync.Pool{New: func() any { b := make([]byte, 4, 64<<10); return &b }}

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
	if err := c.checkLocal(); err != nil {
		return err
	}
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
	// Rows are encoded as they arrive (streamed, not kept) and go to the
	// writers in batches while the read goes on; the next chunk is read
	// while the writers still write the one before. A chunk is
	// checkpointed once all its rows are written, in order.
	var prev *inFlight
	finish := func(f *inFlight) error {
		f.wg.Wait()
		if err := f.err.get(); err != nil {
			return err
		}
		return c.checkpoint(src.key, f.pk, f.rows)
	}
	defer func() {
		if prev != nil {
			prev.wg.Wait() // its writes end before the copy returns
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
		cur := &inFlight{err: &errOnce{}}
		if err := c.read(ctx, conn, q+order, cur, queues); err != nil {
			cur.wg.Wait()
			return err
		}
		if prev != nil {
			err := finish(prev)
			prev = nil
			if err != nil {
				cur.wg.Wait()
				return err
			}
		}
		if cur.rows == 0 {
			return c.checkpoint(src.key, "done", 0)
		}
		last = cur.last
		prev = cur
		if cur.rows < int64(chunk) {
			prev = nil
			if err := finish(cur); err != nil {
				return err
			}
			return c.checkpoint(src.key, "done", 0)
		}
	}
}

// inFlight is a chunk being read and written: written when wg is done.
type inFlight struct {
	wg   sync.WaitGroup
	err  *errOnce
	rows int64
	last []string // its last key, as SQL literals
	pk   string   // the same as a JSON array (the checkpoint)
}

// read streams the rows of q (one chunk), encodes each for the target the
// placement gives it and queues a job whenever a target has a batch;
// the rest goes at the end of the result.
func (c *copier) read(ctx context.Context, conn *client.Conn, q string, f *inFlight, queues []chan job) error {
	bufs := make([]*[]byte, len(c.targets))
	counts := make([]int, len(c.targets))
	send := func(t int) error {
		j := job{target: t, data: bufs[t], rows: counts[t], wg: &f.wg, err: f.err}
		bufs[t], counts[t] = nil, 0
		f.wg.Add(1)
		select {
		case queues[t%len(queues)] <- j:
			return nil
		case <-ctx.Done():
			f.wg.Done()
			return ctx.Err()
		}
	}
	local := !c.noLocal.Load()
	// The last row's key, as SQL literals: a row's values point into a
	// buffer the next packet reuses, so each row's key is written out.
	last := make([][]byte, len(c.def.pk))
	var res gmysql.Result
	err := conn.ExecuteSelectStreaming(q, &res, func(row []gmysql.FieldValue) error {
		t, err := c.place.Locate(fieldAny(&row[c.keyCol]))
		if err != nil {
			return err
		}
		if bufs[t] == nil {
			bufs[t] = jobBufs.Get().(*[]byte)
			*bufs[t] = (*bufs[t])[:4] // room for LOAD DATA's packet header
		}
		if local {
			*bufs[t] = appendTSV(*bufs[t], row)
		} else {
			*bufs[t] = appendTuple(*bufs[t], row, counts[t] == 0)
		}
		counts[t]++
		f.rows++
		for i, j := range c.def.pk {
			last[i] = appendLiteral(last[i][:0], &row[j])
		}
		if counts[t] >= c.batch {
			return send(t)
		}
		return nil
	}, func(*gmysql.Result) error { return nil })
	if err == nil && f.rows > 0 {
		for _, l := range last {
			f.last = append(f.last, string(l))
		}
		pk, _ := json.Marshal(f.last)
		f.pk = string(pk)
	}
	for t := range bufs {
		if bufs[t] != nil && err == nil {
			err = send(t)
		}
		if bufs[t] != nil {
			jobBufs.Put(bufs[t])
		}
	}
	return err
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
		jobBufs.Put(j.data)
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
		if c.noLocal.Load() {
			err = c.replace(cn, t, (*j.data)[4:])
		} else {
			err = c.load(cn, t, *j.data)
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

// checkLocal sets noLocal when a target node refuses LOAD DATA LOCAL
// (local_infile OFF): the copy then writes REPLACE statements.
func (c *copier) checkLocal() error {
	seen := map[string]bool{}
	for _, t := range c.targets {
		if seen[t.node] || c.noLocal.Load() {
			continue
		}
		seen[t.node] = true
		ep, err := c.env.Endpoint(t.node)
		if err != nil {
			return err
		}
		cn, err := dial(ep)
		if err != nil {
			return err
		}
		r, err := cn.Execute("SELECT @@GLOBAL.local_infile")
		cn.Close()
		if err != nil {
			return err
		}
		if on, _ := r.GetInt(0, 0); on == 0 {
			c.noLocal.Store(true)
		}
	}
	return nil
}

// replace writes tuples (appendTuple's) to t with one multi-row REPLACE.
func (c *copier) replace(cn *client.Conn, t copyTarget, tuples []byte) error {
	_, err := cn.Execute("REPLACE INTO " + qualified(t.db, t.name) + " (" + c.def.colList() + ") VALUES " + string(tuples))
	return err
}
