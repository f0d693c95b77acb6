package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
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
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/xa"
)

// serverCaps are the capabilities the proxy offers clients.
const serverCaps = mysql.ClientLongPassword | mysql.ClientFoundRows | mysql.ClientLongFlag |
	mysql.ClientConnectWithDB | mysql.ClientNoSchema | mysql.ClientCompress | mysql.ClientODBC |
	mysql.ClientLocalFiles | mysql.ClientIgnoreSpace | mysql.ClientProtocol41 | mysql.ClientInteractive |
	mysql.ClientIgnoreSigpipe | mysql.ClientTransactions | mysql.ClientReserved | mysql.ClientSecureConnection |
	mysql.ClientMultiStatements | mysql.ClientMultiResults | mysql.ClientPSMultiResults | mysql.ClientPluginAuth |
	mysql.ClientConnectAttrs | mysql.ClientPluginAuthLenencClientData | mysql.ClientDeprecateEOF

// versionSuffix marks the proxy in the version string sent to clients.
const versionSuffix = "-shardgate"

// fallbackVersion is announced when no backend has been reached yet.
const fallbackVersion = "5.5.5-10.11.0-MariaDB"

// Server accepts MySQL clients and runs their statements on backend nodes.
type Server struct {
	// current is what a reload may change (Reload): the configuration
	// and what is derived from it alone. Read it through cfg and lv.
	current atomic.Pointer[live]
	log     *zap.Logger
	sqlLog  *zap.Logger // nil when log_sql is off
	cfgPath string      // what /admin/reload reads
	// hasReplicas is set when any node has read replicas (slave).
	hasReplicas atomic.Bool
	engine      *engine.Engine
	tables      *tables // definitions of the tables with rules, and their sequences
	nodes       map[string]*backend.Node
	order       []*backend.Node // nodes in config order
	// Data movement (move.go): the workflows, the gates of the tables they
	// move (moving is nil until one exists), the rules cutovers put in force.
	moves          *move.Manager
	gates          gates
	moving         atomic.Pointer[map[string]*gate]
	swapMu         sync.Mutex
	overrides      map[string]config.ShardRule
	heldStatements atomic.Uint64
	// xa coordinates two-phase commit when a schema uses transaction_mode
	// xa (nil otherwise).
	xa *xa.Coordinator
	// metrics: Prometheus, the digest and the status page's series.
	metrics     *metrics
	stopSampler chan struct{}
	stopOnce    sync.Once
	coll        byte // collation announced in the handshake
	// tls is the TLS configuration clients may upgrade to (nil without
	// tls_cert); caps are the capabilities offered, CLIENT_SSL with it.
	tls  *tls.Config
	caps uint32

	nextID atomic.Uint32
	// draining is set at Shutdown: /healthz answers 503; shutting once
	// the listeners close (after drain_delay): sessions end between
	// statements, outside transactions.
	draining atomic.Bool
	shutting atomic.Bool
	wg       sync.WaitGroup

	mu        sync.Mutex
	sessions  map[uint32]*conn
	listeners map[net.Listener]struct{}

	keyOnce sync.Once
	rsaKey  *rsa.PrivateKey
	pubPEM  []byte
	keyErr  error

	sha2Mu    sync.Mutex
	sha2Cache map[string]string // user -> password that passed full authentication

	// Counters for operators.
	connsTotal, queries, errorsSent, rejected atomic.Uint64
	acceptErrors                              atomic.Uint64 // Accept failures retried
	unauth                                    atomic.Int64  // connections that have not logged in yet
	unauthRejected                            atomic.Uint64 // refused past max_unauthenticated_connections
	packetsTooLarge                           atomic.Uint64 // client packets over the pre-login limit or max_allowed_packet
	longDataTooLarge                          atomic.Uint64 // executions refused for long data over max_allowed_packet
	writeTimeouts                             atomic.Uint64 // clients disconnected by client_write_timeout
	panics                                    atomic.Uint64 // sessions ended by a panic (a bug)
	idleTxnClosed                             atomic.Uint64 // clients closed by idle_in_transaction_timeout
}

// ReloadFile reads the configuration file at path and applies it (Reload).
func (s *Server) ReloadFile(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return fmt.Errorf("reload refused, nothing changed: %w", err)
	}
	return s.Reload(cfg)
}

