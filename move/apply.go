package move

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/router"
)

// applier applies change streams of a logical table to the subtables of
// a placement, idempotently: an insert or update is a REPLACE of the after
// image, a delete a DELETE by primary key, an update that moves a row to
// another subtable (or changes its key) a DELETE there first. Changes are
// spread over workers by primary key, so each key's changes keep their
// order.
type applier struct {
	def     *tableDef
	place   *router.Placement
	targets []copyTarget
	env     Env
	workers int
	keyCol  int

	mu      sync.Mutex
	applied map[string]string // node -> position applied through
	moved   chan struct{}     // closed and replaced when applied moves

	holds   chan *holdReq
	changes atomic.Int64 // row changes applied
	oldest  atomic.Int64 // binary log time (Unix s) of the oldest change not applied yet, 0 when none
	// checkpoint saves applied; called about once a second.
	checkpoint func(applied map[string]string) error
}

func newApplier(def *tableDef, place *router.Placement, targets []copyTarget, env Env, workers, keyCol int, from map[string]string) *applier {
	return &applier{def: def, place: place, targets: targets, env: env, workers: workers, keyCol: keyCol,
		applied: maps.Clone(from), moved: make(chan struct{}), holds: make(chan *holdReq)}
}

// holdReq stops the apply: first where it is (frozen), then, once told
// positions at (which must contain where it froze), exactly at those.
type holdReq struct {
	frozen  chan struct{}          // closed once stopped, everything read so far applied
	atc     chan map[string]string // where to go on to
	at      map[string]string      //
	reached chan error             // nil once held at at
	release chan struct{}          // closed by the holder
}

// hold is a stopped apply, held by a verify.
type hold struct {
	a   *applier
	req *holdReq
	rel sync.Once
}

// freeze stops the apply where it is, with everything it has read
// applied; the caller must release it.
func (a *applier) freeze(ctx context.Context) (*hold, error) {
	req := &holdReq{frozen: make(chan struct{}), atc: make(chan map[string]string, 1), reached: make(chan error, 1), release: make(chan struct{})}
	select {
	case a.holds <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	h := &hold{a: a, req: req}
	select {
	case <-req.frozen:
		return h, nil
	case <-ctx.Done():
		h.release()
		return nil, ctx.Err()
	}
}

// runTo lets the apply go on until it has applied exactly through at,
// where it stays until release. at must contain the frozen position.
func (h *hold) runTo(ctx context.Context, at map[string]string) error {
	h.req.atc <- at
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case err := <-h.req.reached:
		return err
	case <-wctx.Done():
		return fmt.Errorf("the apply did not reach the snapshot's position: %w", wctx.Err())
	}
}

func (h *hold) release() { h.rel.Do(func() { close(h.req.release) }) }

// position returns the applied positions.
func (a *applier) position() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.applied)
}

