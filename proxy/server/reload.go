package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
	"github.com/shardgate/shardgate/schema"
)

// live is what a reload replaces at once: the configuration and what is
// derived from it alone. Statements read it once each (lv); a session
// started under an older one sees the new one at its next statement.
type live struct {
	cfg     *config.Config
	router  *router.Router
	users   map[string]string
	allow   []netip.Prefix
	policy  *router.Policy // statements clients may not run
	slow    time.Duration
	version uint64 // 1 at start, one more per reload
}

func newLive(cfg *config.Config) (*live, error) {
	rt, err := router.New(cfg)
	if err != nil {
		return nil, err
	}
	var blacklist io.Reader
	if cfg.BlacklistSQLFile != "" {
		f, err := os.Open(cfg.BlacklistSQLFile)
		if err != nil {
			return nil, fmt.Errorf("blacklist_sql_file: %w", err)
		}
		defer f.Close()
		blacklist = f
	}
	policy, err := router.NewPolicy(cfg.DenyStatements, blacklist)
	if err != nil {
		return nil, fmt.Errorf("blacklist_sql_file %s: %w", cfg.BlacklistSQLFile, err)
	}
	lv := &live{cfg: cfg, router: rt, users: make(map[string]string, len(cfg.Users)), allow: cfg.AllowList(), policy: policy,
		slow: time.Duration(cfg.SlowLogTime) * time.Millisecond, version: 1}
	for _, u := range cfg.Users {
		lv.users[u.User] = u.Password
	}
	return lv, nil
}

// liveConfig holds the configuration in force and replaces it: on a
// reload (Reload) and when a cutover puts a table's new rule in force
// (swapRule). Statements read it with one atomic load (lv, cfg, rt); the
// two writers take turns under mu, so a reload keeps the rules cutovers
// put in force (overrides) and a cutover builds on the reloaded file.
//
// It also holds the backend nodes in force (nodeSet, nodes.go): a reload
// that adds nodes starts them and publishes the new set before the
// configuration whose rules use them, so a plan never names a node a
// session cannot find.
type liveConfig struct {
	current atomic.Pointer[live]
	nodeSet atomic.Pointer[nodeSet]
	// hasReplicas is set when any node has read replicas (slave).
	hasReplicas atomic.Bool

	mu        sync.Mutex
	overrides map[string]config.ShardRule // by db.table
	logger    *zap.Logger
	overlay   func(*config.Config) // Options.Overlay, for ReloadFile
	// What a reload needs of the server (set by New): startNodes builds
	// and starts nodes (pools, health checks); nodesAdded is told of
	// nodes once they are in force (metrics); rulesAdded of the tables
	// whose rules a reload added (tables.addRules).
	startNodes func(ncs []config.Node, opts config.BackendOptions) []*backend.Node
	nodesAdded func(nodes []*backend.Node)
	rulesAdded func(rt *router.Router, tables []string)
	// reloaded is told that a reload put a configuration in force (the
	// Kafka sinks restart the streams it changed: streams.go).
	reloaded func()
}

func (l *liveConfig) lv() *live { return l.current.Load() }

// rt returns the router of the configuration in force.
func (l *liveConfig) rt() *router.Router { return l.current.Load().router }

// cfg returns the configuration in force.
func (l *liveConfig) cfg() *config.Config { return l.current.Load().cfg }

// reloadable lists what a reload may change (ks.yaml keys); everything
// else needs a restart, and a changed shard rule moves rows, which only
// online resharding may do.
var reloadable = []string{"user_list", "allow_ips", "blacklist_sql_file", "deny_statements", "slow_log_time",
	"max_connections", "max_unauthenticated_connections", "max_allowed_packet", "client_write_timeout",
	"idle_in_transaction_timeout", "streams", "nodes (new nodes; nodes[].slave; removal of a node no schema uses)",
	"schema_list (new users' schemas; rw_split and read_consistency of the others; new nodes and new shard rules for tables without rows in the others)"}

// ReloadFile reads the configuration file at path and applies it
// (SIGHUP): what reloadFile applies, the rule changes it leaves for
// shardgate apply logged.
func (l *liveConfig) ReloadFile(path string) error {
	_, err := l.reloadFile(path)
	return err
}

