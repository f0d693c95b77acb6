package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/topo"
)

// The fleet's side of a cutover (topo/cutover.go has the protocol): the
// proxy that cuts a table over announces it (Cutover); every other
// member's agent holds the table in its proxy (CutoverProxy), acknowledges,
// and lets the statements go when the announcement ends, after putting the
// rule it carries in force.

// CutoverProxy is implemented by a proxy that holds a table's statements
// while another proxy of the fleet cuts it over (proxy/server.Server).
type CutoverProxy interface {
	// HoldTable shuts db.table's gate and waits until no session is
	// inside, or ctx ends (nothing stays held then). release puts to in
	// force when not nil, then opens the gate.
	HoldTable(ctx context.Context, db, table string) (release func(to *config.ShardRule), err error)
}

// Cutover announces a cutover of db.table to the fleet: every other live
// member holds the table for at most hold. wait waits, until its context
// ends, for the members that were live at the announcement to hold it
// with no session inside, and returns those that did not; end writes the
// outcome (to: the rule in force now; nil: nothing changed) and removes
// the announcement, within two seconds (past them the members let go when
// hold has passed). It is server.FleetCutover.
func (a *Agent) Cutover(ctx context.Context, db, table string, hold time.Duration) (wait func(context.Context) []string, end func(to *config.ShardRule), err error) {
	if st := a.Status(); !st.Reachable {
		// Known unreachable: no time spent on it, the fence protects.
		return nil, nil, fmt.Errorf("etcd unreachable at the last check: %s", st.Error)
	}
	mb := a.membership()
	members, err := a.o.Store.Members(ctx)
	if err != nil {
		return nil, nil, err
	}
	var want []string
	for _, m := range members {
		if m.ID != mb.ID() {
			want = append(want, m.ID)
		}
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	c, err := mb.AnnounceCutover(ctx, topo.Cutover{Table: db + "." + table, ID: hex.EncodeToString(id), Hold: hold})
	if err != nil {
		return nil, nil, err
	}
	wait = func(ctx context.Context) []string {
		if len(want) == 0 {
			return nil
		}
		missing, err := a.o.Store.WaitAcks(ctx, c, want)
		if err != nil {
			a.log.Warn("cannot read the fleet's acknowledgements of a cutover", zap.String("table", c.Table), zap.Error(err))
		}
		return missing
	}
	end = func(to *config.ShardRule) {
		var rule json.RawMessage
		if to != nil {
			rule, _ = json.Marshal(to)
		}
		ectx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := mb.EndCutover(ectx, c, rule); err != nil {
			a.log.Warn("cannot end the cutover's announcement; the other proxies let go after its hold", zap.String("table", c.Table),
				zap.Duration("hold", hold), zap.Error(err))
		}
	}
	return wait, end, nil
}

// followed is one announcement this agent follows: the goroutine that
// holds the table ends with ctx (cancel); final is the announcement as it
// ended, when it ended done.
type followed struct {
	id     string
	cancel context.CancelFunc
	mu     sync.Mutex
	final  *topo.Cutover
}

// finish ends the hold, with the announcement's outcome when c is not nil.
func (f *followed) finish(c *topo.Cutover) {
	f.mu.Lock()
	if c != nil && f.final == nil {
		f.final = c
	}
	f.mu.Unlock()
	f.cancel()
}

// cutoverLoop follows the fleet's cutover announcements for p: it holds
// each announced table in p until the announcement is done, gone or
// replaced, or its hold has passed.
func (a *Agent) cutoverLoop(ctx context.Context, p CutoverProxy) {
	var wg sync.WaitGroup
	defer wg.Wait()
	active := map[string]*followed{}
	for set := range a.o.Store.WatchCutovers(ctx) {
		for table, c := range set {
			if c.Member == a.id {
				continue
			}
			f := active[table]
			if f != nil && f.id != c.ID {
				f.finish(nil)
				delete(active, table)
				f = nil
			}
			switch {
			case f == nil && !c.Done:
				fctx, cancel := context.WithCancel(ctx)
				f = &followed{id: c.ID, cancel: cancel}
				active[table] = f
				wg.Go(func() { a.holdFor(fctx, p, c, f) })
			case f != nil && c.Done:
				f.finish(&c)
				delete(active, table)
			}
		}
		for table, f := range active {
			if _, ok := set[table]; !ok {
				f.finish(nil)
				delete(active, table)
			}
		}
	}
	for _, f := range active {
		f.finish(nil)
	}
}

// holdFor holds c's table in p, acknowledges once no session is inside,
// and lets go when ctx ends (f finished) or c's hold has passed.
func (a *Agent) holdFor(ctx context.Context, p CutoverProxy, c topo.Cutover, f *followed) {
	t0 := time.Now()
	hctx, cancel := context.WithTimeout(ctx, c.Hold)
	defer cancel()
	db, table, _ := strings.Cut(c.Table, ".")
	release, err := p.HoldTable(hctx, db, table)
	if err != nil {
		a.log.Info("the fleet's cutover of a table ended before this proxy could hold it", zap.String("table", c.Table),
			zap.String("by", c.Member), zap.Error(err))
		return
	}
	drained := time.Since(t0)
	actx, acancel := context.WithTimeout(hctx, c.Hold)
	err = a.membership().AckCutover(actx, c)
	acancel()
	if err != nil && hctx.Err() == nil {
		a.log.Warn("cannot acknowledge the fleet's cutover; holding the table until it ends", zap.String("table", c.Table), zap.Error(err))
	}
	<-hctx.Done()
	f.mu.Lock()
	final := f.final
	f.mu.Unlock()
	var to *config.ShardRule
	if final != nil && len(final.Rule) > 0 {
		var r config.ShardRule
		if err := json.Unmarshal(final.Rule, &r); err != nil {
			a.log.Error("the fleet's cutover ended with a rule this proxy cannot read; statements meet the fence", zap.String("table", c.Table), zap.Error(err))
		} else {
			to = &r
		}
	}
	release(to)
	how := "done"
	switch {
	case final == nil && ctx.Err() == nil:
		how = "hold passed"
	case final == nil:
		how = "announcement gone"
	}
	a.log.Info("held a table for the fleet's cutover", zap.String("table", c.Table), zap.String("by", c.Member), zap.String("end", how),
		zap.Bool("swapped", to != nil), zap.Duration("drained", drained), zap.Duration("held", time.Since(t0)))
}
