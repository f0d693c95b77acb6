package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v2"
)

// Per-node defaults. kingshard treats 0 as "not set" for these keys, so they
// cannot live in Default; Parse applies them to every node that leaves them 0.
const (
	defaultMaxConnsLimit    = 64
	defaultDownAfterNoalive = 30
)

// Default returns a Config holding every default. Parse decodes the file over
// it, so any key the file leaves out keeps the value set here. The returned
// Config has no users, nodes or schemas and therefore does not validate until
// those are filled in.
func Default() *Config {
	tcp := TCPOptions{
		NoDelay:     true,
		ReadBuffer:  16384,
		WriteBuffer: 16384,
	}
	return &Config{
		Addr:                     "127.0.0.1:9696",
		LogLevel:                 "info",
		LogSQL:                   "off",
		ProxyCharset:             "utf8mb4",
		DefaultAuthPlugin:        "mysql_native_password",
		ShutdownTimeout:          10 * time.Second,
		MaxConnections:           10000,
		MergeMemoryLimit:         256 << 20,
		MergeMemoryTotal:         1 << 30,
		MaxAllowedPacket:         16 << 20, // MariaDB's default
		PacketMemoryTotal:        256 << 20,
		MaxUnauthenticated:       512,
		MaxPreparedStmts:         16382, // MariaDB's default max_prepared_stmt_count
		MaxPreparedStmtsTotal:    65536,
		ClientWriteTimeout:       60 * time.Second,
		IdleInTransactionTimeout: 5 * time.Minute,
		DeadlockDetectAfter:      100 * time.Millisecond,
		PlanCacheSize:            4096,
		DigestSize:               4096,
		FallbackMaxRows:          1_000_000,
		FallbackMaxBytes:         256 << 20,
		FallbackMaxTime:          time.Minute,
		TransactionMode:          TransactionMulti,
		DenyStatements:           append([]string(nil), DenyKinds...),
		Frontend:                 tcp,
		Move: MoveOptions{CutoverTimeout: time.Second, CopyWorkers: 4, BatchRows: 1000, ApplyWorkers: 4, ThrottleLatency: 50 * time.Millisecond,
			CutoverAckWait: 500 * time.Millisecond, BufferSize: 1000},
		Backend: BackendOptions{
			TCPOptions:         tcp,
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
			PoolGrowth:         true,
			PreparedStmtBudget: 2048,
		},
	}
}

// DenyKinds are the kinds of statements deny_statements may name: those
// that act on the server all clients share through the proxy's backend
// account. All are refused by default.
var DenyKinds = []string{"shutdown", "set_global", "account", "read_lock", "plugin", "replication", "sql_log_bin", "stored_program"}

// Transaction modes (transaction_mode).
const (
	TransactionMulti  = "multi"
	TransactionSingle = "single"
	TransactionXA     = "xa"
)

