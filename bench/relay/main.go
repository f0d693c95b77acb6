// Command relay is a plain TCP relay used as the B1 rung of the benchmark
// ladder (see /work/shared/BENCH.md): sysbench -> relay -> MariaDB.
//
// It measures the cost of any extra hop on the same machine, so it is
// deliberately naive: for each accepted connection it dials the target and
// runs io.Copy in both directions, one goroutine each. There is no buffering,
// batching or protocol awareness beyond what io.Copy does (on Linux that is
// splice(2) between the two TCP sockets). A proxy that parses and routes every
// statement should aim to keep at least the throughput this program keeps.
//
// Usage:
//
//	relay -listen 127.0.0.1:9695 -target 127.0.0.1:3307 [-nodelay=true]
//
// SIGINT or SIGTERM stops accepting, gives open connections a grace period to
// finish, then closes them.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9695", "address to accept client connections on")
	target := flag.String("target", "127.0.0.1:3307", "address to relay each connection to")
	nodelay := flag.Bool("nodelay", true, "set TCP_NODELAY on both sockets of every relayed connection")
	grace := flag.Duration("grace", 5*time.Second, "how long shutdown waits for open connections before closing them")
	flag.Parse()

	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("relay: ")

	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	r := &Relay{Target: *target, NoDelay: *nodelay}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	serveErr := make(chan error, 1)
	go func() { serveErr <- r.Serve(l) }()
	log.Printf("listening on %s, relaying to %s (nodelay=%v)", l.Addr(), *target, *nodelay)

	select {
	case err := <-serveErr:
		log.Fatalf("serve: %v", err)
	case <-ctx.Done():
	}
	stop() // A second signal kills the process the default way.

	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := r.Shutdown(sctx); err != nil {
		log.Printf("shutdown: %v (open connections were closed)", err)
	}
	<-serveErr
}

// ErrRelayClosed is returned by Serve after Shutdown has been called.
var ErrRelayClosed = errors.New("relay: closed")

// Relay copies bytes between each accepted client connection and a fresh
// connection to Target. The zero value plus Target is ready to use.
//
// Serve and Shutdown may be called from different goroutines. Every goroutine
// the relay starts is owned by it and waited for by Shutdown.
type Relay struct {
	// Target is the host:port every accepted connection is relayed to.
	Target string
	// NoDelay sets TCP_NODELAY on both sockets (Go's default is already on;
	// the flag exists so that the benchmark can show the effect of turning it off).
	NoDelay bool
	// DialTimeout bounds the dial to Target; zero means 5 seconds.
	DialTimeout time.Duration

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // Both sides of every open relayed pair.
	closed    bool
	wg        sync.WaitGroup // One count per open client connection.
}

// Serve accepts connections on l until l fails or Shutdown is called, and
// relays each one on its own goroutine. It always returns a non-nil error;
// after Shutdown that error is ErrRelayClosed.
func (r *Relay) Serve(l net.Listener) error {
	if !r.trackListener(l, true) {
		l.Close()
		return ErrRelayClosed
	}
	defer r.trackListener(l, false)

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if r.isClosed() {
				return ErrRelayClosed
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				// Out of descriptors or an aborted handshake: back off as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !r.track(c, true) {
			c.Close()
			return ErrRelayClosed
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handle(c)
		}()
	}
}

// Shutdown stops accepting, waits for open connections to end on their own
// until ctx is done, and then closes whatever is still open and waits for the
// copy goroutines to return. It returns ctx.Err() if it had to force-close.
func (r *Relay) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	for l := range r.listeners {
		l.Close()
	}
	r.mu.Unlock()

	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	<-done
	return ctx.Err()
}

// handle relays one client connection until both directions have ended.
func (r *Relay) handle(client net.Conn) {
	defer r.track(client, false)
	defer client.Close()

	timeout := r.DialTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	server, err := net.DialTimeout("tcp", r.Target, timeout)
	if err != nil {
		log.Printf("dial %s for %s: %v", r.Target, client.RemoteAddr(), err)
		return
	}
	if !r.track(server, true) {
		server.Close()
		return
	}
	defer r.track(server, false)
	defer server.Close()

	r.setNoDelay(client)
	r.setNoDelay(server)

	// Each direction runs until its source reports EOF or an error. On a clean
	// EOF the destination gets a half-close so the peer sees end-of-stream and
	// the other direction can still drain; on an error both sockets are closed
	// so the other direction cannot block forever.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipe(server, client)
	}()
	pipe(client, server)
	wg.Wait()
}

// pipe copies src to dst and then ends dst's write side.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	src.Close()
}

func (r *Relay) setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(r.NoDelay); err != nil {
			log.Printf("set nodelay on %s: %v", c.LocalAddr(), err)
		}
	}
}

// track adds or removes c from the set Shutdown may force-close. Adding
// fails once the relay is closed.
func (r *Relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !add {
		delete(r.conns, c)
		return true
	}
	if r.closed {
		return false
	}
	if r.conns == nil {
		r.conns = make(map[net.Conn]struct{})
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) trackListener(l net.Listener, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !add {
		delete(r.listeners, l)
		return true
	}
	if r.closed {
		return false
	}
	if r.listeners == nil {
		r.listeners = make(map[net.Listener]struct{})
	}
	r.listeners[l] = struct{}{}
	return true
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}
