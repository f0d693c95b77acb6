package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/admin"
	"github.com/shardgate/shardgate/router"
)

// A ks.yaml edit is planned before it is applied (POST /admin/plan and
// /admin/apply, shardgate plan and apply): the file is compared with the
// configuration in force, and each change is put in one class: nodes and
// users, new rules a reload applies directly, changed rules whose rows
// move in a reshard workflow, and what cannot change (compareConfigs'
// reasons). An apply computes the plan again against the version the
// caller planned, reloads the file with the moving tables keeping the
// rule in force, and starts one workflow per moving table; a table that
// a running workflow already moves to the same layout, and a rule already
// in force (whatever its generation), is no change, so applying a file
// twice changes nothing the second time.
//
// Only the proxy that applies takes part: the fleet-wide cutover (every
// proxy holding statements, old subtables fenced) is not built here.

// planner plans and applies ks.yaml edits for a server (admin.Planner).
type planner struct{ s *Server }

// Plan compares the ks.yaml text with the configuration in force
// (admin.Planner).
func (pl planner) Plan(text []byte) (*move.Plan, error) {
	cfg, err := pl.parse(text)
	if err != nil {
		return nil, err
	}
	p, _ := pl.plan(pl.s.lv(), cfg)
	return p, nil
}

// Apply puts the ks.yaml text in force if the configuration is still
// version (admin.Planner): the reloadable part by a reload, each moving
// table by a reshard workflow.
func (pl planner) Apply(text []byte, version uint64) (*move.Applied, error) {
	s := pl.s
	if s.fleet != nil {
		return nil, fmt.Errorf("%w: in a fleet the topology is in etcd: shardgate -etcd ENDPOINTS apply FILE writes it", admin.ErrConflict)
	}
	cfg, err := pl.parse(text)
	if err != nil {
		return nil, err
	}
	s.liveConfig.mu.Lock()
	lv := s.lv()
	if lv.version != version {
		s.liveConfig.mu.Unlock()
		return nil, fmt.Errorf("%w: the configuration is at version %d, the plan was computed against version %d: plan again", admin.ErrConflict, lv.version, version)
	}
	p, direct := pl.plan(lv, cfg)
	if len(p.Refused) > 0 {
		s.liveConfig.mu.Unlock()
		return nil, fmt.Errorf("%w: nothing changed: %s", admin.ErrConflict, strings.Join(p.Refused, "; "))
	}
	moves := 0
	for _, r := range p.Reshards {
		if r.Workflow == "" {
			moves++
		}
	}
	if moves > 0 && s.flows == nil {
		s.liveConfig.mu.Unlock()
		return nil, fmt.Errorf("%w: nothing changed: %d tables' rows must move, and workflows need the sidecar database's node", admin.ErrConflict, moves)
	}
	res := &move.Applied{Plan: p, Version: lv.version}
	if p.Reload {
		err := direct.Validate()
		if err == nil {
			err = s.reloadLocked(direct)
		}
		if err != nil {
			s.liveConfig.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", admin.ErrConflict, err)
		}
		res.Reloaded, res.Version = true, s.lv().version
	}
	s.liveConfig.mu.Unlock()
	for _, r := range p.Reshards {
		if r.Workflow != "" {
			continue
		}
		name, err := pl.startReshard(r)
		if err != nil {
			return res, fmt.Errorf("%s: %w (started so far: %s)", r.Table, err, strings.Join(res.Started, ", "))
		}
		res.Started = append(res.Started, name)
	}
	return res, nil
}

// startReshard starts the workflow that moves r's table to r.To, by the
// path POST /admin/workflows takes.
func (pl planner) startReshard(r move.PlanReshard) (string, error) {
	to := r.To
	sp, err := pl.s.flows.Spec(admin.MoveRequest{Table: r.Table, Type: to.Type, Key: to.Key, Nodes: to.Nodes, Locations: to.Locations,
		TableRowLimit: to.TableRowLimit, DateRange: to.DateRange})
	if err != nil {
		return "", err
	}
	wf, err := pl.s.flows.Start(sp)
	if err != nil {
		return "", err
	}
	return wf.Spec.Name, nil
}

// parse reads a ks.yaml text as ReloadFile reads the file: the server's
// overlay (the command line's own settings) is put over it.
func (pl planner) parse(text []byte) (*config.Config, error) {
	cfg, err := config.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", admin.ErrBadConfig, err)
	}
	if pl.s.overlay != nil {
		pl.s.overlay(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", admin.ErrBadConfig, err)
	}
	return cfg, nil
}