// Config is the whole ks.yaml. The kingshard keys come first with kingshard's
// meaning; the shardgate extensions follow. A Config is read-only once Parse
// returns it and is then safe for concurrent use.
type Config struct {
	// Addr is the client listener, host:port. Default "127.0.0.1:9696".
	Addr string `yaml:"addr"`
	// Socket is an optional Unix socket path clients may also connect to
	// (what MySQL clients use for host "localhost"); "" disables it. A
	// stale socket file left by an earlier proxy is replaced at start.
	Socket string `yaml:"socket"`
	// Users are the accounts clients log in with. At least one is required.
	Users []User `yaml:"user_list"`
	// TLSCert and TLSKey are PEM files of the certificate (chain) and key
	// clients' TLS connections get; both or neither. The files are read
	// again when they change (certificate rotation without a restart).
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	// RequireSecureTransport refuses clients that do not use TLS (error
	// 1045). Needs tls_cert.
	RequireSecureTransport bool `yaml:"require_secure_transport"`

	// WebAddr is the admin HTTP listener; "" disables it.
	WebAddr string `yaml:"web_addr"`
	// WebUser and WebPassword guard the admin HTTP listener.
	WebUser     string `yaml:"web_user"`
	WebPassword string `yaml:"web_password"`
	// PrometheusAddr is the metrics listener; "" disables it.
	PrometheusAddr string `yaml:"prometheus_addr"`
	// LogPath is the log directory; "" logs to stderr.
	LogPath string `yaml:"log_path"`
	// LogLevel is debug, info, warn or error. Default "info".
	LogLevel string `yaml:"log_level"`
	// LogSQL is "on" or "off" (true/false/yes/no are accepted too, in any
	// case). Default "off". Read it through LogSQLEnabled.
	LogSQL string `yaml:"log_sql"`
	// SlowLogTime is the slow-query threshold in milliseconds; 0 is off.
	SlowLogTime int `yaml:"slow_log_time"`
	// AllowIPs is a comma-separated list of client IPs and CIDRs; "" lets
	// everyone in. Read it through AllowList.
	AllowIPs string `yaml:"allow_ips"`
	// BlacklistSQLFile names a file of statements to refuse, one per line:
	// any statement with the same fingerprint (literals stripped) is
	// refused.
	BlacklistSQLFile string `yaml:"blacklist_sql_file"`
	// ProxyCharset is the character set the proxy announces to clients, a
	// lowercase MySQL charset name. Default "utf8mb4".
	ProxyCharset string `yaml:"proxy_charset"`
	// Nodes are the backend MySQL nodes, each a master and optional replicas.
	Nodes []Node `yaml:"nodes"`
	// Schemas give each user its nodes, default node and shard rules.
	Schemas []Schema `yaml:"schema_list"`

	// ServerVersion is the version announced to clients; "" means detect it
	// from the backend.
	ServerVersion string `yaml:"server_version"`
	// DefaultAuthPlugin is "mysql_native_password" (default) or
	// "caching_sha2_password".
	DefaultAuthPlugin string `yaml:"default_auth_plugin"`
	// ShutdownTimeout bounds a graceful shutdown, counted from the signal
	// (drain_delay included). Default 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long, after SIGTERM, /healthz answers 503 while the
	// proxy still accepts clients (a load balancer stops sending new
	// ones) before the listeners close. Default 0.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// MaxConnections caps client connections; past it clients get error
	// 1040. Default 10000.
	MaxConnections int `yaml:"max_connections"`
	// MergeMemoryLimit bounds, in bytes, the rows one cross-shard merge
	// that cannot stream (GROUP BY, DISTINCT, sorting grouped rows) may
	// hold per statement; past it the client gets error 1038. Default
	// 256 MiB.
	MergeMemoryLimit int64 `yaml:"merge_memory_limit"`
	// MergeMemoryTotal bounds the rows all merges under way hold
	// together; past it the statement that would exceed it gets error
	// 1038. Default 1 GiB.
	MergeMemoryTotal int64 `yaml:"merge_memory_total"`
	// MaxAllowedPacket bounds, in bytes, one command a logged-in client
	// sends (one logical packet, compressed or not) and the long data
	// (COM_STMT_SEND_LONG_DATA) of one parameter of a prepared statement's
	// execution, as on MariaDB; past it the client gets error 1153 (or 1105 at the execution). Until
	// a client has logged in, the bound is 64 KiB. Default 16 MiB (as on
	// MariaDB), at most 1 GiB (MySQL's largest).
	MaxAllowedPacket int `yaml:"max_allowed_packet"`
	// PacketMemoryPerClient bounds, in bytes, the buffer one logged-in
	// client's command may take while it arrives (beyond the 16 KiB read
	// buffer; it grows with the bytes received, compressed frames being
	// inflated into it); past it the client gets error 1153. Default 0:
	// max_allowed_packet.
	PacketMemoryPerClient int `yaml:"packet_memory_per_client"`
	// PacketMemoryTotal bounds, in bytes, those buffers of all clients
	// together: a command that would take more gets error 1041
	// (ER_OUT_OF_RESOURCES) once the rest of it has been read and
	// dropped, and its connection closes; other clients are served
	// meanwhile. Default 256 MiB; 0 turns the bound off.
	PacketMemoryTotal int64 `yaml:"packet_memory_total"`
	// MaxUnauthenticated caps the client connections that have not
	// logged in yet (each has 10 s to do it, and may send at most 64 KiB
	// meanwhile); past it new connections get error 1040 at once. Default
	// 512.
	MaxUnauthenticated int `yaml:"max_unauthenticated_connections"`
	// MaxPreparedStmts caps the prepared statements one client session
	// keeps open (binary and SQL-level together), as MariaDB's
	// max_prepared_stmt_count does: past it PREPARE gets error 1461.
	// Default 16382 (MariaDB's default), at most 1048576.
	MaxPreparedStmts int `yaml:"max_prepared_stmt_count"`
	// MaxPreparedStmtsTotal caps the prepared statements all client
	// sessions keep open together (each costs the proxy about half a
	// kilobyte plus its text); past it PREPARE gets error 1461. Default
	// 65536.
	MaxPreparedStmtsTotal int `yaml:"max_prepared_stmt_total"`
	// ClientWriteTimeout bounds one write to a client (MariaDB's
	// net_write_timeout): a client that stops reading a result is
	// disconnected after it, and the backend connection that was sending
	// the result is closed (the server stops the statement), so it cannot
	// hold a pooled connection for good. Default 60s; 0 turns it off.
	ClientWriteTimeout time.Duration `yaml:"client_write_timeout"`
	// IdleInTransactionTimeout ends the transaction of a client that
	// waits longer than this for its next command inside it (MariaDB's
	// idle_transaction_timeout): the transaction is rolled back and the
	// connections it held go back to the pool at once; the client's next
	// command gets error 1927 and its connection closes. Default 5m; 0
	// turns it off.
	IdleInTransactionTimeout time.Duration `yaml:"idle_in_transaction_timeout"`
	// DeadlockDetectAfter is how long a statement of a transaction runs
	// before the proxy looks for a deadlock across nodes that it may be
	// part of (no server sees those; see docs/transactions.md): the
	// nodes' lock waits are read, and a cycle is broken by rolling back
	// the transaction that did the least work, whose client gets 1213.
	// Default 100ms; 0 turns the detector off. Read at start-up.
	DeadlockDetectAfter time.Duration `yaml:"deadlock_detect_after"`
	// PlanCacheSize bounds the statement shapes (text with its literals
	// stripped) whose single-shard plans each schema keeps, so that
	// statements seen before are routed without parsing. 0 disables the
	// cache. Default 4096.
	PlanCacheSize int `yaml:"plan_cache_size"`
	// TransactionMode says what a transaction may do across nodes:
	// TransactionMulti (the default) opens it on every node it reaches and
	// commits them one after another; TransactionSingle refuses the
	// statement that would reach a second node; TransactionXA commits a
	// transaction that reached several nodes with XA two-phase commit and
	// a decision log in the sidecar (see XA). A schema's own
	// transaction_mode overrides it.
	// DenyStatements are the kinds of statements (DenyKinds) clients may
	// not run through the proxy's shared backend account. Default: all;
	// [] allows them all.
	DenyStatements []string `yaml:"deny_statements"`
	// BackendLogins names a user_list user whose schema has no shard
	// rules. Clients whose user is not in user_list then log in with the
	// default node's own accounts, checked by MariaDB
	// (mysql_native_password), and use that schema: each such session has
	// a backend connection of its own, logged in as the client's account,
	// for its whole life, so MariaDB's privileges, CURRENT_USER() and
	// definers are the account's. "" (default): only user_list logs in.
	BackendLogins string `yaml:"backend_logins"`
	// AdminUser is the user_list user that may run kingshard's admin SQL
	// (admin node(...), admin server(...), show node status, ...) on the
	// client port; "" (default): nobody may.
	AdminUser string `yaml:"admin_user"`
	// statement that would reach a second node.
	TransactionMode string `yaml:"transaction_mode"`
	// Frontend tunes client-side sockets.
	Frontend TCPOptions `yaml:"frontend"`
	// Backend tunes backend sockets and pools.
	Backend BackendOptions `yaml:"backend"`
	// FallbackMaxRows and FallbackMaxBytes bound the rows (and their
	// bytes) one exact fallback copies from the subtables; 0 rows turns
	// the fallback off (such reads are refused with 1235).
	FallbackMaxRows  int64 `yaml:"fallback_max_rows"`
	FallbackMaxBytes int64 `yaml:"fallback_max_bytes"`
	// FallbackMaxTime bounds one exact fallback: its copy and its
	// statement (MariaDB's max_statement_time); 0 means no bound.
	FallbackMaxTime time.Duration `yaml:"fallback_max_time"`

	// Sidecar is where the proxy keeps state that several proxies share
	// (the global sequences): a database on one backend node, created on
	// first use.
	Sidecar Sidecar `yaml:"sidecar"`
	// Move tunes online resharding and import.
	Move MoveOptions `yaml:"move"`
	// XA tunes two-phase commit (transaction_mode: xa).
	XA XAOptions `yaml:"xa"`
	// DigestSize bounds the statement shapes the query digest keeps (the
	// least run are evicted); 0 turns the digest off. Default 4096.
	DigestSize int `yaml:"digest_size"`
	// Streams deliver the row changes of logical tables into Kafka
	// (streams.go, package kafkasink).
	Streams []Stream `yaml:"streams"`
	// Cache keeps the answers of single-table SELECTs, invalidated from
	// the binary logs (cache.go, package resultcache); nil: none.
	Cache *Cache `yaml:"cache"`

	// pos maps key paths to lines of the bytes this Config was parsed from;
	// nil for a Config built in code.
	pos *positions
}

