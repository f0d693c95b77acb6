package kafkatest

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNotInstalled is returned (wrapped) by New when Java or the broker's jars are missing.
var ErrNotInstalled = errors.New("kafkatest: the Kafka broker is not installed (fetch it with: scripts/deps.sh kafka)")

const (
	// readyTimeout bounds how long one start may take until the broker answers a metadata request.
	readyTimeout = 90 * time.Second
	// formatTimeout bounds the storage tool.
	formatTimeout = 60 * time.Second
	// stopTimeout bounds a clean shutdown (SIGTERM) before the process is killed.
	stopTimeout = 30 * time.Second
	// portAttempts is how many pairs of free ports New tries when another process wins the race for one.
	portAttempts = 5
	// restartPortWait is how long Restart keeps retrying while the old ports are still taken.
	restartPortWait = 15 * time.Second
	// logTailLines is how much of kafka.log an error message quotes.
	logTailLines = 30
	// defaultHeap is the broker's -Xmx: a test's broker holds little, and the machine is shared.
	defaultHeap = "512m"
)

//go:embed server.properties
var serverProperties string

//go:embed log4j2.properties
var log4j2Properties string

// errBind marks a start that failed because a port was taken.
var errBind = errors.New("port already in use")

// Options change how New runs the broker. The zero value is what tests want.
type Options struct {
	// Props are extra server.properties lines, "key=value", appended after kafkatest's own (a later line wins).
	Props []string
	// Heap is the JVM's -Xmx ("512m" when empty).
	Heap string
	// Throughput runs the JVM with both JIT compilers and Kafka's own collector (G1), for benchmarks. The default
	// stops at the first JIT tier with the serial collector, which starts the broker faster on a small machine
	// and runs it slower once warm.
	Throughput bool

	// archiveAtExit makes the JVM write a class archive there when it exits normally (WriteClassArchive).
	archiveAtExit string
}

// Broker is one single-node Kafka cluster in KRaft mode (the node is broker and controller). The exported fields
// are set by New and never change afterwards, so they can be read from any goroutine; Restart keeps the ports,
// the cluster id and the data.
type Broker struct {
	// Dir holds everything of this broker: server.properties, the data (data/) and kafka.log.
	Dir string
	// DataDir is the broker's log.dirs (topic partitions and the metadata log).
	DataDir string
	// Log is the file the JVM's standard output and error go to (appended across restarts).
	Log string
	// Addr is the client (PLAINTEXT) listener, "127.0.0.1:<port>", for kgo.SeedBrokers.
	Addr string
	// ControllerAddr is the KRaft controller listener; clients never need it.
	ControllerAddr string
	// ClusterID is the id the storage was formatted with; readiness checks that the broker answering on Addr
	// reports it, so a test never goes on against another process that took the port.
	ClusterID string
	// Version is the Kafka version of the jars ("4.1.2").
	Version string

	java   string   // path of the java binary
	lib    string   // directory of the broker's jars
	jvm    []string // JVM flags before the main class
	props  []string // the caller's extra properties
	dumpTo string   // where the broker's JVM (not the storage tool's) writes a class archive at exit, if set

	mu     sync.Mutex    // serialises start, Stop, Kill, Restart and Close
	proc   *process      // nil while the broker is not running; guarded by mu
	closed bool          // Close was called; guarded by mu
	took   time.Duration // how long the last start took; guarded by mu
}

// process is one run of the JVM. done is closed by the goroutine that waits for the process, after err is set.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the result of cmd.Wait; read only after done is closed
}

// Start runs a broker in t.TempDir() with the extra server properties given ("key=value") and registers a
// cleanup that kills it and, if the test failed, logs the tail of the broker's log. It calls t.Fatal with the
// log's tail if the broker is missing or does not start, and t.Skip under go test -short.
func Start(t testing.TB, props ...string) *Broker {
	t.Helper()
	if testing.Short() {
		t.Skip("kafkatest: -short: not starting Kafka")
	}
	b, err := New(t.TempDir(), Options{Props: props})
	if err != nil {
		t.Fatalf("%v\n*** Kafka tests need Java 17+ and the broker's jars: run scripts/deps.sh kafka. "+
			"Use go test -short to skip them.", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kafkatest: broker %s%s", b.Addr, b.LogTail(logTailLines))
		}
		if err := b.Close(); err != nil {
			t.Errorf("kafkatest: %v", err)
		}
	})
	return b
}

