// Command proxy runs shardgate: a MySQL sharding proxy configured by a
// kingshard-format ks.yaml.
//
// This file only wires things together: flags, configuration, loggers,
// listeners and signals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/fleet"
	"github.com/shardgate/shardgate/internal/buildinfo"
	"github.com/shardgate/shardgate/proxy/metrics"
	"github.com/shardgate/shardgate/proxy/server"
	"github.com/shardgate/shardgate/topo"
)

func main() {
	cfgPath := flag.String("config", "etc/ks.yaml", "path of the ks.yaml configuration (one proxy; ignored with -etcd)")
	logLevel := flag.String("log-level", "", "log level (debug, info, warn, error); overrides log_level")
	var f flags
	flag.StringVar(&f.etcd, "etcd", "", "comma-separated etcd endpoints: run as one proxy of a fleet, from the topology in etcd (shardgate topo load)")
	flag.StringVar(&f.cluster, "cluster", "/shardgate/default", "the fleet's key prefix in etcd (with -etcd)")
	flag.StringVar(&f.addr, "addr", "", "client listener; overrides addr")
	flag.StringVar(&f.webAddr, "web-addr", "", "admin HTTP listener; overrides web_addr")
	flag.StringVar(&f.metricsAddr, "metrics-addr", "", "metrics listener; overrides prometheus_addr")
	flag.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file; overrides tls_cert")
	flag.StringVar(&f.tlsKey, "tls-key", "", "TLS key file; overrides tls_key")
	flag.StringVar(&f.instance, "xa-instance", "", "this proxy's XA instance name; overrides xa.instance (in a fleet: its member name)")
	showVersion := flag.Bool("version", false, "print the version and the commit the binary was built from, and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(buildinfo.String("proxy"))
		return
	}
	f.logLevel = *logLevel
	if err := run(*cfgPath, f); err != nil {
		fmt.Fprintln(os.Stderr, "shardgate:", err)
		os.Exit(1)
	}
}

// flags are the command line's settings: where the topology comes from,
// and what is this proxy's own over the file's or the fleet's (applied to
// every version, at each reload too).
type flags struct {
	etcd, cluster                       string
	addr, webAddr, metricsAddr          string
	tlsCert, tlsKey, instance, logLevel string
}

// overlay puts the command line's settings over cfg's.
func (f flags) overlay(cfg *config.Config) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Addr, f.addr)
	set(&cfg.WebAddr, f.webAddr)
	set(&cfg.PrometheusAddr, f.metricsAddr)
	set(&cfg.TLSCert, f.tlsCert)
	set(&cfg.TLSKey, f.tlsKey)
	set(&cfg.XA.Instance, f.instance)
	set(&cfg.LogLevel, f.logLevel)
}