// User is one entry of user_list: a client account.
type User struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// MaxBackendConns is how many pooled connections of one node the
	// user's sessions may hold at once; past it a session waits up to
	// backend.acquire_timeout for one of them, then gets error 1203. 0
	// (default): DefaultUserShare percent of the node's limit when
	// user_list has several users, no quota when it has one.
	MaxBackendConns int `yaml:"max_backend_conns"`
}

// DefaultUserShare is the percent of a node's pool limit one user may hold
// when user_list has several users and the user sets no
// max_backend_conns: the others keep a quarter.
const DefaultUserShare = 75

// BackendQuota is user's quota of each node's pooled connections: most
// connections, or share percent of the node's limit (most 0); both 0 for
// none.
func (c *Config) BackendQuota(user string) (most, share int) {
	for _, u := range c.Users {
		if u.User == user && u.MaxBackendConns > 0 {
			return u.MaxBackendConns, 0
		}
	}
	if len(c.Users) > 1 {
		return 0, DefaultUserShare
	}
	return 0, 0
}

// Node is one entry of nodes: a backend master with optional replicas.
type Node struct {
	// Name is how schemas and shard rules refer to the node.
	Name string `yaml:"name"`
	// Master is the master's host:port. Required.
	Master string `yaml:"master"`
	// Slave lists replicas in kingshard's format,
	// "host:port[@weight],host:port[@weight]". Read it through Slaves.
	Slave string `yaml:"slave"`
	// User and Password are the backend account.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// MaxConnsLimit caps pooled connections per backend; Parse turns 0
	// into 64.
	MaxConnsLimit int `yaml:"max_conns_limit"`
	// DownAfterNoalive is how many seconds a backend may fail health checks
	// before it is marked down; Parse turns 0 into 30.
	DownAfterNoalive int `yaml:"down_after_noalive"`
	// TLS makes every connection to the node use TLS, verifying the
	// server's certificate against TLSCA (PEM; the system's roots when
	// empty) and the name TLSServerName (the master's host when empty).
	TLS           bool   `yaml:"tls"`
	TLSCA         string `yaml:"tls_ca"`
	TLSServerName string `yaml:"tls_server_name"`
}