// New formats a new cluster's storage under dir (created if needed) and runs the broker on free 127.0.0.1
// ports until it answers a metadata request. The caller must Close it; Start does that for a test. If Java or
// the jars are missing the error wraps ErrNotInstalled.
func New(dir string, opts Options) (*Broker, error) {
	lib, version, err := Lib()
	if err != nil {
		return nil, err
	}
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	for _, p := range opts.Props {
		if !strings.Contains(p, "=") {
			return nil, fmt.Errorf("kafkatest: property %q is not key=value", p)
		}
	}
	heap := opts.Heap
	if heap == "" {
		heap = defaultHeap
	}
	// The data of an earlier broker belongs to another cluster id; formatting over it would fail, and the retry
	// below removes a failed start's data.
	if entries, err := os.ReadDir(filepath.Join(dir, "data")); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("kafkatest: %s already holds a broker's data; New needs a new directory", dir)
	}
	jvm := jvmFlags(heap, opts.Throughput)
	if archive := ClassArchive(lib); opts.archiveAtExit == "" && isFile(archive) {
		jvm = append(jvm, "-XX:SharedArchiveFile="+archive)
	}
	b := &Broker{
		Dir:       dir,
		DataDir:   filepath.Join(dir, "data"),
		Log:       filepath.Join(dir, "kafka.log"),
		ClusterID: newUUID(),
		Version:   version,
		java:      java,
		lib:       lib,
		jvm:       jvm,
		props:     opts.Props,
		dumpTo:    opts.archiveAtExit,
	}
	if err := os.WriteFile(filepath.Join(dir, "log4j2.properties"), []byte(log4j2Properties), 0o644); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cport, err := freePort()
		if err != nil {
			return nil, err
		}
		if port == cport {
			continue
		}
		b.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		b.ControllerAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(cport))
		if err := b.writeConfig(); err != nil {
			return nil, err
		}
		if err := b.format(); err != nil {
			return nil, err
		}
		err = b.spawn()
		if err == nil {
			return b, nil
		}
		// The metadata log of a failed first start may name the old controller port.
		_ = os.RemoveAll(b.DataDir)
		if !errors.Is(err, errBind) || attempt == portAttempts {
			return nil, err
		}
	}
}

// jvmFlags are the JVM's flags for a broker with the given -Xmx.
func jvmFlags(heap string, throughput bool) []string {
	flags := []string{
		"-Xmx" + heap,
		"-Xss1m",
		"-XX:MaxDirectMemorySize=256m",
		"-XX:-UsePerfData", // no /tmp/hsperfdata file per test
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=log4j2.properties", // relative to Dir, the working directory
		// A class archive (see WriteClassArchive) that does not fit this JVM or these jars is ignored, not fatal.
		"-Xshare:auto",
	}
	if throughput {
		return append(flags, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
	}
	// C1 only and the serial collector: on two busy cores, the C2 compiler threads and G1's concurrent
	// threads compete with the broker's own start.
	return append(flags, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
}

// Addrs returns the client listener for kgo.SeedBrokers.
func (b *Broker) Addrs() []string { return []string{b.Addr} }

// Client returns a franz-go client seeded with this broker and the given options, closed when the test ends.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// StartTime is how long the last start (New or Restart) took, from running the JVM to the first metadata
// answer; formatting the storage is not counted.
func (b *Broker) StartTime() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.took
}

// Pid is the process id of the broker's JVM, 0 while it is not running.
func (b *Broker) Pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return 0
	}
	return b.proc.cmd.Process.Pid
}

// Stop shuts the broker down with SIGTERM (a controlled shutdown; SIGKILL after 30 s) and waits for the JVM to
// exit. The data and ports are kept for Restart. Stopping a stopped broker is a no-op. It reports an error if
// the broker had died on its own before, so crashes do not go unnoticed.
func (b *Broker) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopLocked(syscall.SIGTERM, stopTimeout)
}

// Kill ends the broker with SIGKILL, as a machine that loses power, and waits for the JVM to exit. The data
// and ports are kept for Restart (which then recovers the logs, as Kafka does after a crash).
func (b *Broker) Kill() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopLocked(syscall.SIGKILL, stopTimeout)
}

// Pause stops the JVM with SIGSTOP: its sockets stay open and nothing answers, as when a machine hangs or a
// network drops packets. Resume continues it.
func (b *Broker) Pause() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return fmt.Errorf("kafkatest: broker on %s is not running", b.Addr)
	}
	pid := b.proc.cmd.Process.Pid
	if err := b.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// kill(2) returns before the process stops: wait until the kernel says it is stopped (state T in
	// /proc/PID/stat), so that nothing is answered after Pause returns.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil // not Linux, or gone: nothing better to wait for
		}
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'T' || stat[i+2] == 't') {
			return nil
		}
	}
	return fmt.Errorf("kafkatest: broker on %s did not stop within 5 s of SIGSTOP", b.Addr)
}