// reloadFile reads the configuration file at path and applies everything
// a reload can (Reload) but the shard rule changes that would move rows:
// a changed rule of a table that has one in force, and a rule the file no
// longer has, keep the rule in force; a new rule for a table that has
// rows is left out. Moving rows is a reshard workflow's, which only an
// explicit shardgate apply starts (plan.go). It returns those changes, one
// sentence each, and logs them. A file that does not load, or a change a
// reload cannot make (a moved node, a restart-only key), changes nothing.
func (l *liveConfig) reloadFile(path string) (waiting []string, err error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("reload refused, nothing changed: %w", err)
	}
	if l.overlay != nil {
		l.overlay(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Tables a workflow cut over keep their new rule (as in reloadLocked):
	// a file that still has the old one asks for no move.
	cfg, waiting = holdMoves(l.lv().cfg, withRules(cfg, l.overrides), l.nodeSet.Load())
	if err := l.reloadLocked(cfg); err != nil {
		return nil, err
	}
	if len(waiting) > 0 {
		l.logger.Warn("reload: shard rule changes that move rows wait for shardgate apply; the rules in force stay", zap.Strings("rules", waiting))
	}
	return waiting, nil
}

// Reload validates cfg (already parsed) against the configuration in
// force and swaps it in: users, allow_ips, the statement policy, limits,
// the nodes' replicas and the schemas' read split take effect for the
// next statement and login; sessions and their connections stay. New
// nodes are started (pools, health checks) and new shard rules of
// existing schemas are checked to place no table that has rows. A change
// to anything else is refused and nothing changes.
func (l *liveConfig) Reload(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reloadLocked(cfg)
}

// reloadLocked is Reload with l.mu held (cfg validated).
func (l *liveConfig) reloadLocked(cfg *config.Config) error {
	// Tables a workflow cut over keep their new rule.
	cfg = withRules(cfg, l.overrides)
	old := l.lv()
	ch, diff := compareConfigs(old.cfg, cfg)
	if len(diff) > 0 {
		return fmt.Errorf("reload refused, nothing changed: %s", strings.Join(diff, "; "))
	}
	lv, err := newLive(cfg)
	if err != nil {
		return fmt.Errorf("reload refused, nothing changed: %w", err)
	}
	lv.version = old.version + 1
	cur := l.nodeSet.Load()
	started, err := l.startAdded(cfg, ch, cur)
	if err != nil {
		return fmt.Errorf("reload refused, nothing changed: %w", err)
	}
	l.setReplicas(cfg, cur)
	removed := l.publishNodes(ch, cur, started)
	l.current.Store(lv)
	for _, n := range removed {
		n.Close() // no schema used it: no session holds its connections
	}
	if tables := addedTables(old.router, lv.router); len(tables) > 0 && l.rulesAdded != nil {
		l.rulesAdded(lv.router, tables)
	}
	l.logReload(lv, ch, started, removed)
	if l.reloaded != nil {
		l.reloaded()
	}
	return nil
}

// startAdded starts the nodes the reload adds and checks that the rules
// it adds place no table that has rows; on a refusal the started nodes
// are closed again.
func (l *liveConfig) startAdded(cfg *config.Config, ch reloadChange, cur *nodeSet) ([]*backend.Node, error) {
	var started []*backend.Node
	if len(ch.addNodes) > 0 {
		started = l.startNodes(ch.addNodes, cfg.Backend)
	}
	if len(ch.addRules) == 0 {
		return started, nil
	}
	lookup := func(name string) *backend.Node {
		if n := cur.byName[name]; n != nil {
			return n
		}
		for _, n := range started {
			if n.Name == name {
				return n
			}
		}
		return nil
	}
	if err := checkNoRows(cfg, ch.addRules, lookup); err != nil {
		for _, n := range started {
			n.Close()
		}
		return nil, err
	}
	return started, nil
}

// setReplicas gives the nodes in force the replicas cfg lists.
func (l *liveConfig) setReplicas(cfg *config.Config, cur *nodeSet) {
	for _, nc := range cfg.Nodes {
		n := cur.byName[nc.Name]
		if n == nil {
			continue // started with its replicas
		}
		if added, removed := n.SetReplicas(nc.Slaves()); added+removed > 0 {
			l.logger.Info("replicas changed", zap.String("node", n.Name), zap.Int("added", added), zap.Int("removed", removed))
		}
	}
}

// publishNodes publishes the node set with the started nodes and without
// the removed ones (before the configuration that uses them), and
// returns the removed nodes.
func (l *liveConfig) publishNodes(ch reloadChange, cur *nodeSet, started []*backend.Node) []*backend.Node {
	var removed []*backend.Node
	if len(started) > 0 || len(ch.removeNodes) > 0 {
		order := make([]*backend.Node, 0, len(cur.order)+len(started))
		for _, n := range cur.order {
			if slices.Contains(ch.removeNodes, n.Name) {
				removed = append(removed, n)
				continue
			}
			order = append(order, n)
		}
		l.nodeSet.Store(newNodeSet(append(order, started...)))
		if len(started) > 0 {
			l.nodesAdded(started)
		}
	}
	for _, n := range l.allNodes() {
		if len(n.Replicas()) > 0 {
			l.hasReplicas.Store(true)
		}
	}
	return removed
}

func (l *liveConfig) logReload(lv *live, ch reloadChange, started, removed []*backend.Node) {
	fields := []zap.Field{zap.Uint64("version", lv.version)}
	if len(started) > 0 {
		fields = append(fields, zap.Strings("nodes_added", nodeNames(started)))
	}
	if len(removed) > 0 {
		fields = append(fields, zap.Strings("nodes_removed", nodeNames(removed)))
	}
	if len(ch.addRules) > 0 {
		var rules []string
		for _, r := range ch.addRules {
			rules = append(rules, r.rule.DB+"."+r.rule.Table)
		}
		fields = append(fields, zap.Strings("rules_added", rules))
	}
	l.logger.Info("configuration reloaded", fields...)
}

func nodeNames(ns []*backend.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

// addedTables names (db.table) the tables with a rule in rt that old has
// none for: a reload added them.
func addedTables(old, rt *router.Router) []string {
	had := map[string]bool{}
	for _, ti := range old.Tables() {
		had[ti.DB+"."+ti.Table] = true
	}
	var out []string
	for _, ti := range rt.Tables() {
		if k := ti.DB + "." + ti.Table; !had[k] {
			out = append(out, k)
		}
	}
	return out
}

// addRules makes the tables (db.table) whose rules a reload added known
// with their subtables in rt. Their definitions are not read here (64
// subtables take about a second): a statement that needs one reads it
// (router.NeedSchemaError, loadNamed).
func (t *tables) addRules(rt *router.Router, tables []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ti := range rt.Tables() {
		if slices.Contains(tables, ti.DB+"."+ti.Table) {
			t.infos[schema.KeyOf(ti.DB, ti.Table)] = ti
		}
	}
}

// swapRule puts rule in force for db.table: the next statement routes by
// it. It is remembered, so a reload of ks.yaml (which still has the old
// rule) keeps it. It returns the configuration now in force.
func (l *liveConfig) swapRule(db, table string, rule config.ShardRule) (*live, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.overrides == nil {
		l.overrides = map[string]config.ShardRule{}
	}
	l.overrides[db+"."+table] = rule
	old := l.lv()
	lv, err := newLive(withRules(old.cfg, l.overrides))
	if err != nil {
		return nil, err
	}
	lv.version = old.version + 1
	l.current.Store(lv)
	return lv, nil
}

// withRules returns cfg with the rules of the tables in rules replaced.
func withRules(cfg *config.Config, rules map[string]config.ShardRule) *config.Config {
	if len(rules) == 0 {
		return cfg
	}
	c := *cfg
	c.Schemas = slices.Clone(cfg.Schemas)
	for i := range c.Schemas {
		c.Schemas[i].Shard = slices.Clone(c.Schemas[i].Shard)
		for k, r := range c.Schemas[i].Shard {
			if nr, ok := rules[r.DB+"."+r.Table]; ok {
				c.Schemas[i].Shard[k] = nr
			}
		}
	}
	return &c
}

// reloadChange is what a reload adds to and removes from the nodes and
// the rules of existing schemas (compareConfigs).
type reloadChange struct {
	addNodes    []config.Node
	removeNodes []string
	addRules    []addedRule
}

// addedRule is a shard rule a reload adds to a schema that exists.
type addedRule struct {
	user string // the schema's
	rule config.ShardRule
}

// compareConfigs returns what a reload from old to cfg adds and removes
// (nodes; rules of existing schemas), and names the differences it cannot
// apply.
func compareConfigs(old, cfg *config.Config) (reloadChange, []string) {
	a, b := *old, *cfg
	// What a reload may change is made equal; what is left must match.
	a.Users, a.AllowIPs, a.BlacklistSQLFile, a.DenyStatements, a.SlowLogTime = b.Users, b.AllowIPs, b.BlacklistSQLFile, b.DenyStatements, b.SlowLogTime
	a.MaxConnections, a.MaxUnauthenticated, a.MaxAllowedPacket = b.MaxConnections, b.MaxUnauthenticated, b.MaxAllowedPacket
	a.PacketMemoryPerClient, a.PacketMemoryTotal = b.PacketMemoryPerClient, b.PacketMemoryTotal
	a.ClientWriteTimeout, a.IdleInTransactionTimeout = b.ClientWriteTimeout, b.IdleInTransactionTimeout
	a.LogLevel = b.LogLevel // the -log-level flag may override the file's; not applied by a reload
	a.Streams = b.Streams   // a changed stream's sink restarts (streams.go)
	var ch reloadChange
	out := compareNodes(old, cfg, &ch)
	a.Nodes = b.Nodes
	out = append(out, compareSchemas(old, cfg, &ch)...)
	if cfg.UsesXA() && !old.UsesXA() {
		out = append(out, "transaction_mode xa appears (needs a restart: the XA coordinator starts with the proxy)")
	}
	a.Schemas = b.Schemas
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	t := av.Type()
	for i := 0; i < t.NumField(); i++ {
		if !t.Field(i).IsExported() {
			continue
		}
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			key := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if key == "" {
				key = t.Field(i).Name
			}
			out = append(out, key+" changed (needs a restart; a reload changes only "+strings.Join(reloadable, ", ")+")")
		}
	}
	sort.Strings(out)
	return ch, out
}

// compareNodes records the nodes cfg adds and removes in ch: new ones are
// added; one that stays keeps everything but its replicas; one no schema
// uses may go. It names the changes a reload cannot apply.
func compareNodes(old, cfg *config.Config, ch *reloadChange) []string {
	var out []string
	for i := range cfg.Nodes {
		nn := cfg.Nodes[i]
		prev := old.Node(nn.Name)
		if prev == nil {
			ch.addNodes = append(ch.addNodes, nn)
			continue
		}
		p := *prev
		p.Slave = nn.Slave
		if p != nn {
			out = append(out, fmt.Sprintf("nodes changed: node %s: only slave may change by reload (master, user, password and the other keys need a restart)", nn.Name))
		}
	}
	for i := range old.Nodes {
		name := old.Nodes[i].Name
		if cfg.Node(name) != nil {
			continue
		}
		if users := usersOfNode(old, name); len(users) > 0 {
			out = append(out, fmt.Sprintf("nodes changed: node %s is removed but is a node in use by schema %s (a reload does not take a node from a schema: needs a restart)", name, strings.Join(users, ", ")))
			continue
		}
		if name == old.Sidecar.Node {
			out = append(out, fmt.Sprintf("nodes changed: node %s is removed but is the sidecar's node", name))
			continue
		}
		ch.removeNodes = append(ch.removeNodes, name)
	}
	return out
}

// compareSchemas records the rules cfg adds to existing schemas in ch.
// Schemas may come and go with their users; a schema that stays keeps its
// default, its nodes and its rules, and may gain nodes and rules. It names
// the changes a reload cannot apply.
func compareSchemas(old, cfg *config.Config, ch *reloadChange) []string {
	var out []string
	for i := range cfg.Schemas {
		ns := &cfg.Schemas[i]
		prev := old.SchemaFor(ns.User)
		if prev == nil {
			continue
		}
		rules := map[string]*config.ShardRule{}
		for k := range ns.Shard {
			rules[ns.Shard[k].DB+"."+ns.Shard[k].Table] = &ns.Shard[k]
		}
		changed := false
		for k := range prev.Shard {
			pr := &prev.Shard[k]
			nr := rules[pr.DB+"."+pr.Table]
			if nr == nil || !reflect.DeepEqual(pr, nr) {
				changed = true
			}
			delete(rules, pr.DB+"."+pr.Table)
		}
		if changed {
			out = append(out, fmt.Sprintf("schema_list[%d] (user %s): shard rules changed: a new rule for a table that has rows moves them, which needs online resharding: use a reshard workflow (POST /admin/workflows, or shardgate reshard)", i, ns.User))
		}
		for k := range ns.Shard {
			nr := &ns.Shard[k]
			switch {
			case rules[nr.DB+"."+nr.Table] == nil: // an existing rule
			case placedBefore(old, nr): // another schema has the same rule in force: its rows are where it says
			case nr.Sequence != "":
				out = append(out, fmt.Sprintf("schema_list[%d] (user %s): the new rule for %s.%s has a sequence (needs a restart: sequences start with the proxy)", i, ns.User, nr.DB, nr.Table))
			default:
				ch.addRules = append(ch.addRules, addedRule{user: ns.User, rule: *nr})
			}
		}
		gone := slices.ContainsFunc(prev.Nodes, func(n string) bool { return !slices.Contains(ns.Nodes, n) })
		if gone || prev.Default != ns.Default {
			out = append(out, fmt.Sprintf("schema_list[%d] (user %s): nodes or default changed (needs a restart; a reload may only add nodes to a schema)", i, ns.User))
		}
	}
	return out
}

// placedBefore reports whether a schema of old has rule r as it is:
// adding it to another schema places nothing new.
func placedBefore(old *config.Config, r *config.ShardRule) bool {
	for i := range old.Schemas {
		for k := range old.Schemas[i].Shard {
			if reflect.DeepEqual(&old.Schemas[i].Shard[k], r) {
				return true
			}
		}
	}
	return false
}

// usersOfNode names the users whose schema uses node (in its nodes, as
// its default or in a rule).
func usersOfNode(cfg *config.Config, node string) []string {
	var out []string
	for i := range cfg.Schemas {
		sc := &cfg.Schemas[i]
		uses := sc.Default == node || slices.Contains(sc.Nodes, node)
		for k := range sc.Shard {
			uses = uses || slices.Contains(sc.Shard[k].Nodes, node)
		}
		if uses {
			out = append(out, sc.User)
		}
	}
	return out
}

// checkNoRows checks that no table a new rule places has rows: on each
// node the rule places subtables on, and on the schema's default node, the
// logical table and the subtables there either do not exist or are empty
// (SELECT 1 ... LIMIT 1 each). Rows there would be hidden or stranded by
// the rule: moving them is online resharding's work.
func checkNoRows(cfg *config.Config, rules []addedRule, node func(string) *backend.Node) error {
	for _, ar := range rules {
		r := ar.rule
		tables := map[string][]string{} // by node
		if sc := cfg.SchemaFor(ar.user); sc != nil {
			tables[sc.Default] = append(tables[sc.Default], r.Table)
		}
		if r.Type == "global" {
			for _, n := range r.Nodes {
				tables[n] = append(tables[n], r.Table)
			}
		} else {
			pl, err := router.NewPlacement(r)
			if err != nil {
				return err
			}
			for _, s := range pl.Subtables() {
				tables[s.Node] = append(tables[s.Node], s.Name)
			}
		}
		names := make([]string, 0, len(tables))
		for name := range tables {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			n := node(name)
			if n == nil {
				return fmt.Errorf("no node %s for the new rule of %s.%s", name, r.DB, r.Table)
			}
			slices.Sort(tables[name])
			full, err := tablesWithRows(cfg, n, r.DB, slices.Compact(tables[name]))
			if err != nil {
				return fmt.Errorf("schema of user %s: cannot check that %s.%s has no rows on node %s: %w", ar.user, r.DB, r.Table, name, err)
			}
			if len(full) > 0 {
				return fmt.Errorf("schema of user %s: the new rule for %s.%s places a table that has rows (%s on node %s): a new rule for a table that has rows moves them, which needs online resharding: use a reshard workflow (POST /admin/workflows, or shardgate reshard)",
					ar.user, r.DB, r.Table, strings.Join(full, ", "), name)
			}
		}
	}
	return nil
}

// tablesWithRows returns those of tables (in db on n's master) that exist
// and have at least one row, reading one row of each on a connection of
// its own.
func tablesWithRows(cfg *config.Config, n *backend.Node, db string, tables []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Backend.DialTimeout+cfg.Backend.CommandTimeout)
	defer cancel()
	c, err := n.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var full []string
	for _, t := range tables {
		res, err := c.Exec("SELECT 1 FROM " + mysql.QuoteIdent(db) + "." + mysql.QuoteIdent(t) + " LIMIT 1")
		var se *mysql.SQLError
		if errors.As(err, &se) && (se.Code == 1146 || se.Code == mysql.ErBadDB) {
			continue // ER_NO_SUCH_TABLE, ER_BAD_DB_ERROR: no table, no rows
		}
		if err != nil {
			return nil, err
		}
		if len(res.Rows) > 0 {
			full = append(full, t)
		}
	}
	return full, nil
}
