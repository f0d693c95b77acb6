package server

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/deadlock"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/admin"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/xa"
)

// serverCaps are the capabilities the proxy offers clients.
const serverCaps = mysql.ClientLongPassword | mysql.ClientFoundRows | mysql.ClientLongFlag |
	mysql.ClientConnectWithDB | mysql.ClientNoSchema | mysql.ClientCompress | mysql.ClientODBC |
	mysql.ClientLocalFiles | mysql.ClientIgnoreSpace | mysql.ClientProtocol41 | mysql.ClientInteractive |
	mysql.ClientIgnoreSigpipe | mysql.ClientTransactions | mysql.ClientReserved | mysql.ClientSecureConnection |
	mysql.ClientMultiStatements | mysql.ClientMultiResults | mysql.ClientPSMultiResults | mysql.ClientPluginAuth |
	mysql.ClientConnectAttrs | mysql.ClientPluginAuthLenencClientData | mysql.ClientDeprecateEOF |
	mysql.ClientSessionTrack // the client's own trackers: proxy/session/track.go

// versionSuffix marks the proxy in the version string sent to clients.
const versionSuffix = "-shardgate"

// fallbackVersion is announced when no backend has been reached yet.
const fallbackVersion = "5.5.5-10.11.0-MariaDB"

// Server accepts MySQL clients and runs their statements on backend nodes.
//
// Its responsibilities beyond the listener each have a type of their own,
// embedded so that sessions reach them as s.cfg(), s.register(c),
// s.kill(c, k) or s.moving: liveConfig (the configuration in force and
// reload, reload.go), registry (the client sessions, SHOW PROCESSLIST and
// KILL: registry.go, processlist.go), gates (statements on tables that
// workflows move, move.go), counters (metrics.go) and sha2Keys
// (caching_sha2_password, keys.go). The operator's side is proxy/admin's
// (console) and proxy/metrics' (metrics).
type Server struct {
	knobs     *session.Knobs // test hooks of every session (Options.Knobs)
	fleet     *FleetOptions  // nil from one file (Options.Fleet)
	publisher *publisher     // nil from one file (Options.PublishRule)
	liveConfig
	registry
	gates
	counters
	handshakes
	sha2Keys
	trackDefaults // track.go

	log    *zap.Logger
	sqlLog *zap.Logger // nil when log_sql is off
	engine *engine.Engine
	tables *tables // definitions of the tables with rules, and their sequences
	// nodes are the nodes at start; a reload may add some: look nodes up
	// with node, nodeMap and allNodes (nodes.go), which see them.
	nodes map[string]*backend.Node
	// flows runs data movement (move.go); nil without the sidecar's node.
	flows *workflows
	// streams runs the Kafka sinks of streams: (streams.go).
	streams *streamRunner
	// rcache is the result cache (rcache.go), nil without cache: in ks.yaml.
	rcache     *resultCache
	staleState // stale rules met at a fence (stale.go)
	// xa coordinates two-phase commit when a schema uses transaction_mode
	// xa (nil otherwise).
	xa *xa.Coordinator
	// deadlock finds deadlocks across nodes (nil when
	// deadlock_detect_after is 0).
	deadlock *deadlock.Detector
	// metrics: Prometheus, the digest and the status page's series;
	// console: admin HTTP and admin SQL.
	metrics stmtMetrics
	console *admin.Console
	coll    byte // collation announced in the handshake
	// tls is the TLS configuration clients may upgrade to (nil without
	// tls_cert); caps are the capabilities offered, CLIENT_SSL with it.
	tls  *tls.Config
	caps uint32
	// packets is packet_memory_total: the memory client packets being
	// received hold together (conn.go).
	packets *mysql.Budget

	nextID atomic.Uint32
	// draining is set at Shutdown: /healthz answers 503; shutting once
	// the listeners close (after drain_delay): sessions end between
	// statements, outside transactions.
	draining atomic.Bool
	shutting atomic.Bool
	wg       sync.WaitGroup

	mu        sync.Mutex // listeners, and shutting's change
	listeners map[net.Listener]struct{}
}