// Options carries the server's collaborators.
type Options struct {
	Log    *zap.Logger // required
	SQLLog *zap.Logger // SQL log; nil disables it
	// ConfigPath is the file POST /admin/reload reads; "" refuses it.
	ConfigPath string
}

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
	s := &Server{
		tls:       tlsCfg,
		caps:      caps,
		log:       o.Log,
		sqlLog:    o.SQLLog,
		cfgPath:   o.ConfigPath,
		nodes:     make(map[string]*backend.Node, len(cfg.Nodes)),
		coll:      coll,
		sessions:  make(map[uint32]*conn),
		listeners: make(map[net.Listener]struct{}),
		sha2Cache: make(map[string]string),
	}
	s.current.Store(lv)
	var names []string
	for _, nc := range cfg.Nodes {
		names = append(names, nc.Name)
	}
	s.metrics = newMetrics(s, cfg.DigestSize, names)
	s.stopSampler = make(chan struct{})
	go s.sampler(s.stopSampler)
	for _, nc := range cfg.Nodes {
		n := backend.NewNode(nc, cfg.Backend, s.healthChanged)
		s.nodes[nc.Name] = n
		s.order = append(s.order, n)
		if len(n.Replicas()) > 0 {
			s.hasReplicas.Store(true)
		}
	}
	s.engine = engine.New(s.nodes, cfg.MergeMemoryLimit, cfg.MergeMemoryTotal)
	s.engine.SetFallbackLimits(cfg.FallbackMaxRows, cfg.FallbackMaxBytes, cfg.FallbackMaxTime)
	var wg sync.WaitGroup
	for _, n := range s.order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Start()
			if !n.Up() {
				s.log.Warn("backend node is down at start-up", zap.String("node", n.Name), zap.String("addr", n.Addr()))
			}
		}()
	}
	wg.Wait()
	s.tables = newTables(s)
	if cfg.UsesXA() {
		s.startXA(cfg)
	}
	s.startMoves()
	// Read in the background: a statement that needs a definition not
	// read yet reads it itself (NeedSchemaError).
	s.tables.start()
	return s, nil
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
		Nodes: func() []*backend.Node { return s.order }, Name: name,
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
	for _, n := range s.order {
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

// Shutdown stops accepting, closes idle sessions, waits for running
// statements to finish until ctx is done, then closes every remaining
// connection and the backend nodes.
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
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var err error
wait:
	for {
		select {
		case <-done:
			break wait
		case <-t.C:
			s.closeIdle()
		case <-ctx.Done():
			err = ctx.Err()
			s.mu.Lock()
			for _, ss := range s.sessions {
				ss.nc.Close()
				// A statement blocked on a backend would keep its session
				// alive past the deadline.
				if bc := ss.running.Load(); bc != nil {
					bc.Abort()
				}
				if many := ss.runningMany.Load(); many != nil {
					for _, bc := range *many {
						bc.Abort()
					}
				}
			}
			s.mu.Unlock()
			// Sessions may be waiting on a backend in commands of the
			// proxy's own (COM_CHANGE_USER when they end, a COMMIT).
			for _, n := range s.order {
				n.AbortBusy()
			}
			<-done
			break wait
		}
	}
	if s.moves != nil {
		s.moves.Close()
	}
	if s.xa != nil {
		s.xa.Close()
	}
	s.stopOnce.Do(func() { close(s.stopSampler) })
	s.tables.close()
	for _, n := range s.order {
		n.Close()
	}
	return err
}

// closeIdle wakes sessions blocked waiting for a command so they exit.
// renewPools replaces every node's pooled connections (after SET GLOBAL).
func (s *Server) renewPools() {
	for _, n := range s.order {
		n.Renew()
	}
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		// A session inside a transaction may still commit it.
		if ss.idle.Load() && !ss.inTxn.Load() {
			ss.nc.SetReadDeadline(time.Unix(1, 0))
		}
	}
}

func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= s.cfg().MaxConnections {
		return false
	}
	s.sessions[c.id] = c
	return true
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	delete(s.sessions, c.id)
	s.mu.Unlock()
}

// sessionHolding returns the session of user (any user when "") that
// holds the backend connection whose thread id is id, if any.
func (s *Server) sessionHolding(id uint64, user string) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.sessions {
		if (user == "" || c.act.owner() == user) && c.holds(id) {
			return c
		}
	}
	return nil
}

func (s *Server) session(id uint32) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// rsaKeys returns the key pair used by caching_sha2_password full
// authentication, generating it on first use.
func (s *Server) rsaKeys() (*rsa.PrivateKey, []byte, error) {
	s.keyOnce.Do(func() {
		s.rsaKey, s.keyErr = rsa.GenerateKey(rand.Reader, 2048)
		if s.keyErr == nil {
			s.pubPEM, s.keyErr = mysql.MarshalPublicKey(s.rsaKey)
		}
	})
	return s.rsaKey, s.pubPEM, s.keyErr
}

func (s *Server) sha2Cached(user, password string) bool {
	s.sha2Mu.Lock()
	defer s.sha2Mu.Unlock()
	pw, ok := s.sha2Cache[user]
	return ok && pw == password
}

func (s *Server) sha2Remember(user, password string) {
	s.sha2Mu.Lock()
	s.sha2Cache[user] = password
	s.sha2Mu.Unlock()
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
