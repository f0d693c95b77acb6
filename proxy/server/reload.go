package server

import (
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
	"github.com/shardgate/shardgate/router"
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
type liveConfig struct {
	current atomic.Pointer[live]
	// hasReplicas is set when any node has read replicas (slave).
	hasReplicas atomic.Bool

	mu        sync.Mutex
	overrides map[string]config.ShardRule // by db.table
	nodes     map[string]*backend.Node    // whose replicas a reload sets
	logger    *zap.Logger
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
	"idle_in_transaction_timeout", "nodes[].slave", "schema_list (new users' schemas; rw_split and read_consistency of the others)"}

// ReloadFile reads the configuration file at path and applies it (Reload).
func (l *liveConfig) ReloadFile(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return fmt.Errorf("reload refused, nothing changed: %w", err)
	}
	return l.Reload(cfg)
}

// Reload validates cfg (already parsed) against the configuration in
// force and swaps it in: users, allow_ips, the statement policy, limits,
// the nodes' replicas and the schemas' read split take effect for the
// next statement and login; sessions and their connections stay. A change
// to anything else is refused and nothing changes.
func (l *liveConfig) Reload(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Tables a workflow cut over keep their new rule.
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg = withRules(cfg, l.overrides)
	old := l.lv()
	if diff := restartKeys(old.cfg, cfg); len(diff) > 0 {
		return fmt.Errorf("reload refused, nothing changed: %s", strings.Join(diff, "; "))
	}
	lv, err := newLive(cfg)
	if err != nil {
		return fmt.Errorf("reload refused, nothing changed: %w", err)
	}
	lv.version = old.version + 1
	for _, nc := range cfg.Nodes {
		n := l.nodes[nc.Name]
		if added, removed := n.SetReplicas(nc.Slaves()); added+removed > 0 {
			l.logger.Info("replicas changed", zap.String("node", n.Name), zap.Int("added", added), zap.Int("removed", removed))
		}
		if len(n.Replicas()) > 0 {
			l.hasReplicas.Store(true)
		}
	}
	l.current.Store(lv)
	l.logger.Info("configuration reloaded", zap.Uint64("version", lv.version))
	return nil
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

// restartKeys names the differences between two configurations that a
// reload cannot apply.
func restartKeys(old, cfg *config.Config) []string {
	a, b := *old, *cfg
	// What a reload may change is made equal; what is left must match.
	a.Users, a.AllowIPs, a.BlacklistSQLFile, a.DenyStatements, a.SlowLogTime = b.Users, b.AllowIPs, b.BlacklistSQLFile, b.DenyStatements, b.SlowLogTime
	a.MaxConnections, a.MaxUnauthenticated, a.MaxAllowedPacket = b.MaxConnections, b.MaxUnauthenticated, b.MaxAllowedPacket
	a.PacketMemoryPerClient, a.PacketMemoryTotal = b.PacketMemoryPerClient, b.PacketMemoryTotal
	a.ClientWriteTimeout, a.IdleInTransactionTimeout = b.ClientWriteTimeout, b.IdleInTransactionTimeout
	a.LogLevel = b.LogLevel // the -log-level flag may override the file's; not applied by a reload
	var out []string
	a.Nodes = slices.Clone(a.Nodes)
	if len(a.Nodes) == len(b.Nodes) {
		for i := range a.Nodes {
			a.Nodes[i].Slave = b.Nodes[i].Slave
		}
	}
	// Schemas may come and go with their users; a schema that stays keeps
	// its nodes and rules.
	for i := range b.Schemas {
		ns := &b.Schemas[i]
		prev := old.SchemaFor(ns.User)
		if prev == nil {
			continue
		}
		if !reflect.DeepEqual(prev.Shard, ns.Shard) {
			out = append(out, fmt.Sprintf("schema_list[%d] (user %s): shard rules changed: a new rule for a table that has rows moves them, which needs online resharding: use a reshard workflow (POST /admin/workflows, or shardgate reshard)", i, ns.User))
		}
		if !slices.Equal(prev.Nodes, ns.Nodes) || prev.Default != ns.Default {
			out = append(out, fmt.Sprintf("schema_list[%d] (user %s): nodes or default changed (needs a restart)", i, ns.User))
		}
	}
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
	return out
}
