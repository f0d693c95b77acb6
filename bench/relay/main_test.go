package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer accepts connections on a free loopback port and echoes each one
// until the client half-closes, then closes its side. It stops when the test
// ends and waits for its goroutines.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

// startRelay serves a Relay to target on a free port and shuts it down when
// the test ends, checking that Serve returned ErrRelayClosed.
func startRelay(t *testing.T, target string) (*Relay, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{Target: target, NoDelay: true, DialTimeout: time.Second}
	served := make(chan error, 1)
	go func() { served <- r.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrRelayClosed) {
			t.Errorf("Serve returned %v, want ErrRelayClosed", err)
		}
	})
	return r, l.Addr().String()
}

func TestRelayEchoAndHalfClose(t *testing.T) {
	_, addr := startRelay(t, echoServer(t))

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))

	// Ping-pong a few request/response pairs, as a database client would.
	for i, msg := range []string{"ping", "select 1", string(bytes.Repeat([]byte("x"), 1<<20))} {
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if string(got) != msg {
			t.Fatalf("round trip %d: got %d bytes that differ from the %d sent", i, len(got), len(msg))
		}
	}

	// Half-close: the bytes written before CloseWrite must still come back,
	// followed by EOF once the echo server sees end-of-stream and closes.
	if _, err := io.WriteString(c, "last words"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read after half-close: %v", err)
	}
	if string(rest) != "last words" {
		t.Fatalf("after half-close got %q, want %q", rest, "last words")
	}
}

func TestRelayManyConcurrentConnections(t *testing.T) {
	_, addr := startRelay(t, echoServer(t))

	const clients = 32
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			msg := bytes.Repeat([]byte{byte(i)}, 4096)
			for range 50 {
				if _, err := c.Write(msg); err != nil {
					errs <- err
					return
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, msg) {
					errs <- errors.New("payload mixed up between connections")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRelayTargetDownClosesClient(t *testing.T) {
	// Reserve a port and free it so nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	_, addr := startRelay(t, dead)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a relay whose target is down, want the connection closed", n)
	}
}

func TestRelayShutdownClosesIdleConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{Target: echoServer(t), NoDelay: true}
	served := make(chan error, 1)
	go func() { served <- r.Serve(l) }()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// One round trip proves the pair is established before shutting down.
	if _, err := io.WriteString(c, "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with an idle open connection returned %v, want DeadlineExceeded", err)
	}
	if err := <-served; !errors.Is(err, ErrRelayClosed) {
		t.Fatalf("Serve returned %v, want ErrRelayClosed", err)
	}
	if _, err := io.ReadAll(c); err != nil {
		t.Logf("client saw %v after forced shutdown (a reset is fine)", err)
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Fatal("relay still accepts after Shutdown")
	}
}