// Replica is one parsed entry of a node's slave list.
type Replica struct {
	Addr   string // host:port
	Weight int    // relative read weight, 1 when not given
}

// Schema is one entry of schema_list: what a user sees.
type Schema struct {
	// User names the user_list user this schema belongs to.
	User string `yaml:"user"`
	// Nodes are the node names this schema may use.
	Nodes []string `yaml:"nodes"`
	// Default is the node for tables without a shard rule; it must be one
	// of Nodes.
	Default string `yaml:"default"`
	// Shard holds the shard rules, at most one per db.table.
	Shard []ShardRule `yaml:"shard"`
	// RWSplit sends reads outside transactions to the nodes' replicas
	// (slave); nil (unset) means on, as in kingshard.
	RWSplit *bool `yaml:"rw_split"`
	// ReadConsistency is what a read from a replica must see: eventual
	// (any replica within max_replica_lag), session (also the session's
	// own writes; the default), universal (every write the master had
	// committed when the read arrived, whichever proxy or session made it:
	// read-your-writes across proxies, at the cost of reading the master's
	// GTID position before each replica read) or strong (no replica reads
	// at all).
	ReadConsistency string `yaml:"read_consistency"`
	// TransactionMode overrides the top-level transaction_mode for the
	// sessions of this schema: multi, single or xa; "" (default): the
	// top-level one.
	TransactionMode string `yaml:"transaction_mode"`
}

// XAOptions tunes two-phase commit and its recovery.
type XAOptions struct {
	// Instance names this proxy in the branch ids it writes; a proxy that
	// starts under the name of one that died takes over its prepared
	// branches at once. Default: the host name and the port of addr.
	Instance string `yaml:"instance"`
	// RecoveryInterval is how often the proxy looks for prepared branches
	// nobody is finishing (XA RECOVER on every node). Default 5s.
	RecoveryInterval time.Duration `yaml:"recovery_interval"`
	// Lease is how long a proxy that stops renewing its registration in
	// the sidecar is still taken for alive: after it, other proxies
	// finish its prepared branches. Default 10s.
	Lease time.Duration `yaml:"lease"`
}