// plan classifies the changes from lv to cfg. It returns the plan and
// the configuration a reload applies: cfg with every table that has a
// rule in force keeping that rule (its move is a workflow's).
func (pl planner) plan(lv *live, cfg *config.Config) (*move.Plan, *config.Config) {
	began := time.Now()
	p := &move.Plan{Version: lv.version}
	if st := pl.s.fleetStats(); st != nil {
		p.TopologyVersion = st.Applied
	}
	running, rate := pl.workflows()
	p.CopyRate = rate
	seen := map[string]bool{}
	for i := range cfg.Schemas {
		sc := &cfg.Schemas[i]
		prev := lv.cfg.SchemaFor(sc.User)
		if prev == nil {
			p.Refused = append(p.Refused, unlikeInForce(lv.cfg, sc)...)
			continue
		}
		for k := range sc.Shard {
			nr := &sc.Shard[k]
			pr := ruleIn(prev, nr.DB, nr.Table)
			if pr == nil {
				continue
			}
			if !sameRule(pr, nr) && !seen[nr.DB+"."+nr.Table] {
				seen[nr.DB+"."+nr.Table] = true
				pl.classify(p, sc.User, pr, nr, running)
			}
			*nr = *pr // the reload keeps the rule in force
		}
	}
	ch, diff := compareConfigs(lv.cfg, cfg)
	p.Refused = append(p.Refused, diff...)
	for _, n := range ch.addNodes {
		p.NodesAdded = append(p.NodesAdded, n.Name)
	}
	p.NodesRemoved = ch.removeNodes
	p.UsersAdded, p.UsersRemoved = userChanges(lv.cfg, cfg)
	pl.newRules(p, cfg, ch.addRules)
	pl.sizes(p)
	p.Reload = !sameExported(lv.cfg, cfg)
	p.Seconds = time.Since(began).Seconds()
	return p, cfg
}

// classify puts the change of a table's rule from pr (in force) to nr
// (the file's) in p: a reshard, one a running workflow already makes, or
// a refusal.
func (pl planner) classify(p *move.Plan, user string, pr, nr *config.ShardRule, running map[string]move.Status) {
	table := nr.DB + "." + nr.Table
	if pr.Type != "hash" && pr.Type != "range" || nr.Type != "hash" && nr.Type != "range" {
		p.Refused = append(p.Refused, fmt.Sprintf("%s: the rule changes from %s to %s: only hash and range tables can be resharded", table, pr.Type, nr.Type))
		return
	}
	to := *pr
	err := newRule(&to, admin.MoveRequest{Type: nr.Type, Key: nr.Key, Nodes: nr.Nodes, Locations: nr.Locations, TableRowLimit: nr.TableRowLimit, DateRange: nr.DateRange})
	if err != nil {
		p.Refused = append(p.Refused, fmt.Sprintf("%s: %v", table, err))
		return
	}
	if !sameRule(&to, nr) {
		p.Refused = append(p.Refused, fmt.Sprintf("%s: the rule changes in keys a reshard does not change (it moves to new type, key, nodes, locations, table_row_limit; sequence and the others stay): change them after the move", table))
		return
	}
	rs := move.PlanReshard{User: user, Table: table, From: *pr, To: to}
	if wf, ok := running[table]; ok {
		if !sameRule(&wf.Spec.To, &to) {
			p.Refused = append(p.Refused, fmt.Sprintf("%s: workflow %s (%s) moves it to another layout (%s): cancel it first", table, wf.Spec.Name, wf.State.Phase,
				strings.Join(move.Targets(wf.Spec.To), ",")))
			return
		}
		rs.Workflow = wf.Spec.Name
	}
	p.Reshards = append(p.Reshards, rs)
}

// newRules puts the rules a reload adds in p: directly applied when
// their tables have no rows, refused otherwise (checkNoRows' reason).
func (pl planner) newRules(p *move.Plan, cfg *config.Config, added []addedRule) {
	for _, ar := range added {
		r := move.PlanRule{User: ar.user, Table: ar.rule.DB + "." + ar.rule.Table, Rule: ar.rule}
		nodes := slices.Clone(ar.rule.Nodes)
		if sc := cfg.SchemaFor(ar.user); sc != nil {
			nodes = append(nodes, sc.Default)
		}
		if slices.ContainsFunc(nodes, func(n string) bool { return pl.s.node(n) == nil }) {
			r.Note = "on a node the apply adds: the reload checks that it has no rows"
		} else if err := checkNoRows(cfg, []addedRule{ar}, pl.s.node); err != nil {
			p.Refused = append(p.Refused, err.Error()+" (a table without a rule cannot be resharded: import it with shardgate import, or shard it while it is empty)")
			continue
		}
		p.Rules = append(p.Rules, r)
	}
}

// workflows returns the workflows that have not ended, by table, and the
// copy rate (rows/s) of the newest workflow that copied rows.
func (pl planner) workflows() (map[string]move.Status, float64) {
	running := map[string]move.Status{}
	if pl.s.flows == nil {
		return running, 0
	}
	all, err := pl.s.flows.List()
	if err != nil {
		return running, 0
	}
	var rate float64
	var newest time.Time
	for _, st := range all {
		if !st.Ended() && st.Spec.Kind == move.KindReshard {
			running[st.Spec.Logical()] = st
		}
		if s := st.State; s.CopySeconds > 0 && s.RowsCopied > 0 && st.Spec.Created.After(newest) {
			rate, newest = float64(s.RowsCopied)/s.CopySeconds, st.Spec.Created
		}
	}
	return running, rate
}

