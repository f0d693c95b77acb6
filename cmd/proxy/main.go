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
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/proxy/server"
)

func main() {
	cfgPath := flag.String("config", "etc/ks.yaml", "path of the ks.yaml configuration")
	logLevel := flag.String("log-level", "", "log level (debug, info, warn, error); overrides log_level")
	flag.Parse()
	if err := run(*cfgPath, *logLevel); err != nil {
		fmt.Fprintln(os.Stderr, "shardgate:", err)
		os.Exit(1)
	}
}

func run(cfgPath, logLevel string) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	if logLevel != "" {
		cfg.LogLevel = logLevel
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

	opts := server.Options{Log: log, SQLLog: sqlLog, ConfigPath: cfgPath}
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
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	log.Info("shardgate listening", zap.String("addr", ln.Addr().String()), zap.String("config", cfgPath))
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