func run(cfgPath string, f flags) error {
	var (
		cfg   *config.Config
		agent *fleet.Agent
		err   error
	)
	if f.etcd != "" {
		if cfg, agent, err = joinFleet(f); err != nil {
			return err
		}
		defer agent.Close() // on an error before the shutdown; a no-op after it
	} else if cfg, err = config.Load(cfgPath); err != nil {
		return err
	} else {
		f.overlay(cfg)
	}
	log, err := newLogger(cfg.LogPath, "shardgate.log", cfg.LogLevel)
	if err != nil {
		return err
	}
	defer log.Sync()
	var sqlLog *zap.Logger
	if cfg.LogSQLEnabled() {
		if sqlLog, err = newLogger(cfg.LogPath, "sql.log", "info"); err != nil {
			return err
		}
		defer sqlLog.Sync()
	}

	opts := server.Options{Log: log, SQLLog: sqlLog, ConfigPath: cfgPath, Overlay: f.overlay}
	if agent != nil {
		// The topology is etcd's: POST /admin/reload has no file to read.
		opts.ConfigPath = ""
		opts.Fleet = &server.FleetOptions{Status: func() *metrics.FleetStats { return fleetStats(agent) }, Cutover: agent.Cutover}
		// A cutover's rule goes into the topology too: topo get, a proxy
		// started later and shardgate plan see it.
		opts.PublishRule = func(ctx context.Context, db, table string, rule config.ShardRule) error {
			_, err := agent.PublishRule(ctx, db, table, rule)
			return err
		}
	}
	if fp := os.Getenv("SHARDGATE_FAILPOINT"); fp != "" {
		if opts.Knobs, err = server.FailpointKnobs(fp); err != nil {
			return err
		}
		log.Warn("failpoint armed: this process kills itself at that point (tests only)", zap.String("failpoint", fp))
	}
	srv, err := server.New(cfg, opts)
	if err != nil {
		return err
	}
	if agent != nil {
		agent.SetLogger(log.With(zap.String("fleet", f.cluster)))
		agent.Run(srv)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	if agent != nil {
		log.Info("shardgate listening", zap.String("addr", ln.Addr().String()), zap.String("fleet", f.cluster),
			zap.String("member", agent.ID()), zap.Int64("topology_version", agent.Applied()), zap.String("version", buildinfo.String("proxy")))
	} else {
		log.Info("shardgate listening", zap.String("addr", ln.Addr().String()), zap.String("config", cfgPath),
			zap.String("version", buildinfo.String("proxy")))
	}
	var sock net.Listener
	if cfg.Socket != "" {
		if sock, err = listenUnix(cfg.Socket); err != nil {
			ln.Close()
			srv.Shutdown(context.Background())
			return err
		}
		log.Info("shardgate listening", zap.String("socket", cfg.Socket))
	}

	var side []*http.Server
	for _, l := range []struct {
		addr string
		h    http.Handler
		what string
	}{{cfg.WebAddr, srv.AdminHandler(), "admin"}, {cfg.PrometheusAddr, srv.MetricsHandler(), "metrics"}} {
		if l.addr == "" {
			continue // empty address: disabled
		}
		hl, err := net.Listen("tcp", l.addr)
		if err != nil {
			ln.Close()
			srv.Shutdown(context.Background())
			return fmt.Errorf("%s listener: %w", l.what, err)
		}
		hs := &http.Server{Handler: l.h, ReadHeaderTimeout: 10 * time.Second}
		side = append(side, hs)
		log.Info(l.what+" listening", zap.String("addr", hl.Addr().String()))
		go func() {
			if err := hs.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(l.what+" listener failed", zap.Error(err))
			}
		}()
	}

	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if sock != nil {
		go func() { errc <- srv.Serve(sock) }()
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
wait:
	for {
		select {
		case sig := <-sigc:
			if sig == syscall.SIGHUP && agent != nil {
				log.Warn("SIGHUP ignored: in a fleet the topology is in etcd (shardgate topo load FILE changes it for every proxy)")
				continue
			}
			if sig == syscall.SIGHUP {
				// Reload: a file that does not validate changes nothing.
				if err := srv.ReloadFile(cfgPath); err != nil {
					log.Error("SIGHUP: reload refused", zap.Error(err))
				}
				continue
			}
			log.Info("shutting down", zap.String("signal", sig.String()), zap.Duration("timeout", cfg.ShutdownTimeout))
			break wait
		case err := <-errc:
			log.Error("listener failed", zap.Error(err))
			break wait
		}
	}
	signal.Stop(sigc)
	// shutdown_timeout is a promise: the process ends within it plus
	// server.ShutdownMargin, whatever the backends do. Shutdown keeps it
	// itself; the watchdog is for what no deadline reaches.
	watchdog := time.AfterFunc(cfg.ShutdownTimeout+server.ShutdownMargin, func() {
		log.Error("shutdown: still running past shutdown_timeout and its margin; exiting now",
			zap.Duration("timeout", cfg.ShutdownTimeout), zap.Duration("margin", server.ShutdownMargin))
		log.Sync()
		os.Exit(1)
	})
	defer watchdog.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	// The proxy leaves the fleet while its clients drain (bounded: a few
	// seconds when etcd does not answer).
	left := make(chan struct{})
	go func() {
		if agent != nil {
			agent.Close()
		}
		close(left)
	}()
	// The admin and metrics listeners drain alongside the clients, not
	// before them (a request that hangs would take the clients' time), and
	// are closed at the deadline.
	var sideWG sync.WaitGroup
	for _, hs := range side {
		sideWG.Go(func() {
			if hs.Shutdown(ctx) != nil {
				hs.Close()
			}
		})
	}
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown timed out; closed remaining connections", zap.Error(err))
	}
	sideWG.Wait()
	select {
	case <-left:
	case <-ctx.Done():
	}
	log.Info("stopped")
	return nil
}