// Options carries the server's collaborators.
type Options struct {
	Log    *zap.Logger // required
	SQLLog *zap.Logger // SQL log; nil disables it
	// ConfigPath is the file POST /admin/reload reads; "" refuses it.
	ConfigPath string
	// Knobs are test hooks every session of the server calls (nil: none;
	// FailpointKnobs for the process tests).
	Knobs *session.Knobs
	// Overlay, when set, changes each configuration ReloadFile reads: the
	// command line's settings over the file's (cmd/proxy).
	Overlay func(*config.Config)
	// Fleet, when set, makes the proxy one of a fleet (fleet.go): every
	// node follows the master the fleet records, never its own checks.
	Fleet *FleetOptions
	// PublishRule, when set, writes the rule a cutover or a rollback put
	// in force for db.table into the fleet's topology (publish.go: in the
	// background, again until it is stored; the swap never waits for it).
	PublishRule func(ctx context.Context, db, table string, rule config.ShardRule) error
}

// Knobs are the test hooks every session of the server calls.
func (s *Server) Knobs() *session.Knobs { return s.knobs }

// New builds a server and its backend nodes from cfg and checks each node
// once. Nodes that are down do not make New fail.
func New(cfg *config.Config, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	lv, err := newLive(cfg)
	if err != nil {
		return nil, err
	}
	coll, ok := mysql.DefaultCollation(cfg.ProxyCharset)
	if !ok {
		coll = 45
	}
	caps := serverCaps
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		store, err := newCertStore(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, err
		}
		tlsCfg, caps = store.tlsConfig(), caps|mysql.ClientSSL
	}
	if o.Knobs == nil {
		o.Knobs = &session.Knobs{}
	}
	s := &Server{
		knobs:     o.Knobs,
		fleet:     o.Fleet,
		publisher: newPublisher(o.PublishRule, o.Log),
		tls:       tlsCfg,
		caps:      caps,
		log:       o.Log,
		sqlLog:    o.SQLLog,
		nodes:     make(map[string]*backend.Node, len(cfg.Nodes)),
		coll:      coll,
		listeners: make(map[net.Listener]struct{}),
		packets:   mysql.NewBudget(cfg.PacketMemoryTotal),
	}
	s.current.Store(lv)
	s.liveConfig.logger = s.log
	s.liveConfig.overlay = o.Overlay
	s.registry.conf = &s.liveConfig
	s.gates.conf = &s.liveConfig
	if o.Fleet != nil {
		s.gates.fleet = o.Fleet.Cutover
	}
	var names []string
	for _, nc := range cfg.Nodes {
		names = append(names, nc.Name)
	}
	s.metrics = stmtMetrics{metrics.New(metrics.Options{DigestSize: cfg.DigestSize, Nodes: names, Collector: collector(s)})}
	s.metrics.Start()
	ns := newNodeSet(s.startNodes(cfg.Nodes, cfg.Backend))
	maps.Copy(s.nodes, ns.byName)
	s.nodeSet.Store(ns)
	for _, n := range ns.order {
		if len(n.Replicas()) > 0 {
			s.hasReplicas.Store(true)
		}
	}
	s.liveConfig.startNodes = s.startNodes
	s.liveConfig.nodesAdded = func(added []*backend.Node) { s.metrics.AddNodes(nodeNames(added)...) }
	s.engine = engine.New(s.nodes, cfg.MergeMemoryLimit, cfg.MergeMemoryTotal)
	s.engine.SetNodeSource(s.nodeMap)
	s.engine.SetFallbackLimits(cfg.FallbackMaxRows, cfg.FallbackMaxBytes, cfg.FallbackMaxTime)
	s.tables = newTables(s)
	s.engine.SetMembers(s.tables.members)
	s.liveConfig.rulesAdded = s.tables.addRules
	s.startBackground(cfg, o)
	// Read in the background: a statement that needs a definition not
	// read yet reads it itself (NeedSchemaError).
	s.tables.start()
	return s, nil
}

