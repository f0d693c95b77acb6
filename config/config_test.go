package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// kingshardSample is kingshard's documented sample configuration. It is
// quoted unchanged except that node2, which its schema uses, is defined
// (kingshard's own etc/ks.yaml defines it too).
const kingshardSample = `addr : 0.0.0.0:9696
prometheus_addr: 0.0.0.0:7080
user_list:
-
    user :  kingshard
    password : kingshard
web_addr : 0.0.0.0:9797
web_user : admin
web_password : admin
log_path : /tmp/log
log_level : debug
log_sql: on
slow_log_time : 100
allow_ips : 127.0.0.1,192.168.0.0/16
blacklist_sql_file: /tmp/blacklist
proxy_charset: utf8
nodes :
-
    name : node1
    max_conns_limit : 32
    user :  kingshard
    password : kingshard
    master : 127.0.0.1:3307
    slave : 192.168.59.101:3307@2,192.168.59.101:3307@3
    down_after_noalive : 32
-
    name : node2
    max_conns_limit : 32
    user :  kingshard
    password : kingshard
    master : 192.168.59.103:3307
    slave :
    down_after_noalive : 32
schema_list :
-
    user: kingshard
    nodes: [node1,node2]
    default: node1
    shard:
    -
        db : kingshard
        table: test_shard_hash
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4,4]
    -
        db : kingshard
        table: test_shard_range
        key: id
        type: range
        nodes: [node1, node2]
        locations: [4,4]
        table_row_limit: 10000
    -   db: kingshard
        table: test_shard_day
        key: ctime
        nodes: [node1, node2]
        type: date_day
        date_range: [20151222-20151224,20151225-20151227]
`

func TestKingshardSample(t *testing.T) {
	c, err := Parse([]byte(kingshardSample))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Addr != "0.0.0.0:9696" || c.PrometheusAddr != "0.0.0.0:7080" || c.WebAddr != "0.0.0.0:9797" {
		t.Errorf("addresses: %q %q %q", c.Addr, c.PrometheusAddr, c.WebAddr)
	}
	if want := []User{{User: "kingshard", Password: "kingshard"}}; !reflect.DeepEqual(c.Users, want) {
		t.Errorf("Users = %+v, want %+v", c.Users, want)
	}
	if c.WebUser != "admin" || c.WebPassword != "admin" || c.LogPath != "/tmp/log" || c.LogLevel != "debug" {
		t.Errorf("web/log keys: %q %q %q %q", c.WebUser, c.WebPassword, c.LogPath, c.LogLevel)
	}
	if c.LogSQL != "on" || !c.LogSQLEnabled() {
		t.Errorf("LogSQL = %q, enabled %v; want \"on\", true", c.LogSQL, c.LogSQLEnabled())
	}
	if c.SlowLogTime != 100 || c.BlacklistSQLFile != "/tmp/blacklist" || c.ProxyCharset != "utf8" {
		t.Errorf("slow_log_time %d, blacklist %q, charset %q", c.SlowLogTime, c.BlacklistSQLFile, c.ProxyCharset)
	}
	wantAllow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("192.168.0.0/16")}
	if got := c.AllowList(); !reflect.DeepEqual(got, wantAllow) {
		t.Errorf("AllowList = %v, want %v", got, wantAllow)
	}

	n := c.Node("node1")
	if n == nil {
		t.Fatal(`Node("node1") = nil`)
	}
	wantNode := Node{Name: "node1", Master: "127.0.0.1:3307", Slave: "192.168.59.101:3307@2,192.168.59.101:3307@3",
		User: "kingshard", Password: "kingshard", MaxConnsLimit: 32, DownAfterNoalive: 32}
	if *n != wantNode {
		t.Errorf("node1 = %+v, want %+v", *n, wantNode)
	}
	wantSlaves := []Replica{{Addr: "192.168.59.101:3307", Weight: 2}, {Addr: "192.168.59.101:3307", Weight: 3}}
	if got := n.Slaves(); !reflect.DeepEqual(got, wantSlaves) {
		t.Errorf("Slaves = %+v, want %+v", got, wantSlaves)
	}
	if got := c.Node("node2").Slaves(); got != nil {
		t.Errorf("node2 Slaves = %+v, want nil", got)
	}
	if c.Node("node3") != nil {
		t.Error(`Node("node3") != nil`)
	}

	s := c.SchemaFor("kingshard")
	if s == nil {
		t.Fatal(`SchemaFor("kingshard") = nil`)
	}
	if c.SchemaFor("nobody") != nil {
		t.Error(`SchemaFor("nobody") != nil`)
	}
	wantRules := []ShardRule{
		{DB: "kingshard", Table: "test_shard_hash", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{4, 4}},
		{DB: "kingshard", Table: "test_shard_range", Key: "id", Type: "range", Nodes: []string{"node1", "node2"}, Locations: []int{4, 4}, TableRowLimit: 10000},
		{DB: "kingshard", Table: "test_shard_day", Key: "ctime", Type: "date_day", Nodes: []string{"node1", "node2"}, DateRange: []string{"20151222-20151224", "20151225-20151227"}},
	}
	if s.Default != "node1" || !reflect.DeepEqual(s.Nodes, []string{"node1", "node2"}) || !reflect.DeepEqual(s.Shard, wantRules) {
		t.Errorf("schema = %+v", *s)
	}
}