// listenUnix listens on the Unix socket path, replacing a socket file no
// process listens on any more (left by a proxy that was killed); a socket
// some process still answers on is an error, as is any other file there.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: another process is listening on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	// Any local user may connect, as to MariaDB's socket; the login decides.
	if err := os.Chmod(path, 0o777); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return l, nil
}

// newLogger logs JSON to dir/file, or to stderr in console form when dir is
// empty.
func newLogger(dir, file, level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	zc.DisableStacktrace = true // panics log their own stack
	if dir == "" {
		zc.Encoding = "console"
		zc.EncoderConfig = zap.NewDevelopmentEncoderConfig()
		zc.OutputPaths = []string{"stderr"}
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		zc.OutputPaths = []string{filepath.Join(dir, file)}
	}
	zc.ErrorOutputPaths = []string{"stderr"}
	return zc.Build()
}

// joinFleet reaches etcd, joins the fleet and reads the topology the
// proxy starts with. While etcd does not answer it waits (no listener is
// open: clients are refused, never served from a stale file); SIGINT or
// SIGTERM ends the wait.
func joinFleet(f flags) (*config.Config, *fleet.Agent, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	boot, err := newLogger("", "", cmpOr(f.logLevel, "info"))
	if err != nil {
		return nil, nil, err
	}
	boot = boot.With(zap.String("fleet", f.cluster))
	var store *topo.Store
	for {
		store, err = topo.Open(ctx, topo.Options{Endpoints: strings.Split(f.etcd, ","), Prefix: f.cluster, Logger: boot})
		if err == nil {
			break
		}
		boot.Warn("etcd does not answer; waiting for it before serving", zap.String("etcd", f.etcd), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("stopped while waiting for etcd: %w", err)
		case <-time.After(time.Second):
		}
	}
	agent, err := fleet.Join(ctx, fleet.Options{Store: store, Log: boot,
		Member:  topo.Member{ID: f.instance, Addr: f.addr, AdminAddr: f.webAddr},
		Overlay: func(cfg *config.Config) { f.overlay(cfg) }}) // f.instance is set below
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	if f.instance == "" {
		f.instance = agent.ID() // the XA instance name is the member name
	}
	cfg, rev, err := agent.Initial(ctx)
	if err != nil {
		agent.Close()
		return nil, nil, err
	}
	boot.Info("topology read from etcd", zap.String("member", agent.ID()), zap.Int64("version", rev))
	return cfg, agent, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fleetStats converts the agent's status for /stats and /metrics.
func fleetStats(a *fleet.Agent) *metrics.FleetStats {
	st := a.Status()
	out := &metrics.FleetStats{ID: st.ID, EtcdReachable: st.Reachable, EtcdError: st.Error, Leader: st.Leader,
		Applied: st.Applied, Latest: st.Latest, ApplyError: st.ApplyError, Drift: st.Drift, Checked: st.Checked}
	for _, m := range st.Members {
		out.Members = append(out.Members, metrics.FleetMember{ID: m.ID, Addr: m.Addr, AdminAddr: m.AdminAddr,
			Applied: m.Applied, Started: m.Started, Error: m.Err})
	}
	return out
}