// startNodes builds the nodes of ncs and starts them (their health
// checks and replicas) at once; nodes that are down are started too, and
// checked again every health interval. At start (New) and for the nodes
// a reload adds.
func (s *Server) startNodes(ncs []config.Node, opts config.BackendOptions) []*backend.Node {
	nodes := make([]*backend.Node, len(ncs))
	var wg sync.WaitGroup
	for i, nc := range ncs {
		nodes[i] = backend.NewNode(nc, opts, s.healthChanged)
		if s.fleet != nil {
			nodes[i].FollowFleet()
		}
		wg.Go(func() {
			n := nodes[i]
			n.Start()
			if !n.Up() {
				s.log.Warn("backend node is down at start-up", zap.String("node", n.Name), zap.String("addr", n.Addr()))
			}
		})
	}
	wg.Wait()
	return nodes
}

// XA returns the two-phase commit coordinator (nil when no schema uses
// transaction_mode xa).
func (s *Server) XA() *xa.Coordinator { return s.xa }

// startXA registers this proxy in the sidecar's XA decision log and
// finishes the branches an earlier life of it left prepared, before any
// client is served.
func (s *Server) startXA(cfg *config.Config) {
	name := cfg.XA.Instance
	if name == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(cfg.Addr)
		name = host + ":" + port
	}
	s.xa = xa.New(xa.Options{Sidecar: s.nodes[cfg.Sidecar.Node], DB: cfg.Sidecar.DB,
		Nodes: s.allNodes, Name: name,
		Interval: cfg.XA.RecoveryInterval, Lease: cfg.XA.Lease, Log: s.log})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.xa.Start(ctx)
}

func (s *Server) healthChanged(node string, up bool, err error) {
	if up && err != nil {
		s.log.Warn("backend master moved", zap.String("node", node), zap.Error(err))
		return
	}
	if up {
		s.log.Info("backend node is up", zap.String("node", node))
		return
	}
	s.log.Error("backend node is down", zap.String("node", node), zap.Error(err))
}

// version returns the server version string announced to clients: the
// configured one, or the backend's with the proxy's suffix.
func (s *Server) version() string {
	if s.cfg().ServerVersion != "" {
		return s.cfg().ServerVersion
	}
	for _, n := range s.allNodes() {
		if v := n.Version(); v != "" {
			return v + versionSuffix
		}
	}
	return fallbackVersion + versionSuffix
}

// Serve accepts connections on l until Shutdown or a listener error. It
// always returns a non-nil error; after Shutdown it is ErrServerClosed.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.shutting.Load() {
				return ErrServerClosed
			}
			if retryableAccept(err) {
				// Out of descriptors (EMFILE, ENFILE) or memory, or a
				// connection aborted before it was accepted: the proxy
				// keeps serving the clients it has and tries again, as
				// net/http does.
				s.acceptErrors.Add(1)
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		// Shutdown sets shutting under mu before it waits for the
		// sessions: no session is added once it waits.
		s.mu.Lock()
		if s.shutting.Load() {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(nc)
	}
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// ShutdownMargin is how long Shutdown may take past its context's
// deadline: the time to close what is left and let the goroutines that
// held it return. Past the deadline nothing waits for a server (a frozen
// one does not answer), so the margin is spent on this process alone.
const ShutdownMargin = time.Second

// abortWait is how long Shutdown waits, past the deadline, for the
// sessions and background work it aborted to return; what still runs then
// is left to the process's exit. It is half of ShutdownMargin: the other
// half is for the caller (closing its listeners, flushing its logs).
const abortWait = ShutdownMargin / 2

// Shutdown stops accepting, closes idle sessions, waits for running
// statements to finish until ctx is done, then stops the background work
// (workflows, XA, the sidecar, table definitions, health checks) and the
// backend nodes. It returns nil when everything ended in time.
//
// When ctx is done first, Shutdown closes every client connection and
// every backend connection at once, as sockets (no COM_QUIT, no answer
// awaited), and makes the nodes refuse new connections and logins
// (backend.Node.Halt); it returns ctx.Err() within ShutdownMargin of the
// deadline, whether or not the servers answer.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	if d := s.cfg().DrainDelay; d > 0 {
		s.log.Info("draining: /healthz answers 503, clients still accepted", zap.Duration("drain_delay", d))
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	s.shutting.Store(true)
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	s.closeIdle()
	sessions := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(sessions)
	}()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
