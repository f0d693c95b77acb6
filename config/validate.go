package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	Path string // key path, like schema_list[0].shard[2].key; "" for the whole file
	Line int    // line of the key in the file; 0 when unknown
	Msg  string
}

// String formats p as "path (line N): msg", leaving out what is unknown.
func (p Problem) String() string {
	switch {
	case p.Path != "" && p.Line > 0:
		return fmt.Sprintf("%s (line %d): %s", p.Path, p.Line, p.Msg)
	case p.Path != "":
		return p.Path + ": " + p.Msg
	case p.Line > 0:
		return fmt.Sprintf("line %d: %s", p.Line, p.Msg)
	}
	return p.Msg
}

// Error is a configuration that failed to decode or validate. It lists every
// problem found, in the order found.
type Error struct {
	File     string // set by Load; "" for Parse and Validate
	Problems []Problem
}

// Error returns one line per problem, each starting with "config: ".
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("config: ")
		if e.File != "" {
			b.WriteString(e.File)
			b.WriteString(": ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Validate checks the whole configuration and returns nil or an *Error that
// lists every problem. Lines are included when c came from Parse or Load.
func (c *Config) Validate() error {
	if ps := c.validate(); len(ps) > 0 {
		return &Error{Problems: ps}
	}
	return nil
}

// Known values of the enumerated keys.
var (
	logLevels   = []string{"debug", "info", "warn", "error"}
	authPlugins = []string{"mysql_native_password", "caching_sha2_password"}
	shardTypes  = []string{"hash", "range", "date_year", "date_month", "date_day", "global"}
	// charsets are MySQL's character set names (SHOW CHARACTER SET), as
	// kingshard and MySQL's protocol use them: lowercase.
	charsets = []string{
		"armscii8", "ascii", "big5", "binary", "cp1250", "cp1251", "cp1256", "cp1257",
		"cp850", "cp852", "cp866", "cp932", "dec8", "eucjpms", "euckr", "gb18030",
		"gb2312", "gbk", "geostd8", "greek", "hebrew", "hp8", "keybcs2", "koi8r",
		"koi8u", "latin1", "latin2", "latin5", "latin7", "macce", "macroman", "sjis",
		"swe7", "tis620", "ucs2", "ujis", "utf16", "utf16le", "utf32", "utf8",
		"utf8mb3", "utf8mb4",
	}
	serverVersionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+`)
)

// validator collects problems; pos supplies lines and may be nil.
type validator struct {
	pos      *positions
	problems []Problem
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Line: v.pos.line(path), Msg: fmt.Sprintf(format, args...)})
}

func (c *Config) validate() []Problem {
	v := &validator{pos: c.pos}
	c.validateGlobals(v)
	c.validateUsers(v)
	c.validateNodes(v)
	c.validateSchemas(v)
	c.validateExtensions(v)
	c.validateStreams(v)
	c.validateCache(v)
	return v.problems
}

func (c *Config) validateGlobals(v *validator) {
	if c.Addr == "" {
		v.add("addr", "required: the client listener, host:port")
	} else if err := checkHostPort(c.Addr, true); err != nil {
		v.add("addr", "%v", err)
	}
	if len(c.Socket) > 107 {
		v.add("socket", "%d bytes long: a Unix socket path holds at most 107", len(c.Socket))
	}
	for _, f := range []struct{ key, val string }{
		{"web_addr", c.WebAddr},
		{"prometheus_addr", c.PrometheusAddr},
	} {
		if f.val == "" {
			continue // disabled
		}
		if err := checkHostPort(f.val, true); err != nil {
			v.add(f.key, "%v", err)
		}
	}
	if !slices.Contains(logLevels, c.LogLevel) {
		v.add("log_level", "unknown level %q; use %s", c.LogLevel, strings.Join(logLevels, ", "))
	}
	if _, ok := parseSwitch(c.LogSQL); !ok {
		v.add("log_sql", "%q is not on or off", c.LogSQL)
	}
	if c.SlowLogTime < 0 {
		v.add("slow_log_time", "%d is negative; use 0 to turn the slow log off", c.SlowLogTime)
	}
	if c.DigestSize < 0 || c.DigestSize > 10_000_000 {
		v.add("digest_size", "%d is out of range 0..10000000", c.DigestSize)
	}
	// Each move key on its own path; 0 or absent is the default.
	m := c.Move
	for _, d := range []struct {
		key string
		val time.Duration
	}{
		{"cutover_timeout", m.CutoverTimeout}, {"throttle_latency", m.ThrottleLatency},
		{"cutover_ack_wait", m.CutoverAckWait}, {"buffer_window", m.BufferWindow},
	} {
		if d.val < 0 {
			v.add(joinKey("move", d.key), "%v is negative; use a positive duration, or 0 for the default", d.val)
		}
	}
	for _, n := range []struct {
		key      string
		val, max int
	}{
		{"copy_workers", m.CopyWorkers, 256}, {"apply_workers", m.ApplyWorkers, 256},
		{"batch_rows", m.BatchRows, 100000}, {"buffer_size", m.BufferSize, 1_000_000},
	} {
		if n.val < 0 || n.val > n.max {
			v.add(joinKey("move", n.key), "%d is out of range 1..%d (0 or absent: the default)", n.val, n.max)
		}
	}
	for _, e := range splitList(c.AllowIPs) {
		if _, err := parseAllowEntry(e); err != nil {
			v.add("allow_ips", "%v", err)
		}
	}
	if !slices.Contains(charsets, c.ProxyCharset) {
		v.add("proxy_charset", "unknown MySQL character set %q (names are lowercase, like utf8mb4)", c.ProxyCharset)
	}
}

func (c *Config) validateUsers(v *validator) {
	if len(c.Users) == 0 {
		v.add("user_list", "at least one user is required")
	}
	seen := make(map[string]int)
	for i, u := range c.Users {
		p := joinIndex("user_list", i)
		if u.User == "" {
			v.add(joinKey(p, "user"), "user name is empty")
			continue
		}
		if j, dup := seen[u.User]; dup {
			v.add(joinKey(p, "user"), "user %q is already defined at user_list[%d]", u.User, j)
			continue
		}
		seen[u.User] = i
	}
}

func (c *Config) validateNodes(v *validator) {
	seen := make(map[string]int)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		p := joinIndex("nodes", i)
		switch j, dup := seen[n.Name]; {
		case n.Name == "":
			v.add(joinKey(p, "name"), "node has no name")
		case dup:
			v.add(joinKey(p, "name"), "node %q is already defined at nodes[%d]", n.Name, j)
		default:
			seen[n.Name] = i
		}
		if n.Master == "" {
			v.add(joinKey(p, "master"), "required: the master's host:port")
		} else if err := checkHostPort(n.Master, false); err != nil {
			v.add(joinKey(p, "master"), "%v", err)
		}
		for _, e := range splitList(n.Slave) {
			if _, err := parseReplica(e); err != nil {
				v.add(joinKey(p, "slave"), "%v", err)
			}
		}
		if n.MaxConnsLimit < 0 {
			v.add(joinKey(p, "max_conns_limit"), "%d is negative", n.MaxConnsLimit)
		}
		if n.DownAfterNoalive < 0 {
			v.add(joinKey(p, "down_after_noalive"), "%d is negative", n.DownAfterNoalive)
		}
		if !n.TLS && (n.TLSCA != "" || n.TLSServerName != "") {
			v.add(joinKey(p, "tls"), "tls_ca and tls_server_name need tls: true")
		}
		if n.TLSCA != "" {
			if data, err := os.ReadFile(n.TLSCA); err != nil {
				v.add(joinKey(p, "tls_ca"), "%v", err)
			} else if !x509.NewCertPool().AppendCertsFromPEM(data) {
				v.add(joinKey(p, "tls_ca"), "%s holds no PEM certificate", n.TLSCA)
			}
		}
	}
}

func (c *Config) validateSchemas(v *validator) {
	users := make(map[string]bool, len(c.Users))
	for _, u := range c.Users {
		users[u.User] = true
	}
	seen := make(map[string]int)
	for i := range c.Schemas {
		s := &c.Schemas[i]
		p := joinIndex("schema_list", i)
		switch j, dup := seen[s.User]; {
		case s.User == "":
			v.add(joinKey(p, "user"), "required: the user_list user this schema belongs to")
		case !users[s.User]:
			v.add(joinKey(p, "user"), "user %q is not in user_list", s.User)
		case dup:
			v.add(joinKey(p, "user"), "user %q already has a schema at schema_list[%d]", s.User, j)
		default:
			seen[s.User] = i
		}

		switch s.ReadConsistency {
		case "", ConsistencyEventual, ConsistencySession, ConsistencyUniversal, ConsistencyStrong:
		default:
			v.add(joinKey(p, "read_consistency"), "must be %q, %q, %q or %q, got %q",
				ConsistencyEventual, ConsistencySession, ConsistencyUniversal, ConsistencyStrong, s.ReadConsistency)
		}
		nodesPath := joinKey(p, "nodes")
		inSchema := make(map[string]bool, len(s.Nodes))
		if len(s.Nodes) == 0 {
			v.add(nodesPath, "at least one node is required")
		}
		for j, name := range s.Nodes {
			np := joinIndex(nodesPath, j)
			switch {
			case inSchema[name]:
				v.add(np, "node %q is listed twice", name)
			case c.Node(name) == nil:
				v.add(np, "node %q is not defined in nodes", name)
			}
			inSchema[name] = true
		}

		switch {
		case s.Default == "":
			v.add(joinKey(p, "default"), "required: the node for tables without a shard rule")
		case !inSchema[s.Default]:
			v.add(joinKey(p, "default"), "node %q is not in %s", s.Default, nodesPath)
		}

		rules := make(map[string]int)
		for k := range s.Shard {
			c.validateRule(v, joinIndex(joinKey(p, "shard"), k), &s.Shard[k], nodesPath, inSchema, rules, k)
		}
	}
}

// validateRule checks one shard rule at path. rules maps "db.table" to the
// index of the rule that first claimed it.
func (c *Config) validateRule(v *validator, path string, r *ShardRule, schemaNodes string, inSchema map[string]bool, rules map[string]int, k int) {
	// The type first: what else a rule needs depends on it, so with a
	// type that is missing or misspelt those checks would only list knock-on
	// problems (a global table's key, a hash rule's generation) before the
	// cause. They are left out until the type is right.
	typeOK := slices.Contains(shardTypes, r.Type)
	switch {
	case r.Type == "":
		v.add(joinKey(path, "type"), "required: one of %s", strings.Join(shardTypes, ", "))
	case !typeOK:
		v.add(joinKey(path, "type"), "unknown type %q%s; use %s", r.Type, didYouMean(r.Type, shardTypes), strings.Join(shardTypes, ", "))
	}
	if r.DB == "" {
		v.add(joinKey(path, "db"), "required")
	}
	if r.Table == "" {
		v.add(joinKey(path, "table"), "required")
	}
	if r.DB != "" && r.Table != "" {
		qualified := r.DB + "." + r.Table
		if j, dup := rules[qualified]; dup {
			v.add(joinKey(path, "table"), "%s already has a rule at %s", qualified, joinIndex(parentPath(path), j))
		} else {
			rules[qualified] = k
		}
	}
	if r.Key == "" && r.Type != "global" && typeOK {
		v.add(joinKey(path, "key"), "required: the sharding column")
	}

	nodesPath := joinKey(path, "nodes")
	if len(r.Nodes) == 0 {
		v.add(nodesPath, "at least one node is required")
	}
	seen := make(map[string]bool, len(r.Nodes))
	for j, name := range r.Nodes {
		np := joinIndex(nodesPath, j)
		switch {
		case seen[name]:
			v.add(np, "node %q is listed twice", name)
		case !inSchema[name]:
			v.add(np, "node %q is not in %s", name, schemaNodes)
		}
		seen[name] = true
	}

	switch {
	case !typeOK:
	case r.Sequence != "" && r.Type == "global":
		v.add(joinKey(path, "sequence"), "not allowed for type global: a global table's copies take ids from its own AUTO_INCREMENT")
	case r.Sequence != "" && !identRE.MatchString(r.Sequence):
		v.add(joinKey(path, "sequence"), "%q is not a column name", r.Sequence)
	case r.SequenceBlock < 0 || r.SequenceBlock > 1_000_000_000:
		v.add(joinKey(path, "sequence_block"), "%d is out of range 1..1000000000", r.SequenceBlock)
	case r.SequenceBlock > 0 && r.Sequence == "":
		v.add(joinKey(path, "sequence_block"), "needs sequence: the column the sequence fills")
	case r.SequenceAdvance && r.Sequence == "":
		v.add(joinKey(path, "sequence_advance"), "needs sequence: the column the sequence fills")
	}

	if r.Generation < 0 || r.Generation > 9999 {
		v.add(joinKey(path, "generation"), "%d is out of range 0..9999", r.Generation)
	} else if r.Generation > 0 && r.Type != "hash" && r.Type != "range" && typeOK {
		v.add(joinKey(path, "generation"), "only hash and range rules have generations")
	}
	switch r.Type {
	case "hash", "range":
		checkLocations(v, path, r)
		if r.Type == "range" && r.TableRowLimit <= 0 {
			v.add(joinKey(path, "table_row_limit"), "range rules need a positive table_row_limit")
		}
	case "date_year":
		checkDateRange(v, path, r, 4, "2006", "YYYY")
	case "date_month":
		checkDateRange(v, path, r, 6, "200601", "YYYYMM")
	case "date_day":
		checkDateRange(v, path, r, 8, "20060102", "YYYYMMDD")
	case "global":
		if len(r.Locations) > 0 {
			v.add(joinKey(path, "locations"), "not allowed for type global")
		}
		if len(r.DateRange) > 0 {
			v.add(joinKey(path, "date_range"), "not allowed for type global")
		}
	}
}

// checkLocations checks a hash or range rule's sub-table counts.
func checkLocations(v *validator, path string, r *ShardRule) {
	lp := joinKey(path, "locations")
	if len(r.Locations) != len(r.Nodes) {
		v.add(lp, "has %d entries but nodes has %d; give one sub-table count per node", len(r.Locations), len(r.Nodes))
	}
	total := 0
	for j, n := range r.Locations {
		if n < 0 {
			v.add(joinIndex(lp, j), "%d is negative", n)
			continue
		}
		total += n
	}
	if len(r.Locations) > 0 && total == 0 {
		v.add(lp, "no sub-tables: at least one location must be positive")
	}
}

// dateSpan is one parsed date_range entry, bounds as comparable integers
// (YYYY, YYYYMM or YYYYMMDD).
type dateSpan struct {
	lo, hi int
	idx    int
}

// checkDateRange checks a date rule's per-node spans: the right digit count,
// real dates, A <= B, and no two nodes sharing a date.
func checkDateRange(v *validator, path string, r *ShardRule, digits int, layout, form string) {
	dp := joinKey(path, "date_range")
	if len(r.DateRange) != len(r.Nodes) {
		v.add(dp, "has %d entries but nodes has %d; give one span per node", len(r.DateRange), len(r.Nodes))
	}
	var spans []dateSpan
	for j, e := range r.DateRange {
		ep := joinIndex(dp, j)
		a, b, isRange := strings.Cut(strings.TrimSpace(e), "-")
		if !isRange {
			b = a
		}
		a, b = strings.TrimSpace(a), strings.TrimSpace(b)
		lo, errA := parseDate(a, digits, layout)
		hi, errB := parseDate(b, digits, layout)
		if errA != nil || errB != nil {
			v.add(ep, "%q is not %s or %s-%s", e, form, form, form)
			continue
		}
		if lo > hi {
			v.add(ep, "%q ends before it starts", e)
			continue
		}
		spans = append(spans, dateSpan{lo: lo, hi: hi, idx: j})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[i-1], spans[i]
		if cur.lo <= prev.hi {
			first, second := prev.idx, cur.idx
			if first > second {
				first, second = second, first
			}
			v.add(joinIndex(dp, second), "%q overlaps %s %q", r.DateRange[second], joinIndex(dp, first), r.DateRange[first])
		}
	}
}

// parseDate parses a YYYY, YYYYMM or YYYYMMDD date of exactly digits digits
// and returns it as an integer, which orders like the date.
func parseDate(s string, digits int, layout string) (int, error) {
	if len(s) != digits || !allDigits(s) {
		return 0, fmt.Errorf("bad length")
	}
	if _, err := time.Parse(layout, s); err != nil {
		return 0, err
	}
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n, nil
}

// identRE is a column or database name the proxy writes unquoted.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,63}$`)

func (c *Config) validateExtensions(v *validator) {
	if c.Sequences() || c.Sidecar.Node != "" {
		switch {
		case c.Node(c.Sidecar.Node) == nil:
			v.add("sidecar.node", "node %q is not defined in nodes", c.Sidecar.Node)
		case !identRE.MatchString(c.Sidecar.DB):
			v.add("sidecar.db", "%q is not a database name shardgate accepts (letters, digits, _ and $)", c.Sidecar.DB)
		}
	}
	if c.AdminUser != "" && !slices.ContainsFunc(c.Users, func(u User) bool { return u.User == c.AdminUser }) {
		v.add("admin_user", "%q is not in user_list", c.AdminUser)
	}
	if c.BackendLogins != "" {
		i := slices.IndexFunc(c.Schemas, func(s Schema) bool { return s.User == c.BackendLogins })
		switch {
		case i < 0:
			v.add("backend_logins", "%q has no schema in schema_list", c.BackendLogins)
		case len(c.Schemas[i].Shard) > 0:
			v.add("backend_logins", "the schema of %q has shard rules: backend logins are for schemas without", c.BackendLogins)
		}
	}
	if c.ServerVersion != "" && !serverVersionRE.MatchString(c.ServerVersion) {
		v.add("server_version", "%q does not start with major.minor, like 8.0.36", c.ServerVersion)
	}
	if !slices.Contains(authPlugins, c.DefaultAuthPlugin) {
		v.add("default_auth_plugin", "unknown plugin %q; use %s", c.DefaultAuthPlugin, strings.Join(authPlugins, " or "))
	}
	if c.FallbackMaxRows < 0 {
		v.add("fallback_max_rows", "%d is negative; 0 turns the fallback off", c.FallbackMaxRows)
	}
	if c.FallbackMaxTime < 0 {
		v.add("fallback_max_time", "%v is negative", c.FallbackMaxTime)
	}
	if c.FallbackMaxBytes < 0 {
		v.add("fallback_max_bytes", "%d is negative", c.FallbackMaxBytes)
	}
	if c.DrainDelay < 0 {
		v.add("drain_delay", "%v is negative", c.DrainDelay)
	}
	if c.ShutdownTimeout < 0 {
		v.add("shutdown_timeout", "%v is negative", c.ShutdownTimeout)
	}
	if !slices.Contains([]string{TransactionMulti, TransactionSingle, TransactionXA}, c.TransactionMode) {
		v.add("transaction_mode", "must be %q, %q or %q, got %q", TransactionMulti, TransactionSingle, TransactionXA, c.TransactionMode)
	}
	for i := range c.Schemas {
		if m := c.Schemas[i].TransactionMode; m != "" && !slices.Contains([]string{TransactionMulti, TransactionSingle, TransactionXA}, m) {
			v.add(fmt.Sprintf("schema_list[%d].transaction_mode", i), "must be %q, %q or %q, got %q", TransactionMulti, TransactionSingle, TransactionXA, m)
		}
	}
	if c.XA.RecoveryInterval < 0 {
		v.add("xa.recovery_interval", "%v is negative", c.XA.RecoveryInterval)
	}
	if c.XA.Lease < 0 {
		v.add("xa.lease", "%v is negative", c.XA.Lease)
	}
	for i, k := range c.DenyStatements {
		if !slices.Contains(DenyKinds, k) {
			v.add(fmt.Sprintf("deny_statements[%d]", i), "unknown kind %q; use some of %s", k, strings.Join(DenyKinds, ", "))
		}
	}
	if c.MergeMemoryTotal <= 0 {
		v.add("merge_memory_total", "must be positive, got %d", c.MergeMemoryTotal)
	}
	if c.MergeMemoryLimit <= 0 {
		v.add("merge_memory_limit", "must be positive, got %d", c.MergeMemoryLimit)
	}
	if c.PlanCacheSize < 0 {
		v.add("plan_cache_size", "must be 0 (no cache) or positive, got %d", c.PlanCacheSize)
	}
	if c.ClientWriteTimeout < 0 {
		v.add("client_write_timeout", "%v is negative; use 0 to turn it off", c.ClientWriteTimeout)
	}
	if c.DeadlockDetectAfter < 0 {
		v.add("deadlock_detect_after", "%v is negative; use 0 to turn it off", c.DeadlockDetectAfter)
	}
	if c.IdleInTransactionTimeout < 0 {
		v.add("idle_in_transaction_timeout", "%v is negative; use 0 to turn it off", c.IdleInTransactionTimeout)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		v.add("tls_cert", "tls_cert and tls_key must be set together")
	}
	if c.RequireSecureTransport && c.TLSCert == "" {
		v.add("require_secure_transport", "needs tls_cert and tls_key")
	}
	if c.MaxAllowedPacket < 1024 || c.MaxAllowedPacket > 1<<30 {
		v.add("max_allowed_packet", "must be between 1024 and 1073741824 bytes, got %d", c.MaxAllowedPacket)
	}
	if c.PacketMemoryPerClient != 0 && (c.PacketMemoryPerClient < 1024 || c.PacketMemoryPerClient > 1<<30) {
		v.add("packet_memory_per_client", "must be 0 (max_allowed_packet) or between 1024 and 1073741824 bytes, got %d", c.PacketMemoryPerClient)
	}
	if c.PacketMemoryTotal < 0 {
		v.add("packet_memory_total", "must not be negative (0 turns it off), got %d", c.PacketMemoryTotal)
	}
	if (c.WebUser == "") != (c.WebPassword == "") {
		v.add("web_user", "web_user and web_password must be set together (one without the other would leave the admin listener open)")
	}
	if c.WebAddr != "" && c.WebUser == "" && !loopbackAddr(c.WebAddr) {
		v.add("web_addr", "%q listens beyond loopback: set web_user and web_password", c.WebAddr)
	}
	if c.MaxUnauthenticated <= 0 {
		v.add("max_unauthenticated_connections", "must be positive, got %d", c.MaxUnauthenticated)
	}
	if c.MaxPreparedStmts < 0 || c.MaxPreparedStmts > 1048576 {
		v.add("max_prepared_stmt_count", "must be between 0 and 1048576, got %d", c.MaxPreparedStmts)
	}
	if c.MaxPreparedStmtsTotal < 0 {
		v.add("max_prepared_stmt_total", "must not be negative, got %d", c.MaxPreparedStmtsTotal)
	}
	if c.Backend.PreparedStmtBudget < 1 {
		v.add("backend.prepared_stmt_budget", "must be positive, got %d", c.Backend.PreparedStmtBudget)
	}
	if c.Backend.ServerHeadroom < 0 {
		v.add("backend.server_headroom", "must not be negative (0 is a tenth of max_connections), got %d", c.Backend.ServerHeadroom)
	}
	for i, u := range c.Users {
		if u.MaxBackendConns < 0 {
			v.add(fmt.Sprintf("user_list[%d].max_backend_conns", i), "must not be negative (0 is the default quota), got %d", u.MaxBackendConns)
		}
	}
	if c.MaxConnections <= 0 {
		v.add("max_connections", "must be positive, got %d", c.MaxConnections)
	}
	checkTCP(v, "frontend", &c.Frontend)
	b := &c.Backend
	checkTCP(v, "backend", &b.TCPOptions)
	for _, d := range []struct {
		key      string
		val      time.Duration
		positive bool // 0 has no useful meaning
	}{
		{"dial_timeout", b.DialTimeout, true},
		{"read_timeout", b.ReadTimeout, false},
		{"acquire_timeout", b.AcquireTimeout, true},
		{"idle_timeout", b.IdleTimeout, false},
		{"max_lifetime", b.MaxLifetime, false},
		{"ping_after_idle", b.PingAfterIdle, false},
		{"health_interval", b.HealthInterval, true},
		{"max_replica_lag", b.MaxReplicaLag, false},
		{"replica_wait", b.ReplicaWait, false},
		{"master_switch_wait", b.MasterSwitchWait, false},
	} {
		switch {
		case d.val < 0:
			v.add(joinKey("backend", d.key), "%v is negative", d.val)
		case d.val == 0 && d.positive:
			v.add(joinKey("backend", d.key), "must be positive")
		}
	}
}

func checkTCP(v *validator, path string, t *TCPOptions) {
	for _, f := range []struct {
		key      string
		val      int
		positive bool
	}{
		{"read_buffer", t.ReadBuffer, true},
		{"write_buffer", t.WriteBuffer, true},
		{"socket_read_buffer", t.SocketReadBuffer, false},
		{"socket_write_buffer", t.SocketWriteBuffer, false},
	} {
		switch {
		case f.val < 0:
			v.add(joinKey(path, f.key), "%d is negative", f.val)
		case f.val == 0 && f.positive:
			v.add(joinKey(path, f.key), "must be positive")
		}
	}
}

// loopbackAddr reports whether a listen address host:port is on loopback
// only (127.0.0.0/8, ::1, localhost).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
