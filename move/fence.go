package move

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// The fence. A cutover pauses the statements of the proxy that runs the
// workflow only; another proxy in front of the same nodes may still route
// by the old rule. So that none of them can write to the old subtables
// after the swap, the swap happens only once they are fenced at the
// backend: inside the pause, each old subtable is renamed to its fenced
// name (t_0000 -> t_0000__fenced), one RENAME TABLE per node, which waits
// (bounded) for the transactions other proxies have open on them. A proxy
// still on the old rule then gets ERROR 1146 (no such table), which it
// reads as "my rule for this table is stale" (proxy/server/stale.go). The
// positions the new subtables must reach are read after the fence, so
// everything any proxy wrote to the old subtables is carried over.
//
// The reverse stream writes to the fenced names (its targets are fenced);
// a rollback fences the new subtables the same way and renames the old
// ones back before its swap; complete drops the fenced tables. The
// binary log streams identify tables by their exact names
// (changestream.Names), so a fenced name is no table of either rule.

// fenceSuffix ends the name of a fenced subtable.
const fenceSuffix = "__fenced"

// maxTableName is the longest table name MariaDB takes.
const maxTableName = 64

// FencedName is the name subtable name has while fenced.
func FencedName(name string) string { return name + fenceSuffix }

// fencedTargets returns ts under their fenced names.
func fencedTargets(ts []copyTarget) []copyTarget {
	out := make([]copyTarget, len(ts))
	for i, t := range ts {
		out[i] = copyTarget{node: t.node, db: t.db, name: FencedName(t.name)}
	}
	return out
}

// fencer holds a connection to each node of some subtables, opened before
// a pause, so that the fence inside it costs one RENAME TABLE per node,
// run on every node at once.
type fencer struct {
	r     *run
	conns map[string]*client.Conn
}

// newFencer connects to the nodes of the tables in tss.
func (r *run) newFencer(tss ...[]copyTarget) (*fencer, error) {
	f := &fencer{r: r, conns: map[string]*client.Conn{}}
	for _, ts := range tss {
		for _, t := range ts {
			if f.conns[t.node] != nil {
				continue
			}
			ep, err := r.m.env.Endpoint(t.node)
			if err == nil {
				f.conns[t.node], err = dial(ep)
			}
			if err != nil {
				f.close()
				return nil, err
			}
		}
	}
	return f, nil
}

func (f *fencer) close() {
	for _, c := range f.conns {
		if c != nil {
			c.Close()
		}
	}
}

// rename renames each of ts to its fenced name (fence) or back from it,
// in one RENAME TABLE per node, on every node at once, waiting at most
// wait for the tables' metadata locks (transactions other proxies have
// open on them). It returns the tables renamed (so that a caller can undo
// them) and the first error; a node is all or nothing.
func (f *fencer) rename(ts []copyTarget, fence bool, wait time.Duration) (done []copyTarget, err error) {
	var nodes []string
	byNode := map[string][]copyTarget{}
	for _, t := range ts {
		if byNode[t.node] == nil {
			nodes = append(nodes, t.node)
		}
		byNode[t.node] = append(byNode[t.node], t)
	}
	for _, t := range ts {
		if n := FencedName(t.name); len(n) > maxTableName {
			return nil, fmt.Errorf("subtable %s.%s cannot be fenced: %s is longer than %d characters", t.db, t.name, n, maxTableName)
		}
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		var b strings.Builder
		for k, t := range byNode[n] {
			from, to := t.name, FencedName(t.name)
			if !fence {
				from, to = to, from
			}
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString(qualified(t.db, from) + " TO " + qualified(t.db, to))
		}
		q := fmt.Sprintf("SET STATEMENT lock_wait_timeout=%d FOR RENAME TABLE %s", secs, b.String())
		c := f.conns[n]
		if c == nil {
			errs[i] = fmt.Errorf("no connection to %s", n)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Execute(q); err != nil {
				errs[i] = fmt.Errorf("renaming the subtables on %s: %w", n, err)
			}
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		if errs[i] == nil {
			done = append(done, byNode[n]...)
		} else if err == nil {
			err = errs[i]
		}
	}
	return done, err
}

// rename is fencer.rename on connections of its own.
func (r *run) rename(ts []copyTarget, fence bool, wait time.Duration) ([]copyTarget, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	f, err := r.newFencer(ts)
	if err != nil {
		return nil, err
	}
	defer f.close()
	return f.rename(ts, fence, wait)
}

// settle puts each of ts in the state want (fenced or not) where it is
// not: after a restart in the middle of a swap, the phase saved says which
// subtables are in force. A table found under neither name, or under both,
// is left as it is.
func (r *run) settle(ctx context.Context, ts []copyTarget, fence bool) error {
	byNode := map[string][]copyTarget{}
	for _, t := range ts {
		byNode[t.node] = append(byNode[t.node], t)
	}
	var wrong []copyTarget
	for n, nts := range byNode {
		ep, err := r.m.env.Endpoint(n)
		if err != nil {
			return err
		}
		c, err := dial(ep)
		if err != nil {
			return err
		}
		res, err := c.Execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = " + mysql.QuoteString(nts[0].db, "utf8mb4"))
		c.Close()
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for i := range res.Values {
			s, _ := res.GetString(i, 0)
			have[s] = true
		}
		for _, t := range nts {
			plain, fenced := have[t.name], have[FencedName(t.name)]
			if fence && plain && !fenced || !fence && fenced && !plain {
				wrong = append(wrong, t)
			}
		}
	}
	if len(wrong) == 0 {
		return ctx.Err()
	}
	slices.SortFunc(wrong, func(a, b copyTarget) int { return strings.Compare(a.node+"."+a.name, b.node+"."+b.name) })
	_, err := r.rename(wrong, fence, time.Minute)
	return err
}

// placementTargets are the subtables of rule, in its placement's order
// (the order an applier's targets must have).
func placementTargets(db string, rule config.ShardRule) ([]copyTarget, error) {
	p, err := router.NewPlacement(rule)
	if err != nil {
		return nil, err
	}
	var out []copyTarget
	for _, t := range p.Subtables() {
		out = append(out, copyTarget{node: t.Node, db: db, name: t.Name})
	}
	return out, nil
}

// unrename undoes what a failed swap renamed: the tables it unfenced are
// fenced again, then the ones it fenced unfenced. A failure is logged:
// the workflow's next start settles the tables again.
func (r *run) unrename(fenced, unfenced []copyTarget) {
	if _, err := r.rename(unfenced, true, time.Minute); err != nil {
		r.m.log.Error("cannot fence the subtables again after a failed swap", zap.String("workflow", r.spec().Name), zap.Error(err))
	}
	if _, err := r.rename(fenced, false, time.Minute); err != nil {
		r.m.log.Error("cannot unfence the subtables after a failed swap", zap.String("workflow", r.spec().Name), zap.Error(err))
	}
}

// isLockWait reports whether err is a lock wait timeout (1205): a
// transaction kept a subtable in use while the fence waited.
func isLockWait(err error) bool {
	var me *gmysql.MyError
	return errors.As(err, &me) && me.Code == mysql.ErLockWaitTimeout
}