// TestKingshardSampleVerbatim checks that the sample exactly as kingshard's
// README prints it, whose schema names node2 without defining it, fails on
// that and nothing else.
func TestKingshardSampleVerbatim(t *testing.T) {
	start := strings.Index(kingshardSample, "-\n    name : node2")
	end := strings.Index(kingshardSample, "schema_list :")
	data := kingshardSample[:start] + kingshardSample[end:]
	checkProblems(t, data, []Problem{
		{Path: "schema_list[0].nodes[1]", Line: 29, Msg: `node "node2" is not defined in nodes`},
	})
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(base))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	d := Default()
	if c.Addr != "127.0.0.1:9696" || d.Addr != c.Addr {
		t.Errorf("Addr = %q", c.Addr)
	}
	if c.WebAddr != "" || c.PrometheusAddr != "" || c.LogPath != "" || c.AllowIPs != "" {
		t.Errorf("optional listeners/paths not empty: %q %q %q %q", c.WebAddr, c.PrometheusAddr, c.LogPath, c.AllowIPs)
	}
	if c.LogLevel != "info" || c.LogSQL != "off" || c.LogSQLEnabled() || c.SlowLogTime != 0 || c.ProxyCharset != "utf8mb4" {
		t.Errorf("log/charset defaults: %q %q %d %q", c.LogLevel, c.LogSQL, c.SlowLogTime, c.ProxyCharset)
	}
	if c.AllowList() != nil {
		t.Errorf("AllowList = %v, want nil", c.AllowList())
	}
	if c.ServerVersion != "" || c.DefaultAuthPlugin != "mysql_native_password" || c.ShutdownTimeout != 10*time.Second || c.MaxConnections != 10000 {
		t.Errorf("extension defaults: %q %q %v %d", c.ServerVersion, c.DefaultAuthPlugin, c.ShutdownTimeout, c.MaxConnections)
	}
	wantTCP := TCPOptions{NoDelay: true, ReadBuffer: 16384, WriteBuffer: 16384}
	if c.Frontend != wantTCP {
		t.Errorf("Frontend = %+v, want %+v", c.Frontend, wantTCP)
	}
	wantBackend := BackendOptions{
		TCPOptions:         wantTCP,
		DialTimeout:        3 * time.Second,
		AcquireTimeout:     5 * time.Second,
		IdleTimeout:        5 * time.Minute,
		MaxLifetime:        time.Hour,
		PingAfterIdle:      30 * time.Second,
		HealthInterval:     2 * time.Second,
		CommandTimeout:     30 * time.Second,
		MaxReplicaLag:      10 * time.Second,
		ReplicaWait:        200 * time.Millisecond,
		MasterSwitchWait:   5 * time.Second,
		PreparedStmtBudget: 2048,
		PoolGrowth:         true,
	}
	if c.Backend != wantBackend {
		t.Errorf("Backend = %+v, want %+v", c.Backend, wantBackend)
	}
	for _, n := range c.Nodes {
		if n.MaxConnsLimit != 64 || n.DownAfterNoalive != 30 {
			t.Errorf("node %s: max_conns_limit %d, down_after_noalive %d; want 64, 30", n.Name, n.MaxConnsLimit, n.DownAfterNoalive)
		}
	}
	// Default itself holds no users or nodes, so it does not validate;
	// with those added it must.
	d.Users = []User{{User: "u"}}
	d.Nodes = []Node{{Name: "n", Master: "db:3306"}}
	d.Schemas = []Schema{{User: "u", Nodes: []string{"n"}, Default: "n"}}
	if err := d.Validate(); err != nil {
		t.Errorf("Default plus one user, node and schema: %v", err)
	}
}