// waitFor waits until every node of want is applied through its position.
func (a *applier) waitFor(ctx context.Context, want map[string]string) error {
	for {
		a.mu.Lock()
		ok := true
		for n, p := range want {
			if !covers(a.applied[n], p) {
				ok = false
				break
			}
		}
		moved := a.moved
		a.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// run streams the sources' changes of logical (named by names) from the
// applied positions and applies them until ctx ends or something fails.
func (a *applier) run(ctx context.Context, sources []changestream.Source, names func(db, table string) string, logical string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, errc, err := changestream.Subscribe(ctx, sources, names, changestream.Options{
		Tables: []string{logical}, From: a.position(), Marks: true, Buffer: 4096, RawText: true,
		// Every change of the sources is applied, whoever wrote it: the
		// new subtables must end equal to the old ones.
		KeepFlagged: true})
	if err != nil {
		return err
	}
	queues := make([]chan op, a.workers)
	var wg sync.WaitGroup
	for w := range queues {
		queues[w] = make(chan op, 1024)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.worker(ctx, queues[w])
		}()
	}
	defer func() {
		cancel()
		for _, q := range queues {
			close(q)
		}
		wg.Wait()
		for range changes {
		}
	}()
	marks := map[string]string{}
	lastSave := time.Now()
	barrier := func() error {
		errs := make([]chan error, len(queues))
		for i, q := range queues {
			errs[i] = make(chan error, 1)
			q <- op{flush: errs[i]}
		}
		for _, e := range errs {
			if err := <-e; err != nil {
				return err
			}
		}
		a.mu.Lock()
		for n, p := range marks {
			a.applied[n] = p
		}
		close(a.moved)
		a.moved = make(chan struct{})
		snap := maps.Clone(a.applied)
		a.mu.Unlock()
		clear(marks)
		a.oldest.Store(0)
		if a.checkpoint != nil && time.Since(lastSave) > time.Second {
			lastSave = time.Now()
			return a.checkpoint(snap)
		}
		return nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	dispatch := func(ch *changestream.Change) error {
		if ch.Op == "mark" {
			marks[ch.Node] = ch.Pos
			return nil
		}
		if a.oldest.Load() == 0 {
			a.oldest.Store(max(ch.Time, 1))
		}
		ops, err := a.ops(ch)
		if err != nil {
			return err
		}
		for _, o := range ops {
			h := fnv.New32a()
			h.Write([]byte(o.pk))
			q := queues[int(h.Sum32()%uint32(len(queues)))]
			select {
			case q <- o:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	// A hold: changes of a node past its position wait in held until the
	// holder releases.
	var (
		hr      *holdReq
		reached map[string]bool
		held    []changestream.Change
	)
	checkHold := func() error {
		if hr == nil || len(reached) < len(hr.at) {
			return nil
		}
		if err := barrier(); err != nil {
			return err
		}
		hr.reached <- nil
		select {
		case <-hr.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		hr, reached = nil, nil
		for i := range held {
			if err := dispatch(&held[i]); err != nil {
				return err
			}
		}
		held = held[:0]
		return nil
	}
	for {
		select {
		case ch, ok := <-changes:
			if !ok {
				if err := <-errc; err != nil {
					return err
				}
				return ctx.Err()
			}
			if hr != nil {
				if want, in := hr.at[ch.Node]; in {
					switch {
					case reached[ch.Node]:
						held = append(held, ch)
						continue
					case ch.Op == "mark" && covers(ch.Pos, want):
						marks[ch.Node] = ch.Pos
						reached[ch.Node] = true
						if err := checkHold(); err != nil {
							return err
						}
						continue
					case ch.Op != "mark" && covers(ch.Pos, want):
						reached[ch.Node] = true
						held = append(held, ch)
						if err := checkHold(); err != nil {
							return err
						}
						continue
					}
				}
			}
			if err := dispatch(&ch); err != nil {
				return err
			}
			if ch.Op == "mark" && len(changes) == 0 {
				if err := barrier(); err != nil {
					return err
				}
			}
		case req := <-a.holds:
			if err := barrier(); err != nil {
				return err
			}
			close(req.frozen)
			select {
			case req.at = <-req.atc:
			case <-req.release:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
			cur := a.position()
			reached = map[string]bool{}
			for n, p := range req.at {
				if covers(cur[n], p) {
					reached[n] = true
				}
			}
			hr = req
			if err := checkHold(); err != nil {
				return err
			}
		case <-tick.C:
			if len(marks) > 0 {
				if err := barrier(); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ops turns one row change into the operations that apply it.
func (a *applier) ops(ch *changestream.Change) ([]op, error) {
	var out []op
	row := func(img map[string]any, pkOnly bool) string {
		var b strings.Builder
		b.WriteByte('(')
		idx := a.def.pk
		if !pkOnly {
			idx = nil
		}
		n := len(a.def.cols)
		if pkOnly {
			n = len(idx)
		}
		for i := 0; i < n; i++ {
			ci := i
			if pkOnly {
				ci = idx[i]
			}
			if i > 0 {
				b.WriteByte(',')
			}
			anyLiteral(&b, lookup(img, a.def.cols[ci]))
		}
		b.WriteByte(')')
		return b.String()
	}
	locate := func(img map[string]any) (int, error) {
		return a.place.Locate(lookup(img, a.def.cols[a.keyCol]))
	}
	switch ch.Op {
	case "insert":
		t, err := locate(ch.After)
		if err != nil {
			return nil, err
		}
		return append(out, op{target: t, row: row(ch.After, false), pk: row(ch.After, true)}), nil
	case "delete":
		t, err := locate(ch.Before)
		if err != nil {
			return nil, err
		}
		pk := row(ch.Before, true)
		return append(out, op{target: t, del: true, row: pk, pk: pk}), nil
	case "update":
		tb, err := locate(ch.Before)
		if err != nil {
			return nil, err
		}
		ta, err := locate(ch.After)
		if err != nil {
			return nil, err
		}
		pkb, pka := row(ch.Before, true), row(ch.After, true)
		if tb != ta || pkb != pka {
			// Each key's operations go to its own worker, in order.
			out = append(out, op{target: tb, del: true, row: pkb, pk: pkb})
		}
		return append(out, op{target: ta, row: row(ch.After, false), pk: pka}), nil
	}
	return nil, fmt.Errorf("change of unknown kind %q", ch.Op)
}

// lookup finds column name in a row image (binary log names keep the
// table's spelling; a different case still matches).
func lookup(img map[string]any, name string) any {
	if v, ok := img[name]; ok {
		return v
	}
	for k, v := range img {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

// worker applies ops in order, grouping neighbours of one kind and target
// into one statement.
func (a *applier) worker(ctx context.Context, q <-chan op) {
	conns := map[string]*client.Conn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var pending []op
	var failed error
	type slot struct {
		target int
		pk     string
	}
	last := map[slot]int{} // the index in pending of each row's last op
	flush := func() {
		if len(pending) == 0 || failed != nil {
			pending = pending[:0]
			return
		}
		// Each op carries a row's whole state (its after image, or its
		// absence), so only the last op of each row in each subtable
		// counts: the rest are dropped, and what is left holds each row
		// once, so the deletes and the REPLACEs of a subtable run as one
		// statement each, in any order.
		clear(last)
		for i, o := range pending {
			last[slot{o.target, o.pk}] = i
		}
		byTarget := map[int][2][]op{}
		for i, o := range pending {
			if last[slot{o.target, o.pk}] != i {
				continue
			}
			g := byTarget[o.target]
			k := 0
			if o.del {
				k = 1
			}
			g[k] = append(g[k], o)
			byTarget[o.target] = g
		}
		for _, g := range byTarget {
			for _, ops := range g {
				for len(ops) > 0 && failed == nil {
					n := min(len(ops), 1000)
					failed = a.exec(conns, ops[:n])
					ops = ops[n:]
				}
			}
		}
		if failed == nil {
			a.changes.Add(int64(len(pending)))
		}
		pending = pending[:0]
	}
	for o := range q {
		if o.flush != nil {
			flush()
			o.flush <- failed
			continue
		}
		pending = append(pending, o)
		if len(pending) >= 2000 || len(q) == 0 {
			flush()
		}
	}
}

func (a *applier) exec(conns map[string]*client.Conn, ops []op) error {
	t := a.targets[ops[0].target]
	var b strings.Builder
	if ops[0].del {
		b.WriteString("DELETE FROM ")
		b.WriteString(qualified(t.db, t.name))
		b.WriteString(" WHERE (")
		b.WriteString(a.def.pkList())
		b.WriteString(") IN (")
	} else {
		b.WriteString("REPLACE INTO ")
		b.WriteString(qualified(t.db, t.name))
		b.WriteString(" (")
		b.WriteString(a.def.colList())
		b.WriteString(") VALUES ")
	}
	for i, o := range ops {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(o.row)
	}
	if ops[0].del {
		b.WriteByte(')')
	}
	q := b.String()
	for attempt := 0; ; attempt++ {
		c := conns[t.node]
		if c == nil {
			ep, err := a.env.Endpoint(t.node)
			if err != nil {
				return err
			}
			if c, err = dial(ep); err != nil {
				return err
			}
			conns[t.node] = c
		}
		_, err := c.Execute(q)
		if err == nil {
			return nil
		}
		if attempt == 1 || isServerError(err) {
			return fmt.Errorf("applying to %s.%s on %s: %w", t.db, t.name, t.node, err)
		}
		c.Close()
		delete(conns, t.node)
	}
}

// lag is how far behind the binary log the apply is.
func (a *applier) lag() time.Duration {
	o := a.oldest.Load()
	if o == 0 {
		return 0
	}
	return max(0, time.Since(time.Unix(o, 0)))
}

// op is one statement's share of work on one target.
type op struct {
	target int
	del    bool
	row    string // "(v1,v2,...)": the after image, or the primary key of a delete
	pk     string // the row's primary key: which worker applies it
	flush  chan error
}
