package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/topo"
)

// plan FILE and apply FILE: a ks.yaml edit is compared with the
// configuration in force (POST /admin/plan) and applied against the
// version planned (POST /admin/apply). With -etcd the topology in etcd is
// the one in force: the plan is computed by the proxy at -admin, which
// must serve etcd's version, and the apply writes etcd (compare-and-swap
// on the planned revision) with the moving tables keeping their rule,
// then starts their workflows through that proxy. The cutover still
// pauses that proxy only: the fleet-wide cutover is not built.

// planCmd prints the plan of FILE.
func planCmd(c *client, ff fleetFlags, args []string, w io.Writer) error {
	if len(args) != 1 {
		return usagef("plan", "needs the FILE: shardgate plan FILE")
	}
	text, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	p, _, err := planOf(c, ff, text)
	if err != nil {
		return err
	}
	printPlan(w, p)
	if len(p.Refused) > 0 {
		return fmt.Errorf("%d changes cannot be made: an apply of this file changes nothing", len(p.Refused))
	}
	return nil
}

// applyCmd plans FILE, shows the plan, applies it and, with -wait, shows
// the progress of the workflows it started until they are in sync.
func applyCmd(c *client, ff fleetFlags, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	wait := fs.Bool("wait", false, "show the started workflows' progress until they are in sync")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("apply", "needs the FILE: shardgate apply FILE [-wait]")
	}
	text, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	p, st, err := planOf(c, ff, text)
	if err != nil {
		return err
	}
	printPlan(w, p)
	if len(p.Refused) > 0 {
		return fmt.Errorf("%d changes cannot be made: nothing applied", len(p.Refused))
	}
	if p.Empty() {
		return nil
	}
	var done move.Applied
	if st != nil {
		done, err = applyFleet(c, st, p, text)
		st.Close()
	} else {
		err = c.do("POST", "/admin/apply", move.ApplyRequest{Config: string(text), Version: p.Version}, &done)
	}
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	printApplied(w, &done, st != nil)
	if !*wait {
		return nil
	}
	for _, name := range done.Started {
		if err := watch(c, name, w); err != nil {
			return err
		}
	}
	return nil
}

// planOf asks the proxy for the plan of text. With -etcd it also opens
// the store (returned, to be closed) and checks that the proxy serves the
// topology in etcd, which the plan then carries as TopologyVersion.
func planOf(c *client, ff fleetFlags, text []byte) (*move.Plan, *topo.Store, error) {
	var rev int64
	var st *topo.Store
	if *ff.etcd != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if st, err = ff.open(ctx); err != nil {
			return nil, nil, err
		}
		v, err := st.Get(ctx)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		rev = v.Rev
	}
	var p move.Plan
	if err := c.do("POST", "/admin/plan", string(text), &p); err != nil {
		if st != nil {
			st.Close()
		}
		return nil, nil, fmt.Errorf("plan: %w", err)
	}
	if st != nil && p.TopologyVersion != rev {
		st.Close()
		return nil, nil, fmt.Errorf("the proxy at -admin serves topology version %d, etcd holds version %d: wait until it applies it (shardgate fleet), or ask another proxy", p.TopologyVersion, rev)
	}
	return &p, st, nil
}

// applyFleet writes the directly applicable part of text to etcd (the
// moving tables keep the rule in force), conditioned on the planned
// revision, then starts the workflows through the proxy.
func applyFleet(c *client, st *topo.Store, p *move.Plan, text []byte) (move.Applied, error) {
	done := move.Applied{Plan: p}
	keep := map[string]config.ShardRule{}
	for _, r := range p.Reshards {
		keep[r.Table] = r.From
	}
	direct, err := config.WithRulesText(text, keep)
	if err != nil {
		return done, err
	}
	if p.Reload {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rev, err := st.Put(ctx, direct, p.TopologyVersion)
		if err != nil {
			return done, fmt.Errorf("topology change refused: %w (plan again)", err)
		}
		done.Reloaded, done.Version = true, uint64(rev)
	}
	for _, r := range p.Reshards {
		if r.Workflow != "" {
			continue
		}
		req := map[string]any{"table": r.Table, "type": r.To.Type, "key": r.To.Key, "nodes": r.To.Nodes, "locations": r.To.Locations,
			"table_row_limit": r.To.TableRowLimit, "date_range": r.To.DateRange}
		var wf move.Workflow
		if err := c.do("POST", "/admin/workflows", req, &wf); err != nil {
			return done, fmt.Errorf("%s: %w (started so far: %s)", r.Table, err, strings.Join(done.Started, ", "))
		}
		done.Started = append(done.Started, wf.Spec.Name)
	}
	return done, nil
}