// TxnMode returns the transaction mode of user's schema.
func (c *Config) TxnMode(user string) string {
	for i := range c.Schemas {
		if c.Schemas[i].User == user && c.Schemas[i].TransactionMode != "" {
			return c.Schemas[i].TransactionMode
		}
	}
	return c.TransactionMode
}

// UsesXA reports whether any schema (or the top level) uses
// transaction_mode xa, and so the sidecar's decision log.
func (c *Config) UsesXA() bool {
	if c.TransactionMode == TransactionXA {
		return true
	}
	for i := range c.Schemas {
		if c.Schemas[i].TransactionMode == TransactionXA {
			return true
		}
	}
	return false
}

// Read consistency levels (read_consistency).
const (
	ConsistencyEventual = "eventual"
	ConsistencySession  = "session"
	// ConsistencyUniversal: before a replica read the proxy reads the
	// master's @@gtid_binlog_pos and waits for the replica to apply it
	// (MaxScale's causal_reads=universal).
	ConsistencyUniversal = "universal"
	ConsistencyStrong    = "strong"
)

// ReadSplit reports whether reads of this schema may go to replicas.
func (s *Schema) ReadSplit() bool {
	return (s.RWSplit == nil || *s.RWSplit) && s.Consistency() != ConsistencyStrong
}

// Consistency returns read_consistency with its default.
func (s *Schema) Consistency() string {
	if s.ReadConsistency == "" {
		return ConsistencySession
	}
	return s.ReadConsistency
}

// ShardRule is one entry of a schema's shard list.
type ShardRule struct {
	DB    string `yaml:"db"`
	Table string `yaml:"table"`
	// Key is the sharding column; not used by type global.
	Key string `yaml:"key"`
	// Type is hash, range, date_year, date_month, date_day or global.
	Type string `yaml:"type"`
	// Nodes are the nodes holding this table, all among the schema's nodes.
	Nodes []string `yaml:"nodes"`
	// Locations gives, per node, how many sub-tables it holds (hash and
	// range).
	Locations []int `yaml:"locations"`
	// TableRowLimit is the key span of one sub-table (range only).
	TableRowLimit int `yaml:"table_row_limit"`
	// DateRange gives, per node, the span it holds, "A-B" or "A", as YYYY,
	// YYYYMM or YYYYMMDD for date_year, date_month and date_day.
	DateRange []string `yaml:"date_range"`
	// Sequence names the column (usually the table's AUTO_INCREMENT
	// column) that the proxy fills from a durable global sequence when an
	// INSERT leaves it out or gives NULL, DEFAULT or 0; empty keeps
	// kingshard's behaviour (every INSERT must carry the shard key).
	Sequence string `yaml:"sequence"`
	// SequenceBlock is how many ids one reservation in the sidecar takes;
	// Parse turns 0 into 1000.
	SequenceBlock int `yaml:"sequence_block"`
	// SequenceAdvance makes an explicit value above the sequence move it
	// past that value (one more round trip to the sidecar per such
	// INSERT), so a later generated id never collides with it.
	SequenceAdvance bool `yaml:"sequence_advance"`
	// Generation names the subtables of a hash or range rule: 0 (the
	// default) gives kingshard's table_0000, table_0001, ...; N > 0 gives
	// table_gN_0000, ... Online resharding writes a table's new layout
	// under the next generation, so old and new subtables can live on the
	// same node while rows move.
	Generation int `yaml:"generation"`
}

// Subtable returns the name of subtable i of a hash or range rule.
func (r *ShardRule) Subtable(i int) string {
	if r.Generation > 0 {
		return fmt.Sprintf("%s_g%d_%04d", r.Table, r.Generation, i)
	}
	return fmt.Sprintf("%s_%04d", r.Table, i)
}

// WithDefaults returns m with every zero field set to its default.
func (m MoveOptions) WithDefaults() MoveOptions {
	d := Default().Move
	if m.CutoverTimeout == 0 {
		m.CutoverTimeout = d.CutoverTimeout
	}
	if m.CopyWorkers == 0 {
		m.CopyWorkers = d.CopyWorkers
	}
	if m.BatchRows == 0 {
		m.BatchRows = d.BatchRows
	}
	if m.ApplyWorkers == 0 {
		m.ApplyWorkers = d.ApplyWorkers
	}
	if m.CutoverAckWait == 0 {
		m.CutoverAckWait = d.CutoverAckWait
	}
	if m.BufferWindow == 0 {
		m.BufferWindow = 2*m.CutoverTimeout + time.Second
	}
	if m.BufferSize == 0 {
		m.BufferSize = d.BufferSize
	}
	return m
}