// TestEmptyMeansDefault checks that keys written with no value keep their
// defaults instead of becoming empty or zero.
func TestEmptyMeansDefault(t *testing.T) {
	c, err := Parse([]byte(base + "log_level:\nlog_sql:\nproxy_charset:\nfrontend:\nbackend:\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	d := Default()
	if c.LogLevel != d.LogLevel || c.LogSQL != d.LogSQL || c.ProxyCharset != d.ProxyCharset || c.Frontend != d.Frontend || c.Backend != d.Backend {
		t.Errorf("empty keys did not keep defaults: %+v", c)
	}
}

func TestDurationsAndPartialBlocks(t *testing.T) {
	c, err := Parse([]byte(base + `shutdown_timeout: 2s
frontend:
  nodelay: false
backend:
  dial_timeout: 1500ms
  read_timeout: 0
  idle_timeout: 1m30s
  read_buffer: 65536
  socket_write_buffer: 1048576
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.ShutdownTimeout != 2*time.Second {
		t.Errorf("ShutdownTimeout = %v", c.ShutdownTimeout)
	}
	// Keys left out of a block keep their defaults.
	if want := (TCPOptions{NoDelay: false, ReadBuffer: 16384, WriteBuffer: 16384}); c.Frontend != want {
		t.Errorf("Frontend = %+v, want %+v", c.Frontend, want)
	}
	b := c.Backend
	if b.DialTimeout != 1500*time.Millisecond || b.ReadTimeout != 0 || b.IdleTimeout != 90*time.Second {
		t.Errorf("durations: dial %v read %v idle %v", b.DialTimeout, b.ReadTimeout, b.IdleTimeout)
	}
	if b.AcquireTimeout != 5*time.Second || b.MaxLifetime != time.Hour || b.HealthInterval != 2*time.Second {
		t.Errorf("untouched durations lost their defaults: %+v", b)
	}
	if !b.NoDelay || b.ReadBuffer != 65536 || b.WriteBuffer != 16384 || b.SocketWriteBuffer != 1<<20 {
		t.Errorf("backend TCP options (inline) = %+v", b.TCPOptions)
	}
}

func TestLogSQL(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		raw  string
		on   bool
	}{
		{"on", "on", true},
		{"ON", "ON", true},
		{"off", "off", false},
		{"true", "true", true},
		{"yes", "yes", true},
		{"no", "no", false},
		{"false", "false", false},
		{`"on"`, "on", true},
	} {
		c, err := Parse([]byte(base + "log_sql: " + tc.yaml + "\n"))
		if err != nil {
			t.Errorf("log_sql: %s: %v", tc.yaml, err)
			continue
		}
		if c.LogSQL != tc.raw || c.LogSQLEnabled() != tc.on {
			t.Errorf("log_sql: %s: LogSQL %q enabled %v, want %q %v", tc.yaml, c.LogSQL, c.LogSQLEnabled(), tc.raw, tc.on)
		}
	}
}

func TestAllowList(t *testing.T) {
	c := &Config{AllowIPs: " 10.1.2.3 , 192.168.7.9/16,,::1, 2001:db8::/32 ,"}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.1.2.3/32"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("2001:db8::/32"),
	}
	if got := c.AllowList(); !reflect.DeepEqual(got, want) {
		t.Errorf("AllowList = %v, want %v", got, want)
	}
}

// base is a small valid configuration that the table tests edit. Its lines:
//
//	1 addr   2 user_list   3 - user: u1   4 password   5 nodes
//	6 - name: node1   7 master   8 - name: node2   9 master
//	10 schema_list   11 - user: u1   12 nodes   13 default
const base = `addr: 127.0.0.1:9696
user_list:
- user: u1
  password: p
nodes:
- name: node1
  master: 127.0.0.1:3306
- name: node2
  master: 127.0.0.1:3307
schema_list:
- user: u1
  nodes: [node1, node2]
  default: node1
`

// edit returns base with old replaced by new, failing loudly if old is not
// in base so a typo cannot turn a case into a no-op.
func edit(old, new string) string {
	if !strings.Contains(base, old) {
		panic("edit: " + old + " not in base")
	}
	return strings.Replace(base, old, new, 1)
}

// shard returns base with rules, which must be indented as list items under
// schema_list[0].shard, appended. The first rule line is line 15.
func shard(rules string) string {
	return base + "  shard:\n" + rules
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []Problem
	}{
		// Decoding.
		{"unknown key", base + "bogus: 1\n", []Problem{{"bogus", 14, `unknown key "bogus"`}}},
		{"unknown nested key", edit("  master: 127.0.0.1:3307\n", "  master: 127.0.0.1:3307\n  mastr: x\n"),
			[]Problem{{"nodes[1].mastr", 10, `unknown key "mastr" (did you mean "master"?)`}}},
		{"unknown extension key", base + "backend:\n  dial_timeot: 1s\n",
			[]Problem{{"backend.dial_timeot", 15, `unknown key "dial_timeot" (did you mean "dial_timeout"?)`}}},
		{"repeated key", base + "addr: 127.0.0.1:1\n", []Problem{{"addr", 14, `key "addr" is repeated`}}},
		{"type error", edit("  master: 127.0.0.1:3306\n", "  master: 127.0.0.1:3306\n  max_conns_limit: lots\n"),
			[]Problem{{"nodes[0].max_conns_limit", 8, `cannot use "lots" as an integer`}}},
		{"type error suppresses follow-ups", edit("user_list:\n- user: u1\n  password: p\n", "user_list: u1\n"),
			[]Problem{{"user_list", 2, `cannot use "u1" as a list`}, {"schema_list[0].user", 9, `user "u1" is not in user_list`}}},
		{"syntax error", base + "nodes: [\n", []Problem{{"", 14, "invalid YAML: did not find expected node content"}}},
		{"duration without unit", base + "backend:\n  dial_timeout: 5\n",
			[]Problem{{"backend.dial_timeout", 15, `duration 5 has no unit; write it like "5s" or "5ms"`}}},
		{"list for a block", base + "backend: [1, 2]\n",
			[]Problem{{"backend", 14, "cannot use a list as a mapping"}}},
		{"bad duration", base + "shutdown_timeout: soon\n",
			[]Problem{{"shutdown_timeout", 14, `cannot use "soon" as a duration like "5s"`}}},

		// Top-level keys.
		{"no user_list", edit("user_list:\n- user: u1\n  password: p\n", ""), []Problem{
			{"user_list", 0, "at least one user is required"},
			{"schema_list[0].user", 8, `user "u1" is not in user_list`},
		}},
		{"bad addr", edit("addr: 127.0.0.1:9696", "addr: 127.0.0.1"),
			[]Problem{{"addr", 1, `"127.0.0.1" is not host:port`}}},
		{"empty addr means default", edit("addr: 127.0.0.1:9696", "addr: \"\""), nil},
		{"bad web_addr and prometheus_addr", base + "web_addr: localhost:http\nprometheus_addr: 0.0.0.0:70800\n", []Problem{
			{"web_addr", 14, `"localhost:http": port "http" is not a number`},
			{"prometheus_addr", 15, `"0.0.0.0:70800": port 70800 is out of range 0-65535`},
		}},
		{"ipv6 listen", base + "web_addr: \"[::1]:9797\"\nprometheus_addr: \":7080\"\n", nil},
		{"admin beyond loopback without credentials", base + "web_addr: 0.0.0.0:9797\n", []Problem{
			{"web_addr", 14, `"0.0.0.0:9797" listens beyond loopback: set web_user and web_password`},
		}},
		{"admin beyond loopback with credentials", base + "web_addr: :9797\nweb_user: admin\nweb_password: s3cret\n", nil},
		{"half-set admin credentials", base + "web_password: s3cret\n", []Problem{
			{"web_user", 0, "web_user and web_password must be set together (one without the other would leave the admin listener open)"},
		}},
		{"max_allowed_packet out of range", base + "max_allowed_packet: 2147483648\n", []Problem{
			{"max_allowed_packet", 14, "must be between 1024 and 1073741824 bytes, got 2147483648"},
		}},
		{"bad allow_ips", base + "allow_ips: 127.0.0.1,10.0.0.0/33,bogus\n", []Problem{
			{"allow_ips", 14, `"10.0.0.0/33" is not an IP or CIDR`},
			{"allow_ips", 14, `"bogus" is not an IP or CIDR`},
		}},
		{"unknown enums", base + "log_level: verbose\nlog_sql: maybe\nproxy_charset: UTF8\ndefault_auth_plugin: sha256_password\n", []Problem{
			{"log_level", 14, `unknown level "verbose"; use debug, info, warn, error`},
			{"log_sql", 15, `"maybe" is not on or off`},
			{"proxy_charset", 16, `unknown MySQL character set "UTF8" (names are lowercase, like utf8mb4)`},
			{"default_auth_plugin", 17, `unknown plugin "sha256_password"; use mysql_native_password or caching_sha2_password`},
		}},
		{"bad extensions", base + "server_version: mariadb\nmax_connections: 0\nshutdown_timeout: -1s\nfrontend:\n  read_buffer: -1\nbackend:\n  health_interval: 0s\n  idle_timeout: -5m\n", []Problem{
			{"server_version", 14, `"mariadb" does not start with major.minor, like 8.0.36`},
			{"shutdown_timeout", 16, "-1s is negative"},
			{"max_connections", 15, "must be positive, got 0"},
			{"frontend.read_buffer", 18, "-1 is negative"},
			{"backend.idle_timeout", 21, "-5m0s is negative"},
			{"backend.health_interval", 20, "must be positive"},
		}},
		{"negative slow_log_time", base + "slow_log_time: -1\n",
			[]Problem{{"slow_log_time", 14, "-1 is negative; use 0 to turn the slow log off"}}},

		// Users.
		{"empty user name", edit("- user: u1\n  password: p\n", "- user: u1\n  password: p\n- password: q\n"),
			[]Problem{{"user_list[1].user", 5, "user name is empty"}}},
		{"duplicate user", edit("- user: u1\n  password: p\n", "- user: u1\n  password: p\n- user: u1\n"),
			[]Problem{{"user_list[1].user", 5, `user "u1" is already defined at user_list[0]`}}},

		// Nodes.
		{"duplicate node", edit("- name: node2", "- name: node1"), []Problem{
			{"nodes[1].name", 8, `node "node1" is already defined at nodes[0]`},
			{"schema_list[0].nodes[1]", 12, `node "node2" is not defined in nodes`},
		}},
		{"node without name", edit("- name: node2\n", "- \n"), []Problem{
			{"nodes[1].name", 9, "node has no name"},
			{"schema_list[0].nodes[1]", 12, `node "node2" is not defined in nodes`},
		}},
		{"missing master", edit("  master: 127.0.0.1:3307\n", "  user: x\n"),
			[]Problem{{"nodes[1].master", 8, "required: the master's host:port"}}},
		{"bad masters", edit("master: 127.0.0.1:3306\n- name: node2\n  master: 127.0.0.1:3307", "master: :3306\n- name: node2\n  master: db.example:0"), []Problem{
			{"nodes[0].master", 7, `":3306" has no host`},
			{"nodes[1].master", 9, `"db.example:0": port 0 is out of range 1-65535`},
		}},
		{"bad host", edit("master: 127.0.0.1:3306", "master: bad host:3306"),
			[]Problem{{"nodes[0].master", 7, `"bad host:3306": "bad host" is not a valid host name or IP`}}},
		{"bad read_consistency", edit("  default: node1\n", "  default: node1\n  read_consistency: causal\n"), []Problem{
			{"schema_list[0].read_consistency", 14, `must be "eventual", "session", "universal" or "strong", got "causal"`},
		}},
		{"bad slaves", edit("  master: 127.0.0.1:3306\n", "  master: 127.0.0.1:3306\n  slave: 10.0.0.1:3306@0, 10.0.0.2:3306@x,10.0.0.3,10.0.0.4:3306@-1,[::1]:3306@5\n"), []Problem{
			{"nodes[0].slave", 8, `weight "0" of "10.0.0.1:3306@0" is not a positive integer`},
			{"nodes[0].slave", 8, `weight "x" of "10.0.0.2:3306@x" is not a positive integer`},
			{"nodes[0].slave", 8, `"10.0.0.3" is not host:port`},
			{"nodes[0].slave", 8, `weight "-1" of "10.0.0.4:3306@-1" is not a positive integer`},
		}},
		{"negative node limits", edit("  master: 127.0.0.1:3306\n", "  master: 127.0.0.1:3306\n  max_conns_limit: -1\n  down_after_noalive: -2\n"), []Problem{
			{"nodes[0].max_conns_limit", 8, "-1 is negative"},
			{"nodes[0].down_after_noalive", 9, "-2 is negative"},
		}},

		// Schemas.
		{"schema user unknown", edit("- user: u1\n  nodes", "- user: u2\n  nodes"),
			[]Problem{{"schema_list[0].user", 11, `user "u2" is not in user_list`}}},
		{"duplicate schema", base + "- user: u1\n  nodes: [node1]\n  default: node1\n",
			[]Problem{{"schema_list[1].user", 14, `user "u1" already has a schema at schema_list[0]`}}},
		{"dangling schema node", edit("nodes: [node1, node2]", "nodes: [node1, node9, node1]"), []Problem{
			{"schema_list[0].nodes[1]", 12, `node "node9" is not defined in nodes`},
			{"schema_list[0].nodes[2]", 12, `node "node1" is listed twice`},
		}},
		{"no schema nodes", edit("  nodes: [node1, node2]\n", ""), []Problem{
			{"schema_list[0].nodes", 11, "at least one node is required"},
			{"schema_list[0].default", 12, `node "node1" is not in schema_list[0].nodes`},
		}},
		{"missing default", edit("  default: node1\n", ""),
			[]Problem{{"schema_list[0].default", 11, "required: the node for tables without a shard rule"}}},
		{"default not in schema", edit("default: node1", "default: node9"),
			[]Problem{{"schema_list[0].default", 13, `node "node9" is not in schema_list[0].nodes`}}},

		// Shard rules.
		{"rule missing fields", shard("  - type: hash\n    nodes: [node1]\n    locations: [2]\n"), []Problem{
			{"schema_list[0].shard[0].db", 15, "required"},
			{"schema_list[0].shard[0].table", 15, "required"},
			{"schema_list[0].shard[0].key", 15, "required: the sharding column"},
		}},
		{"rule type", shard("  - {db: d, table: t1, key: id, type: list, nodes: [node1]}\n  - {db: d, table: t2, key: id, nodes: [node1]}\n"), []Problem{
			{"schema_list[0].shard[0].type", 15, `unknown type "list"; use hash, range, date_year, date_month, date_day, global`},
			{"schema_list[0].shard[1].type", 16, "required: one of hash, range, date_year, date_month, date_day, global"},
		}},
		{"rule nodes", shard("  - db: d\n    table: t\n    key: id\n    type: hash\n    nodes: [node1, node3, node1]\n    locations: [1, 1, 1]\n"), []Problem{
			{"schema_list[0].shard[0].nodes[1]", 19, `node "node3" is not in schema_list[0].nodes`},
			{"schema_list[0].shard[0].nodes[2]", 19, `node "node1" is listed twice`},
		}},
		{"rule without nodes", shard("  - {db: d, table: t, type: global}\n"),
			[]Problem{{"schema_list[0].shard[0].nodes", 15, "at least one node is required"}}},
		{"duplicate rule", shard("  - {db: d, table: t, key: id, type: hash, nodes: [node1], locations: [2]}\n  - {db: e, table: t, type: global, nodes: [node1]}\n  - {db: d, table: t, key: k, type: hash, nodes: [node2], locations: [2]}\n"),
			[]Problem{{"schema_list[0].shard[2].table", 17, "d.t already has a rule at schema_list[0].shard[0]"}}},
		{"hash locations", shard("  - {db: d, table: a, key: id, type: hash, nodes: [node1, node2], locations: [4]}\n  - {db: d, table: b, key: id, type: hash, nodes: [node1, node2], locations: [0, 0]}\n  - {db: d, table: c, key: id, type: hash, nodes: [node1, node2], locations: [-1, 2]}\n  - {db: d, table: e, key: id, type: hash, nodes: [node1, node2], locations: [0, 2]}\n"), []Problem{
			{"schema_list[0].shard[0].locations", 15, "has 1 entries but nodes has 2; give one sub-table count per node"},
			{"schema_list[0].shard[1].locations", 16, "no sub-tables: at least one location must be positive"},
			{"schema_list[0].shard[2].locations[0]", 17, "-1 is negative"},
		}},
		{"range row limit", shard("  - db: d\n    table: t\n    key: id\n    type: range\n    nodes: [node1]\n    locations: [4]\n"),
			[]Problem{{"schema_list[0].shard[0].table_row_limit", 15, "range rules need a positive table_row_limit"}}},
		{"date_day ranges", shard("  - db: d\n    table: t\n    key: ctime\n    type: date_day\n    nodes: [node1, node2]\n    date_range:\n    - 2015122-20151224\n    - 20150230\n"), []Problem{
			{"schema_list[0].shard[0].date_range[0]", 21, `"2015122-20151224" is not YYYYMMDD or YYYYMMDD-YYYYMMDD`},
			{"schema_list[0].shard[0].date_range[1]", 22, `"20150230" is not YYYYMMDD or YYYYMMDD-YYYYMMDD`},
		}},
		{"date_day overlap", shard("  - db: d\n    table: t\n    key: ctime\n    type: date_day\n    nodes: [node1, node2]\n    date_range:\n    - 20151225-20151231\n    - 20151220-20151225\n"),
			[]Problem{{"schema_list[0].shard[0].date_range[1]", 22, `"20151220-20151225" overlaps schema_list[0].shard[0].date_range[0] "20151225-20151231"`}}},
		{"date_month", shard("  - db: d\n    table: t\n    key: ctime\n    type: date_month\n    nodes: [node1, node2]\n    date_range: [201513, 201602-201512]\n"), []Problem{
			{"schema_list[0].shard[0].date_range[0]", 20, `"201513" is not YYYYMM or YYYYMM-YYYYMM`},
			{"schema_list[0].shard[0].date_range[1]", 20, `"201602-201512" ends before it starts`},
		}},
		{"date_year count", shard("  - {db: d, table: t, key: y, type: date_year, nodes: [node1, node2], date_range: [2015-2016]}\n"),
			[]Problem{{"schema_list[0].shard[0].date_range", 15, "has 1 entries but nodes has 2; give one span per node"}}},
		{"date_year ok", shard("  - {db: d, table: t, key: y, type: date_year, nodes: [node1, node2], date_range: [2015-2016, 2017]}\n"), nil},
		{"global", shard("  - db: d\n    table: t\n    type: global\n    nodes: [node1, node2]\n    locations: [1, 1]\n    date_range: [2015, 2016]\n"), []Problem{
			{"schema_list[0].shard[0].locations", 19, "not allowed for type global"},
			{"schema_list[0].shard[0].date_range", 20, "not allowed for type global"},
		}},
		{"global ok", shard("  - {db: d, table: t, type: global, nodes: [node1, node2]}\n"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, tc.yaml, tc.want) })
	}
}

// checkProblems parses data and compares the problems found with want; nil
// want means data must parse.
func checkProblems(t *testing.T, data string, want []Problem) {
	t.Helper()
	_, err := Parse([]byte(data))
	if want == nil {
		if err != nil {
			t.Fatalf("Parse: unexpected error:\n%v", err)
		}
		return
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: err = %v (%T), want *Error", err, err)
	}
	if !reflect.DeepEqual(ce.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", (&Error{Problems: ce.Problems}), (&Error{Problems: want}))
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := Parse([]byte(edit("default: node1", "default: node9") + "log_level: loud\n"))
	// Problems come in validation order: top-level keys before schemas.
	want := "config: log_level (line 14): unknown level \"loud\"; use debug, info, warn, error\n" +
		"config: schema_list[0].default (line 13): node \"node9\" is not in schema_list[0].nodes"
	if err == nil || err.Error() != want {
		t.Errorf("Error() =\n%v\nwant\n%s", err, want)
	}
}

// TestValidateWithoutLines checks a Config built in code: problems carry no
// line, and Validate collects all of them.
func TestValidateWithoutLines(t *testing.T) {
	c := Default()
	c.Users = []User{{User: "u"}, {User: "u"}}
	c.Nodes = []Node{{Name: "n", Master: "db"}}
	c.Schemas = []Schema{{User: "u", Nodes: []string{"n", "m"}, Default: "m"}}
	err := c.Validate()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Validate = %v, want *Error", err)
	}
	want := []Problem{
		{"user_list[1].user", 0, `user "u" is already defined at user_list[0]`},
		{"nodes[0].master", 0, `"db" is not host:port`},
		{"schema_list[0].nodes[1]", 0, `node "m" is not defined in nodes`},
	}
	if !reflect.DeepEqual(ce.Problems, want) {
		t.Errorf("problems = %+v, want %+v", ce.Problems, want)
	}
	if got := ce.Problems[0].String(); got != `user_list[1].user: user "u" is already defined at user_list[0]` {
		t.Errorf("String() = %q", got)
	}
}

func TestLoad(t *testing.T) {
	c, err := Load(filepath.Join("..", "etc", "ks.yaml"))
	if err != nil {
		t.Fatalf("etc/ks.yaml: %v", err)
	}
	if c.Addr != "127.0.0.1:9696" || c.WebAddr != "127.0.0.1:9797" || len(c.Nodes) != 2 || c.SchemaFor("shardgate") == nil {
		t.Errorf("etc/ks.yaml loaded as %+v", c)
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "ks.yaml")
	if err := os.WriteFile(bad, []byte(base+"bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if want := "config: " + bad + `: bogus (line 14): unknown key "bogus"`; err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v, want %s", err, want)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want os.ErrNotExist", err)
	}
}