// Resume continues a broker stopped by Pause.
func (b *Broker) Resume() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return fmt.Errorf("kafkatest: broker on %s is not running", b.Addr)
	}
	return b.proc.cmd.Process.Signal(syscall.SIGCONT)
}

// Restart starts the broker again with the same ports, cluster id and data and waits until it answers. A
// running broker is stopped with SIGTERM first.
func (b *Broker) Restart() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("kafkatest: Restart after Close")
	}
	if err := b.stopLocked(syscall.SIGTERM, stopTimeout); err != nil {
		return err
	}
	deadline := time.Now().Add(restartPortWait)
	for {
		err := b.spawn()
		if err == nil || !errors.Is(err, errBind) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Close kills the broker for good; the directory stays (t.TempDir removes it for Start). It is safe to call more
// than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	p := b.proc
	if p == nil {
		return nil
	}
	b.proc = nil
	_ = p.cmd.Process.Kill()
	<-p.done
	return nil
}

// LogTail returns the last n lines of kafka.log (all runs), formatted for an error message or a test log.
func (b *Broker) LogTail(n int) string { return logTail(b.Log, 0, n) }

func (b *Broker) stopLocked(sig syscall.Signal, timeout time.Duration) error {
	p := b.proc
	if p == nil {
		return nil
	}
	b.proc = nil
	select {
	case <-p.done:
		return fmt.Errorf("kafkatest: broker on %s had exited on its own (%v)%s", b.Addr, p.err, b.LogTail(logTailLines))
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused JVM handles SIGTERM only once continued
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("kafkatest: broker on %s did not stop within %v after %v; killed it%s", b.Addr, timeout, sig, b.LogTail(logTailLines))
	}
	return nil
}

// writeConfig writes server.properties for the current ports.
func (b *Broker) writeConfig() error {
	_, port, _ := net.SplitHostPort(b.Addr)
	_, cport, _ := net.SplitHostPort(b.ControllerAddr)
	conf := strings.NewReplacer(
		"{{PORT}}", port,
		"{{CONTROLLER_PORT}}", cport,
		"{{LOG_DIRS}}", b.DataDir,
	).Replace(serverProperties)
	if len(b.props) > 0 {
		conf += "\n# Options.Props\n" + strings.Join(b.props, "\n") + "\n"
	}
	if err := os.WriteFile(filepath.Join(b.Dir, "server.properties"), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	return nil
}

// format prepares the empty data directory as Kafka's storage tool does: meta.properties (cluster, node and
// directory id) and bootstrap.checkpoint (the feature levels the new cluster starts with). The checkpoint holds
// no id, only the levels this Kafka version formats with, so when WriteClassArchive kept one from the tool's
// own run, format copies it and writes meta.properties itself instead of starting a JVM for the tool (1 to 4 s
// on a busy machine). Otherwise, and for the broker that writes the archive, it runs the tool.
func (b *Broker) format() error {
	if tmpl := bootstrapTemplate(b.lib); b.dumpTo == "" && isFile(tmpl) {
		return b.formatFromTemplate(tmpl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), formatTimeout)
	defer cancel()
	args := append(append([]string{}, b.jvm...), "-cp", filepath.Join(b.lib, "*"),
		"kafka.tools.StorageTool", "format", "-t", b.ClusterID, "-c", "server.properties")
	cmd := exec.CommandContext(ctx, b.java, args...)
	cmd.Dir = b.Dir
	cmd.Env = b.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafkatest: kafka.tools.StorageTool format: %v\n%s", err, lastLines(string(out), logTailLines))
	}
	return nil
}

// formatFromTemplate writes what kafka.tools.StorageTool format writes, from the checkpoint at tmpl.
func (b *Broker) formatFromTemplate(tmpl string) error {
	data, err := os.ReadFile(tmpl)
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.MkdirAll(b.DataDir, 0o755); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(b.DataDir, "bootstrap.checkpoint"), data, 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	// Version 1 is the KRaft form of meta.properties; node.id matches server.properties.
	meta := "#\n#written by kafkatest as kafka.tools.StorageTool format does\nnode.id=1\ndirectory.id=" + newUUID() +
		"\nversion=1\ncluster.id=" + b.ClusterID + "\n"
	if err := os.WriteFile(filepath.Join(b.DataDir, "meta.properties"), []byte(meta), 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	return nil
}

// env is the JVM's environment: not inherited, so that JAVA_TOOL_OPTIONS, KAFKA_* and the like of the calling
// environment do not change the broker.
func (b *Broker) env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.Dir, "LANG=C.UTF-8"}
}