// MoveOptions tune online resharding and import (the move section).
type MoveOptions struct {
	// CutoverTimeout bounds the pause of a cutover: statements on the
	// table wait at most this long; if the new layout has not caught up
	// by then nothing changes and the cutover is tried again. Default 1s.
	CutoverTimeout time.Duration `yaml:"cutover_timeout"`
	// CopyWorkers write copied rows, each to its share of the new
	// subtables (order is kept per subtable). Default 4.
	CopyWorkers int `yaml:"copy_workers"`
	// BatchRows is the rows of one multi-row insert of the copy. Default
	// 1000.
	BatchRows int `yaml:"batch_rows"`
	// ApplyWorkers apply the binary log to the new subtables, each its
	// share of the primary keys (order is kept per key). Default 4.
	ApplyWorkers int `yaml:"apply_workers"`
	// ThrottleLatency slows the copy while a probe query on a source node
	// takes longer than this (the source is busy). Default 50ms; 0 off.
	ThrottleLatency time.Duration `yaml:"throttle_latency"`
	// CutoverAckWait is how long, in a fleet, the proxy that cuts over
	// waits for every other live proxy to hold the table's statements
	// before it fences and swaps regardless (a proxy that did not answer
	// meets the fence). Default 500ms.
	CutoverAckWait time.Duration `yaml:"cutover_ack_wait"`
	// BufferWindow is the longest one statement waits at a table held by
	// a cutover; past it the statement fails with 1205. Default twice
	// cutover_timeout and a second.
	BufferWindow time.Duration `yaml:"buffer_window"`
	// BufferSize is the most statements one proxy holds on one table
	// during a cutover; one more fails at once with 1205. Default 1000.
	BufferSize int `yaml:"buffer_size"`
}

// Sidecar is the sidecar database: a node and a database name.
type Sidecar struct {
	// Node is the node holding the database; Parse defaults it to the
	// default node of the first schema that needs it.
	Node string `yaml:"node"`
	// DB is the database name; default shardgate_sidecar.
	DB string `yaml:"db"`
}

// DefaultSequenceBlock is the ids one sequence reservation takes when a
// rule does not say.
const DefaultSequenceBlock = 1000

// TCPOptions tunes one side's sockets and per-connection buffers.
type TCPOptions struct {
	// NoDelay sets TCP_NODELAY. Default true.
	NoDelay bool `yaml:"nodelay"`
	// ReadBuffer and WriteBuffer size the per-connection bufio reader and
	// writer in bytes. Default 16384 each.
	ReadBuffer  int `yaml:"read_buffer"`
	WriteBuffer int `yaml:"write_buffer"`
	// SocketReadBuffer and SocketWriteBuffer set SO_RCVBUF and SO_SNDBUF;
	// 0 keeps the OS default.
	SocketReadBuffer  int `yaml:"socket_read_buffer"`
	SocketWriteBuffer int `yaml:"socket_write_buffer"`
}