wait:
	for {
		select {
		case <-sessions:
			break wait
		case <-t.C:
			s.closeIdle()
		case <-ctx.Done():
			break wait
		}
	}
	// The background work stops after the sessions: a session's last
	// statement may still need the sidecar or an XA decision.
	stopped := make(chan struct{})
	go func() {
		<-sessions
		s.stopBackground()
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-stopped:
		return nil
	default:
	}
	// Past the deadline: whatever waits on a backend (a statement, a
	// session's reset when it ends, a KILL of a client that left, a
	// health check, an XA renewal, a sidecar statement, a workflow's
	// copy) fails now, and nothing new reaches a server.
	for _, n := range s.allNodes() {
		n.Halt()
	}
	s.closeAll()
	select {
	case <-stopped:
	case <-time.After(abortWait):
		s.log.Error("shutdown: sessions or background work still running past the deadline; the process exit ends them",
			zap.Int("sessions", s.count()), zap.Duration("waited", abortWait))
	}
	return ctx.Err()
}

// startBackground starts the work the proxy does on its own account: the
// deadlock detector, XA recovery, workflows, Kafka sinks and the console.
func (s *Server) startBackground(cfg *config.Config, o Options) {
	s.deadlock = startDetector(cfg, s.log) // deadlock.go
	if cfg.UsesXA() {
		s.startXA(cfg)
	}
	s.flows = startWorkflows(s)
	s.staleState.live, s.staleState.moves, s.staleState.log = &s.liveConfig, s.flows, s.log
	s.streams = newStreamRunner(s)
	s.liveConfig.reloaded = s.streams.changed
	s.rcache = startResultCache(s, cfg)
	s.console = newConsole(s, o.ConfigPath)
}

// stopBackground stops the background work and the nodes, once the
// sessions have ended: a session's last statement may still need the
// sidecar or an XA decision.
func (s *Server) stopBackground() {
	if s.flows != nil {
		s.flows.m.Close()
	}
	s.streams.close()   // nil-safe
	s.rcache.close()    // nil-safe
	s.publisher.close() // nil-safe
	if s.xa != nil {
		s.xa.Close()
	}
	s.deadlock.Close() // nil-safe
	s.metrics.Close()
	s.tables.close()
	for _, n := range s.allNodes() {
		n.Close()
	}
}

// renewPools replaces every node's pooled connections (after SET GLOBAL).
func (s *Server) renewPools() {
	for _, n := range s.allNodes() {
		n.Renew()
	}
	s.trackDefaults.forget()
}

// Stats returns a snapshot of sessions, counters and pools.
func (s *Server) Stats() Stats {
	st := s.counters.stats(s.count())
	st.PlanCacheHits, st.PlanCacheMisses, st.PlanCacheShapes = s.rt().CacheStats()
	st.HeldStatements = s.heldStatements.Load()
	st.Buffer = s.gates.bufferStats()
	st.PacketMemoryInUse, st.PacketMemoryRefused = s.packets.InUse(), s.packets.Refused()
	st.SchemaDrift, st.CatalogVersion = s.tables.driftReport(), s.tables.catalog.Version()
	st.Nodes = metrics.Nodes(s.allNodes())
	st.Fleet = s.fleetStats()
	st.FenceRetries = s.staleRetries.Load()
	st.TopologyPublishFailures, st.TopologyPublishPending = s.publisher.stats()
	st.Streams = s.streams.stats()
	if s.rcache != nil {
		cs := s.rcache.Stats()
		st.Cache = &cs
	}
	return st
}

// allowed reports whether a client address passes allow_ips.
func (s *Server) allowed(addr net.Addr) bool {
	allow := s.lv().allow
	if len(allow) == 0 {
		return true
	}
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return true
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// retryableAccept reports whether an Accept error is one to wait out:
// a timeout, or a lack of resources that closing connections cures.
func retryableAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