// spawn runs the broker and waits for it to answer. On failure the process is gone. Called with b.mu held.
func (b *Broker) spawn() error {
	if b.proc != nil {
		return fmt.Errorf("kafkatest: broker on %s is already running", b.Addr)
	}
	logOffset := fileSize(b.Log)
	logf, err := os.OpenFile(b.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	args := append([]string{}, b.jvm...)
	if b.dumpTo != "" {
		args = append(args, "-XX:ArchiveClassesAtExit="+b.dumpTo)
	}
	args = append(args, "-cp", filepath.Join(b.lib, "*"), "kafka.Kafka", "server.properties")
	cmd := exec.Command(b.java, args...)
	cmd.Dir = b.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	cmd.Env = b.env()
	began := time.Now()
	err = cmd.Start()
	logf.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("kafkatest: start %s: %w", b.java, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	// This goroutine ends when the process does; whoever ends the process (Stop, Kill, Close) waits on done.
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := b.waitReady(p, logOffset); err != nil {
		_ = cmd.Process.Kill()
		<-p.done
		return err
	}
	b.took = time.Since(began)
	b.proc = p
	return nil
}

// waitReady asks the broker for its metadata until it answers with this cluster's id, the process exits, or
// readyTimeout passes. A TCP connect is not enough: the listener opens before the broker has caught up with
// the metadata log and been unfenced.
func (b *Broker) waitReady(p *process, logOffset int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTimeout(time.Second), kgo.RetryTimeout(time.Second),
		kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(readyTimeout)
	var last error
	for {
		select {
		case <-p.done:
			tail := logTail(b.Log, logOffset, logTailLines)
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("kafkatest: %s or %s: %w%s", b.Addr, b.ControllerAddr, errBind, tail)
			}
			return fmt.Errorf("kafkatest: the broker exited during start (%v)%s", p.err, tail)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		md, err := adm.BrokerMetadata(ctx)
		cancel()
		if err == nil {
			if md.Cluster != b.ClusterID {
				return fmt.Errorf("kafkatest: another Kafka cluster (%s) answers on %s: %w", md.Cluster, b.Addr, errBind)
			}
			if len(md.Brokers) > 0 {
				return nil
			}
			err = errors.New("metadata lists no broker")
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("kafkatest: broker on %s not ready within %v (%v)%s", b.Addr, readyTimeout, last,
				logTail(b.Log, logOffset, logTailLines))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Lib returns the directory of the broker's jars that scripts/deps.sh kafka fills
// ($XDG_CACHE_HOME/shardgate/kafka/lib, by default ~/.cache/shardgate/kafka/lib) and the Kafka version found
// there. The error wraps ErrNotInstalled when the jars are missing.
func Lib() (dir, version string, err error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	dir = filepath.Join(cache, "shardgate", "kafka", "lib")
	jars, _ := filepath.Glob(filepath.Join(dir, "kafka_2.13-*.jar"))
	if len(jars) != 1 {
		return "", "", fmt.Errorf("%w: %d kafka_2.13 jars in %s", ErrNotInstalled, len(jars), dir)
	}
	version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka_2.13-"), ".jar")
	return dir, version, nil
}

// findJava looks for java in JAVA_HOME, PATH, then where Debian installs it.
func findJava() (string, error) {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); isExec(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	if p := "/usr/bin/java"; isExec(p) {
		return p, nil
	}
	return "", fmt.Errorf("%w: no java in JAVA_HOME, PATH or /usr/bin", ErrNotInstalled)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// newUUID returns a random Kafka Uuid in its text form (URL-safe base64 of 16 bytes, no padding), as
// kafka-storage random-uuid prints it, without starting a JVM for it.
func newUUID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	u[0] &= 0x7f // a leading '-' would read as a flag on the storage tool's command line
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// logTail returns the last n lines of the file written since offset, formatted for an error message.
func logTail(path string, offset int64, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) <= offset {
		return ""
	}
	return "\n--- " + path + " (tail) ---\n" + lastLines(string(data[offset:]), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// freePort returns a free TCP port on 127.0.0.1 (freeport.Get: outside the kernel's ephemeral range when it
// can, so Restart gets it back). Another process may still take it before the broker binds it; New retries with
// other ports then, and Restart reports it.
func freePort() (int, error) {
	port, err := freeport.Get()
	if err != nil {
		return 0, fmt.Errorf("kafkatest: %w", err)
	}
	return port, nil
}