// BackendOptions tunes backend sockets, pools and health checks. Durations
// are written as Go duration strings ("5s", "1m30s").
type BackendOptions struct {
	TCPOptions `yaml:",inline"`
	// DialTimeout bounds connecting to a backend. Default 3s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// ReadTimeout is a per-read deadline on backend sockets; 0 (default)
	// means none.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// AcquireTimeout is how long a query waits for a pooled connection
	// before failing with error 1040. Default 5s.
	AcquireTimeout time.Duration `yaml:"acquire_timeout"`
	// IdleTimeout closes pooled connections idle longer than this; 0 never
	// closes them for idleness. Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxLifetime closes pooled connections older than this; 0 means no
	// limit. Default 1h.
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	// PingAfterIdle pings a pooled connection idle longer than this before
	// handing it out; 0 never pings. Default 30s.
	PingAfterIdle time.Duration `yaml:"ping_after_idle"`
	// HealthInterval is the health-check period per node. Default 2s.
	HealthInterval time.Duration `yaml:"health_interval"`
	// CommandTimeout bounds each command the proxy sends on its own
	// (ping, COM_CHANGE_USER, the SETs that carry a session, COMMIT and
	// ROLLBACK of a transaction across nodes), so a server that stops
	// answering cannot hold a session, KILL or shutdown. Default 30s.
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// MaxReplicaLag is how far behind its master (Seconds_Behind_Master)
	// a replica may be and still get reads. Default 10s.
	MaxReplicaLag time.Duration `yaml:"max_replica_lag"`
	// ReplicaWait is how long a read under read_consistency session waits
	// on a replica for the session's last write (under universal: for the
	// master's position read before it) with MASTER_GTID_WAIT before it
	// goes to the master instead. Default 200ms; 0 never waits.
	ReplicaWait time.Duration `yaml:"replica_wait"`
	// MasterSwitchWait is how long a write that a read-only master refused
	// waits for the node's master to move (a switchover under way) before
	// the client gets the server's error; only for nodes with replicas and
	// statements that can be run again (see docs/replicas.md). Default 5s; 0 never
	// waits.
	MasterSwitchWait time.Duration `yaml:"master_switch_wait"`
	// PreparedStmtBudget bounds the statements the proxy keeps prepared on
	// one node's pooled connections together (its statement cache), so
	// the server's max_prepared_stmt_count, shared by all its clients,
	// stays mostly theirs: past it a connection closes its least recently
	// prepared statement before preparing another. Nodes on one server
	// share its limit. Default 2048 (an eighth of MariaDB's default
	// 16382); at least 1.
	PreparedStmtBudget int `yaml:"prepared_stmt_budget"`
	// PoolGrowth lets a node's pool check out more than max_conns_limit
	// connections when the server has room: up to its max_connections (read
	// at every health check) less ServerHeadroom. Connections past
	// max_conns_limit close after 10 s idle. Default true; false makes
	// max_conns_limit a hard limit.
	PoolGrowth bool `yaml:"pool_growth"`
	// ServerHeadroom is how many of a server's max_connections a growing
	// pool leaves to the server's other clients (and to the proxy's own
	// health checks, KILLs and backend_logins sessions). Default 0: a
	// tenth of max_connections, at least 10. Nodes on one server each
	// count the whole max_connections.
	ServerHeadroom int `yaml:"server_headroom"`
}

// Load reads the file at path and parses it with Parse. A configuration error
// is an *Error whose File is path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.File = path
		}
		return nil, err
	}
	return c, nil
}

// Parse decodes data strictly over Default, applies the per-node defaults and
// validates the result. Every problem found, from decoding or validation, is
// returned together in one *Error.
func Parse(data []byte) (*Config, error) {
	c := Default()
	pos := indexPositions(data)
	var problems []Problem
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			// A syntax error: nothing decoded can be trusted.
			return nil, &Error{Problems: []Problem{syntaxProblem(data, err)}}
		}
		for _, msg := range te.Errors {
			problems = append(problems, pos.decodeProblem(msg))
		}
	}
	problems = append(problems, pos.durationProblems()...)
	c.applyDefaults()
	c.pos = pos

	// Keys that failed to decode hold a default or zero value; checking
	// them again would only repeat the decode problem in other words.
	decodeProblems := problems[:len(problems):len(problems)]
	for _, p := range c.validate() {
		if !coveredBy(p.Path, decodeProblems) {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return c, nil
}

// applyDefaults fills the defaults that decoding over Default cannot: node
// fields where kingshard reads 0 as "not set", string keys written with an
// empty value, and extension blocks written with no value at all (which
// yaml.v2 decodes as all-zero).
func (c *Config) applyDefaults() {
	d := Default()
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.MaxConnsLimit == 0 {
			n.MaxConnsLimit = defaultMaxConnsLimit
		}
		if n.DownAfterNoalive == 0 {
			n.DownAfterNoalive = defaultDownAfterNoalive
		}
	}
	for _, f := range []struct{ v, def *string }{
		{&c.Addr, &d.Addr},
		{&c.LogLevel, &d.LogLevel},
		{&c.LogSQL, &d.LogSQL},
		{&c.ProxyCharset, &d.ProxyCharset},
		{&c.DefaultAuthPlugin, &d.DefaultAuthPlugin},
	} {
		if *f.v == "" {
			*f.v = *f.def
		}
	}
	if c.Frontend == (TCPOptions{}) {
		c.Frontend = d.Frontend
	}
	if c.Move == (MoveOptions{}) {
		c.Move = d.Move
	}
	if c.Backend == (BackendOptions{}) {
		c.Backend = d.Backend
	}
	for i := range c.Schemas {
		for k := range c.Schemas[i].Shard {
			r := &c.Schemas[i].Shard[k]
			if r.Sequence != "" && r.SequenceBlock == 0 {
				r.SequenceBlock = DefaultSequenceBlock
			}
			if r.Sequence != "" && c.Sidecar.Node == "" {
				c.Sidecar.Node = c.Schemas[i].Default
			}
		}
	}
	if c.UsesXA() && c.Sidecar.Node == "" {
		for i := range c.Schemas {
			if c.Schemas[i].Default != "" {
				c.Sidecar.Node = c.Schemas[i].Default
				break
			}
		}
	}
	if c.XA.RecoveryInterval == 0 {
		c.XA.RecoveryInterval = 5 * time.Second
	}
	if c.XA.Lease == 0 {
		c.XA.Lease = 10 * time.Second
	}
	if c.Sidecar.DB == "" {
		c.Sidecar.DB = "shardgate_sidecar"
	}
	c.streamDefaults()
	c.cacheDefaults()
}