// printPlan writes p for a reader.
func printPlan(w io.Writer, p *move.Plan) {
	fmt.Fprintf(w, "plan against configuration version %d", p.Version)
	if p.TopologyVersion != 0 {
		fmt.Fprintf(w, " (topology version %d)", p.TopologyVersion)
	}
	fmt.Fprintf(w, ", computed in %.0f ms\n", p.Seconds*1000)
	if p.Empty() {
		fmt.Fprintln(w, "nothing to change: the file is what is in force")
	}
	list := func(what string, names []string) {
		if len(names) > 0 {
			fmt.Fprintf(w, "%-15s %s\n", what+":", strings.Join(names, ", "))
		}
	}
	list("nodes added", p.NodesAdded)
	list("nodes removed", p.NodesRemoved)
	list("users added", p.UsersAdded)
	list("users removed", p.UsersRemoved)
	if len(p.Rules) > 0 {
		fmt.Fprintln(w, "new rules, applied by the reload (their tables have no rows):")
		for _, r := range p.Rules {
			fmt.Fprintf(w, "  %s (user %s): %s", r.Table, r.User, layout(&r.Rule))
			if r.Note != "" {
				fmt.Fprintf(w, " (%s)", r.Note)
			}
			fmt.Fprintln(w)
		}
	}
	if len(p.Reshards) > 0 {
		fmt.Fprintln(w, "rows to move, one reshard workflow each:")
		for _, r := range p.Reshards {
			fmt.Fprintf(w, "  %s (user %s): %s -> %s\n", r.Table, r.User, layout(&r.From), layout(&r.To))
			if r.Workflow != "" {
				fmt.Fprintf(w, "    already moving in workflow %s: nothing to start\n", r.Workflow)
				continue
			}
			fmt.Fprintf(w, "    %d rows, %s to copy; %s\n", r.Rows, sizeOf(r.Bytes), r.Estimate)
		}
	}
	if p.Reload && len(p.NodesAdded)+len(p.NodesRemoved)+len(p.UsersAdded)+len(p.UsersRemoved)+len(p.Rules) == 0 {
		fmt.Fprintln(w, "settings: other reloadable keys change (passwords, allow_ips, limits, replicas, ...)")
	}
	if len(p.Refused) > 0 {
		fmt.Fprintln(w, "cannot change:")
		for _, r := range p.Refused {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
}

// printApplied writes what an apply did.
func printApplied(w io.Writer, done *move.Applied, fleet bool) {
	switch {
	case done.Reloaded && fleet:
		fmt.Fprintf(w, "applied: topology version %d stored; every proxy applies it (shardgate fleet shows which did)\n", done.Version)
	case done.Reloaded:
		fmt.Fprintf(w, "applied: configuration version %d in force\n", done.Version)
	}
	for _, name := range done.Started {
		fmt.Fprintf(w, "workflow %s started (shardgate status %s; cut over with shardgate cutover %s)\n", name, name, name)
	}
	if fleet && len(done.Started) > 0 {
		fmt.Fprintln(w, "note: the cutover pauses the proxy that runs the workflow only; stop the others' writes to the table across it")
	}
}

// layout is a rule's placement in a few words: type(key) node:subtables ...
func layout(r *config.ShardRule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s)", r.Type, r.Key)
	for i, n := range r.Nodes {
		if i < len(r.Locations) {
			fmt.Fprintf(&b, " %s:%d", n, r.Locations[i])
		} else {
			fmt.Fprintf(&b, " %s", n)
		}
	}
	if r.TableRowLimit > 0 {
		fmt.Fprintf(&b, " limit %d", r.TableRowLimit)
	}
	if r.Generation > 0 {
		fmt.Fprintf(&b, " g%d", r.Generation)
	}
	return b.String()
}

func sizeOf(n int64) string {
	switch {
	case n < 0:
		return "? bytes"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