// sizes fills in the rows and bytes of every reshard's source subtables
// and the time their copy takes at the plan's rate.
func (pl planner) sizes(p *move.Plan) {
	for i := range p.Reshards {
		r := &p.Reshards[i]
		r.Rows, r.Bytes = -1, -1
		rows, bytes, err := pl.size(r.From)
		switch {
		case err != nil:
			r.Estimate = "rows unknown: " + err.Error()
		case p.CopyRate > 0:
			r.Rows, r.Bytes = rows, bytes
			r.EstimateSeconds = float64(rows) / p.CopyRate
			r.Estimate = fmt.Sprintf("about %s at %.0f rows/s", (time.Duration(r.EstimateSeconds*1000) * time.Millisecond).Round(time.Millisecond), p.CopyRate)
		default:
			r.Rows, r.Bytes = rows, bytes
			r.Estimate = "no rate measured yet"
		}
	}
}

// size sums TABLE_ROWS and DATA_LENGTH of rule's subtables
// (information_schema), one query per node.
func (pl planner) size(rule config.ShardRule) (rows, bytes int64, err error) {
	place, err := router.NewPlacement(rule)
	if err != nil {
		return 0, 0, err
	}
	byNode := map[string][]string{}
	for _, st := range place.Subtables() {
		byNode[st.Node] = append(byNode[st.Node], mysql.QuoteString(st.Name, "utf8mb4"))
	}
	cfg := pl.s.cfg()
	for node, names := range byNode {
		n := pl.s.node(node)
		if n == nil {
			return 0, 0, fmt.Errorf("no node %s", node)
		}
		r, b, err := tableSizes(cfg, n, "SELECT IFNULL(SUM(TABLE_ROWS), 0), IFNULL(SUM(DATA_LENGTH), 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "+
			mysql.QuoteString(rule.DB, "utf8mb4")+" AND TABLE_NAME IN ("+strings.Join(names, ", ")+")")
		if err != nil {
			return 0, 0, fmt.Errorf("node %s: %w", node, err)
		}
		rows, bytes = rows+r, bytes+b
	}
	return rows, bytes, nil
}

// tableSizes runs the query (two numbers) on a connection of its own to
// n's master.
func tableSizes(cfg *config.Config, n *backend.Node, query string) (int64, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Backend.DialTimeout+cfg.Backend.CommandTimeout)
	defer cancel()
	c, err := n.Dial(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	res, err := c.Exec(query)
	if err != nil {
		return 0, 0, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 2 {
		return 0, 0, errors.New("information_schema.TABLES: unexpected answer")
	}
	rows, _ := strconv.ParseInt(string(res.Rows[0][0]), 10, 64)
	bytes, _ := strconv.ParseInt(string(res.Rows[0][1]), 10, 64)
	return rows, bytes, nil
}

// ruleIn returns sc's rule for db.table, nil when it has none.
func ruleIn(sc *config.Schema, db, table string) *config.ShardRule {
	for k := range sc.Shard {
		if r := &sc.Shard[k]; r.DB == db && r.Table == table {
			return r
		}
	}
	return nil
}

// sameRule reports whether a and b place rows alike: equal but for the
// generation (a rule in force after a cutover has the next generation;
// the file may still say the one before).
func sameRule(a, b *config.ShardRule) bool {
	x, y := *a, *b
	x.Generation = y.Generation
	return reflect.DeepEqual(x, y)
}

// unlikeInForce names the rules of a new user's schema that place a
// table another way than a rule in force: the new user would not find
// the rows where they are.
func unlikeInForce(old *config.Config, sc *config.Schema) []string {
	var out []string
	for k := range sc.Shard {
		nr := &sc.Shard[k]
		for i := range old.Schemas {
			if pr := ruleIn(&old.Schemas[i], nr.DB, nr.Table); pr != nil && !sameRule(pr, nr) {
				out = append(out, fmt.Sprintf("the schema of new user %s has a rule for %s.%s unlike the one in force (user %s's): give it the rule in force, and move the rows in that schema",
					sc.User, nr.DB, nr.Table, old.Schemas[i].User))
				break
			}
		}
	}
	return out
}

// userChanges names the users b adds to a and removes from it.
func userChanges(a, b *config.Config) (added, removed []string) {
	has := func(c *config.Config, u string) bool {
		return slices.ContainsFunc(c.Users, func(x config.User) bool { return x.User == u })
	}
	for _, u := range b.Users {
		if !has(a, u.User) {
			added = append(added, u.User)
		}
	}
	for _, u := range a.Users {
		if !has(b, u.User) {
			removed = append(removed, u.User)
		}
	}
	return added, removed
}

// sameExported reports whether a and b are equal in every exported field.
func sameExported(a, b *config.Config) bool {
	av, bv := reflect.ValueOf(*a), reflect.ValueOf(*b)
	for i := 0; i < av.NumField(); i++ {
		if av.Type().Field(i).IsExported() && !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return false
		}
	}
	return true
}
