package etcdtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardgate/shardgate/internal/freeport"
)

// ErrNotInstalled is returned (wrapped) by New when no etcd binary is found.
var ErrNotInstalled = errors.New("etcdtest: etcd is not installed (install it with: scripts/deps.sh etcd, " +
	"or apt-get install -y etcd-server etcd-client)")

const (
	// readyTimeout bounds how long one etcd start may take until /health reports a leader.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a clean shutdown (SIGTERM) before the process is killed.
	stopTimeout = 10 * time.Second
	// portAttempts is how many pairs of free ports New tries when another process wins the race for one.
	portAttempts = 5
	// restartPortWait is how long Restart keeps retrying while the old ports are still taken.
	restartPortWait = 10 * time.Second
	// logTailLines is how much of etcd.log an error message quotes.
	logTailLines = 20
)

// errBind marks a start that failed because a port was taken.
var errBind = errors.New("port already in use")

// Server is one single-member etcd cluster. The exported fields are set by New and never change afterwards, so
// they can be read from any goroutine; Restart keeps the ports and the data directory.
type Server struct {
	// Dir holds everything of this server: the data directory and etcd.log.
	Dir string
	// DataDir is etcd's --data-dir.
	DataDir string
	// Log is the file etcd's standard output and error go to (appended across restarts).
	Log string
	// ClientURL is the client endpoint, "http://127.0.0.1:<port>".
	ClientURL string
	// PeerURL is the (unused, single-member) peer endpoint.
	PeerURL string

	bin   string // path of the etcd binary
	name  string // --name, random per New: tells this etcd from another that took its port
	token string // --initial-cluster-token, random per New

	mu     sync.Mutex // serialises start, Stop, Kill, Restart and Close
	proc   *process   // nil while the server is not running; guarded by mu
	closed bool       // Close was called; guarded by mu
}

// process is one run of etcd. done is closed by the goroutine that waits for the process, after err is set.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the result of cmd.Wait; read only after done is closed
}

// Start runs etcd in t.TempDir() and registers a cleanup that kills it. It calls t.Fatal, quoting the install
// command, if etcd is missing or does not start, and t.Skip under go test -short.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("etcdtest: -short: not starting etcd")
	}
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatalf("%v\n*** Fleet tests need a real etcd: run scripts/deps.sh etcd. Use go test -short to skip them.", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("etcdtest: %v", err)
		}
	})
	return s
}

// New runs etcd with its files under dir (created if needed) on free 127.0.0.1 ports and waits until it
// answers. The caller must Close it; Start does that for a test. If etcd is not installed the error wraps
// ErrNotInstalled.
func New(dir string) (*Server, error) {
	bin, err := findEtcd()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	s := &Server{
		Dir:     dir,
		DataDir: filepath.Join(dir, "data"),
		Log:     filepath.Join(dir, "etcd.log"),
		bin:     bin,
		name:    "etcdtest-" + hex.EncodeToString(tok[:4]),
		token:   "etcdtest-" + hex.EncodeToString(tok[:]),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		cport, err := freePort()
		if err != nil {
			return nil, err
		}
		pport, err := freePort()
		if err != nil {
			return nil, err
		}
		s.ClientURL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(cport))
		s.PeerURL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(pport))
		err = s.spawn()
		if err == nil {
			return s, nil
		}
		// A failed first start may leave a half-made data directory bound to the old peer URL.
		_ = os.RemoveAll(s.DataDir)
		if !errors.Is(err, errBind) || attempt == portAttempts {
			return nil, err
		}
	}
}

// Endpoints returns the client endpoints for clientv3.Config.Endpoints.
func (s *Server) Endpoints() []string { return []string{s.ClientURL} }

// Pid is the process id of etcd, 0 while it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Stop shuts etcd down with SIGTERM (SIGKILL after 10 s) and waits for the process to exit. The data directory
// and ports are kept for Restart. Stopping a stopped server is a no-op. It reports an error if etcd had died on
// its own before, so crashes do not go unnoticed.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked(syscall.SIGTERM)
}

// Kill ends etcd with SIGKILL, as a machine that loses power, and waits for the process to exit. The data
// directory and ports are kept for Restart.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked(syscall.SIGKILL)
}

// Pause stops etcd with SIGSTOP: its sockets stay open and nothing answers, as when a machine hangs or a
// network drops packets. Resume continues it.
func (s *Server) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// kill(2) returns before the process stops: wait until the kernel
	// says it is stopped (state T in /proc/PID/stat), so that nothing is
	// answered after Pause returns.
	s.mu.Lock()
	pid := s.proc.cmd.Process.Pid
	s.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil // not Linux, or gone: nothing better to wait for
		}
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'T' || stat[i+2] == 't') {
			return nil
		}
	}
	return fmt.Errorf("etcdtest: etcd on %s did not stop within 5 s of SIGSTOP", s.ClientURL)
}

// Resume continues an etcd stopped by Pause.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("etcdtest: etcd on %s is not running", s.ClientURL)
	}
	return s.proc.cmd.Process.Signal(sig)
}