// Sequences reports whether any shard rule uses a global sequence (and so
// the sidecar database).
func (c *Config) Sequences() bool {
	for i := range c.Schemas {
		for k := range c.Schemas[i].Shard {
			if c.Schemas[i].Shard[k].Sequence != "" {
				return true
			}
		}
	}
	return false
}

// LogSQLEnabled reports whether log_sql turns SQL logging on.
func (c *Config) LogSQLEnabled() bool {
	on, _ := parseSwitch(c.LogSQL)
	return on
}

// parseSwitch reads a kingshard on/off value. The empty string is off.
func parseSwitch(s string) (on, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "true", "yes":
		return true, true
	case "off", "false", "no", "":
		return false, true
	}
	return false, false
}

// AllowList returns allow_ips parsed: a single address becomes a /32 or /128
// prefix, and a CIDR has its host bits cleared. It returns nil, meaning allow
// everyone, when allow_ips lists nothing. Entries Validate rejects are
// skipped. Callers should Unmap IPv4-mapped client addresses before matching.
func (c *Config) AllowList() []netip.Prefix {
	var out []netip.Prefix
	for _, e := range splitList(c.AllowIPs) {
		if p, err := parseAllowEntry(e); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func parseAllowEntry(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP or CIDR", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP or CIDR", s)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: zoned IPv6 addresses are not supported", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// splitList splits a kingshard comma-separated value, trimming blanks and
// dropping empty entries as kingshard does.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Node returns the node called name, or nil if there is none.
func (c *Config) Node(name string) *Node {
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			return &c.Nodes[i]
		}
	}
	return nil
}

// SchemaFor returns the schema of user, or nil if there is none.
func (c *Config) SchemaFor(user string) *Schema {
	for i := range c.Schemas {
		if c.Schemas[i].User == user {
			return &c.Schemas[i]
		}
	}
	return nil
}

// Slaves returns the parsed slave list. Entries Validate rejects are skipped.
func (n *Node) Slaves() []Replica {
	var out []Replica
	for _, e := range splitList(n.Slave) {
		if r, err := parseReplica(e); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// parseReplica parses one slave entry, host:port with an optional @weight.
func parseReplica(s string) (Replica, error) {
	addr, w, hasWeight := strings.Cut(s, "@")
	r := Replica{Addr: addr, Weight: 1}
	if err := checkHostPort(addr, false); err != nil {
		return r, err
	}
	if hasWeight {
		n, err := strconv.Atoi(w)
		if err != nil || !allDigits(w) || n < 1 {
			return r, fmt.Errorf("weight %q of %q is not a positive integer", w, s)
		}
		r.Weight = n
	}
	return r, nil
}

// checkHostPort checks a host:port address. Listen addresses may leave the
// host empty (all interfaces) and use port 0 (any free port, for tests);
// backend addresses need both.
// CheckBackendAddr checks a backend server address (a master or a
// replica) as the configuration does.
func CheckBackendAddr(s string) error { return checkHostPort(s, false) }

func checkHostPort(s string, listen bool) error {
	host, port, err := splitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" && !listen {
		return fmt.Errorf("%q has no host", s)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil && !validHostname(host) {
			return fmt.Errorf("%q: %q is not a valid host name or IP", s, host)
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || !allDigits(port) {
		return fmt.Errorf("%q: port %q is not a number", s, port)
	}
	lo := 1
	if listen {
		lo = 0
	}
	if n < lo || n > 65535 {
		return fmt.Errorf("%q: port %d is out of range %d-65535", s, n, lo)
	}
	return nil
}

func splitHostPort(s string) (host, port string, err error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", fmt.Errorf("%q is not host:port", s)
	}
	host, port = s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.ContainsAny(host, ":[]") {
		return "", "", fmt.Errorf("%q is not host:port (write IPv6 hosts as [addr]:port)", s)
	}
	return host, port, nil
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$`)

func validHostname(h string) bool {
	return len(h) <= 253 && hostnameRE.MatchString(h)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