// Restart starts etcd again with the same ports and data directory and waits until it answers. A running server
// is stopped with SIGTERM first.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("etcdtest: Restart after Close")
	}
	if err := s.stopLocked(syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(restartPortWait)
	for {
		err := s.spawn()
		if err == nil || !errors.Is(err, errBind) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close kills etcd for good; the directory stays (t.TempDir removes it for Start). It is safe to call more than
// once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	_ = p.cmd.Process.Kill()
	<-p.done
	return nil
}

func (s *Server) stopLocked(sig syscall.Signal) error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	select {
	case <-p.done:
		return fmt.Errorf("etcdtest: etcd on %s had exited on its own (%v)%s", s.ClientURL, p.err, s.logTail(0))
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused etcd handles SIGTERM only once continued
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("etcdtest: etcd on %s did not stop within %v after %v; killed it%s", s.ClientURL, stopTimeout, sig, s.logTail(0))
	}
	return nil
}

// spawn runs etcd and waits for it to answer. On failure the process is gone. Called with s.mu held.
func (s *Server) spawn() error {
	if s.proc != nil {
		return fmt.Errorf("etcdtest: etcd on %s is already running", s.ClientURL)
	}
	logOffset := fileSize(s.Log)
	name := s.name
	args := []string{
		"--name=" + name,
		"--data-dir=" + s.DataDir,
		"--listen-client-urls=" + s.ClientURL,
		"--advertise-client-urls=" + s.ClientURL,
		"--listen-peer-urls=" + s.PeerURL,
		"--initial-advertise-peer-urls=" + s.PeerURL,
		"--initial-cluster=" + name + "=" + s.PeerURL,
		"--initial-cluster-state=new", // ignored once the data directory exists
		"--initial-cluster-token=" + s.token,
		// One member: a short election timeout only shortens the wait for the first leader.
		"--heartbeat-interval=50",
		"--election-timeout=500",
		"--logger=zap",
		"--log-outputs=stderr",
		"--quota-backend-bytes=" + strconv.Itoa(256<<20),
	}
	logf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	// Not inherited: ETCD_* variables of the calling environment would change the flags above.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.Dir}
	err = cmd.Start()
	logf.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	// This goroutine ends when the process does; whoever ends the process (Stop, Kill, Close) waits on done.
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := s.waitReady(p, logOffset); err != nil {
		_ = cmd.Process.Kill()
		<-p.done
		return err
	}
	s.proc = p
	return nil
}

// waitReady polls /health until it reports a leader, the process exits, or readyTimeout passes. A healthy
// answer counts only from this server: while it was down another process (often another test's etcd) may have
// been given its port, and a test must not go on against that one.
func (s *Server) waitReady(p *process, logOffset int64) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	var last error
	for {
		select {
		case <-p.done:
			tail := s.logTail(logOffset)
			if strings.Contains(tail, "address already in use") {
				return fmt.Errorf("etcdtest: %s: %w%s", s.ClientURL, errBind, tail)
			}
			return fmt.Errorf("etcdtest: etcd exited during start (%v)%s", p.err, tail)
		default:
		}
		err := s.health(hc)
		if err == nil {
			if err = s.ours(hc); err != nil {
				return err
			}
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdtest: etcd on %s not ready within %v (%v)%s", s.ClientURL, readyTimeout, last, s.logTail(logOffset))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// health asks /health whether the etcd on the client port has a leader.
func (s *Server) health(hc *http.Client) error {
	resp, err := hc.Get(s.ClientURL + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"health":"true"`)) {
		return fmt.Errorf("/health: %s %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// ours checks, through the JSON gateway's member list, that the etcd answering on the client port is this
// server (its random --name); otherwise the port was taken by another process, reported as errBind.
func (s *Server) ours(hc *http.Client) error {
	resp, err := hc.Post(s.ClientURL+"/v3/cluster/member/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		return fmt.Errorf("etcdtest: member list on %s: %w", s.ClientURL, err)
	}
	defer resp.Body.Close()
	var list struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&list); err != nil {
		return fmt.Errorf("etcdtest: member list on %s: %w", s.ClientURL, err)
	}
	for _, m := range list.Members {
		if m.Name == s.name {
			return nil
		}
	}
	return fmt.Errorf("etcdtest: another etcd (members %v) answers on %s: %w", list.Members, s.ClientURL, errBind)
}

// logTail returns the last lines of the log written since offset, formatted for an error message.
func (s *Server) logTail(offset int64) string {
	data, err := os.ReadFile(s.Log)
	if err != nil || int64(len(data)) <= offset {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data[offset:]), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return "\n--- " + s.Log + " (tail) ---\n" + strings.Join(lines, "\n")
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// findEtcd looks for etcd in PATH, then where Debian and the upstream tarball install it.
func findEtcd() (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/etcd", "/usr/local/bin/etcd"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// freePort returns a free TCP port on 127.0.0.1 (freeport.Get: outside the kernel's ephemeral range when it
// can, so Restart gets it back). Another process may still take it before the etcd binds it; New retries with
// other ports then, and Restart reports it.
func freePort() (int, error) {
	port, err := freeport.Get()
	if err != nil {
		return 0, fmt.Errorf("etcdtest: %w", err)
	}
	return port, nil
}
