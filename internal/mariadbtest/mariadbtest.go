package mariadbtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// ErrNotInstalled is returned (wrapped) by Start when mariadbd or mariadb-install-db cannot be found in PATH,
// /usr/sbin or /usr/bin.
var ErrNotInstalled = errors.New("mariadbtest: MariaDB is not installed (install it with: apt-get install -y mariadb-server)")

const (
	// testUser is the account every server of a Cluster gets; its password is random per Start.
	testUser = "sgtest"

	// readyTimeout bounds how long one mariadbd start may take until it answers a ping over TCP.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a clean shutdown (SIGTERM) before the server is killed.
	stopTimeout = 30 * time.Second
	// bootstrapTimeout bounds mariadb-install-db.
	bootstrapTimeout = 2 * time.Minute
	// portAttempts is how many free ports Start tries per server when another process wins the race for one.
	portAttempts = 5
	// restartPortWait is how long a restarted server waits for its old port to become free (--port-open-timeout).
	restartPortWait = 10
	// maxSocketPath keeps unix socket paths under the kernel's sun_path limit (108 bytes with the NUL).
	maxSocketPath = 100
	// logTailLines is how much of error.log an error message quotes.
	logTailLines = 30
)

// errBind marks a start that failed because the TCP port was taken; Start retries those with another port.
var errBind = errors.New("port already in use")

// errNotRunning is returned by Kill for a server that is not running.
var errNotRunning = errors.New("mariadbtest: server is not running")

// Cluster is a set of independent MariaDB servers started by Start. Servers is fixed after Start returns.
type Cluster struct {
	// Servers are the running servers, in a stable order (directory s0, s1, ...).
	Servers []*Server

	dir     string // parent of every server directory
	ownDir  bool   // Start created dir and Stop removes it
	sockDir string // short directory for sockets when dir is too deep for sun_path; removed by Stop

	stopOnce sync.Once
	stopErr  error
}

// Server is one mariadbd process. The exported fields are set by Start and never change afterwards, so they can
// be read from any goroutine; Restart keeps the port and data directory.
type Server struct {
	// Addr is the TCP address, always "127.0.0.1:<Port>".
	Addr string
	// Port is the TCP port on 127.0.0.1.
	Port int
	// User and Password name an account with ALL PRIVILEGES ON *.* WITH GRANT OPTION on host '%'
	// (mysql_native_password). All servers of a Cluster share them.
	User, Password string
	// Dir holds everything of this server: the data directory, tmp directory, pid file, error.log and console.log.
	Dir string
	// DataDir is the server's --datadir.
	DataDir string
	// Socket is the unix socket; root@localhost has no password there.
	Socket string
	// ErrorLog is the server's --log-error file.
	ErrorLog string
	// CAFile is the certificate authority whose server certificate (for
	// 127.0.0.1 and localhost) the server offers for TLS; TLS is optional.
	CAFile string
	// TmpDir is the server's private --tmpdir. It must not be shared: mariadbd deletes every "#sql*" file in its
	// tmpdir when it starts, which breaks the temporary tables of any other server using the same directory.
	TmpDir string

	// ServerID is the server's --server_id (its index in the Cluster plus
	// one): unique within a Cluster, as replication needs.
	ServerID int

	mariadbd string // path of the mariadbd binary
	tlsCert  string // the server certificate and key files
	tlsKey   string

	mu   sync.Mutex // serialises start, Stop, Kill and Restart
	proc *process   // nil while the server is not running; guarded by mu
}

// process is one run of mariadbd. done is closed by the goroutine that waits for the process, after err is set.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the result of cmd.Wait; read only after done is closed
}

// binaries are the MariaDB programs Start needs.
type binaries struct {
	mariadbd  string
	installDB string
}

// Start boots n independent MariaDB servers, each in its own subdirectory (s0, s1, ...) of dir, on free
// 127.0.0.1 ports. When dir is "", Start creates a temporary directory and Stop removes it; otherwise dir is
// created if needed and left in place, but its s<i> subdirectories must not exist yet.
//
// One data directory is bootstrapped with mariadb-install-db (which also creates the test account) and copied
// for the other servers; the servers then start in parallel. Start returns only when every server accepts
// connections from the test account over TCP. On failure no server is left running, and the error quotes the
// tail of the failing server's error.log. If MariaDB is not installed the error wraps ErrNotInstalled.
func Start(dir string, n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("mariadbtest: need at least one server, got %d", n)
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mariadbtest-"); err != nil {
			return nil, fmt.Errorf("mariadbtest: %w", err)
		}
		c.ownDir = true
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}
	if c.dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("mariadbtest: %w", err)
	}
	if err := c.start(bins, n); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

// start lays out the server directories, bootstraps, copies and boots the servers. On error the caller stops c.
func (c *Cluster) start(bins binaries, n int) error {
	password, err := randomPassword()
	if err != nil {
		return err
	}
	caFile, certFile, keyFile, err := writeTLS(c.dir)
	if err != nil {
		return err
	}
	for i := range n {
		name := "s" + strconv.Itoa(i)
		sdir := filepath.Join(c.dir, name)
		if err := os.Mkdir(sdir, 0o755); err != nil {
			return fmt.Errorf("mariadbtest: server directory: %w", err)
		}
		s := &Server{
			ServerID: i + 1,
			User:     testUser,
			Password: password,
			Dir:      sdir,
			DataDir:  filepath.Join(sdir, "data"),
			Socket:   filepath.Join(sdir, "mysqld.sock"),
			ErrorLog: filepath.Join(sdir, "error.log"),
			TmpDir:   filepath.Join(sdir, "tmp"),
			CAFile:   caFile,
			mariadbd: bins.mariadbd,
			tlsCert:  certFile,
			tlsKey:   keyFile,
		}
		if err := os.Mkdir(s.TmpDir, 0o755); err != nil {
			return fmt.Errorf("mariadbtest: %w", err)
		}
		if len(s.Socket) > maxSocketPath {
			if c.sockDir == "" {
				if c.sockDir, err = os.MkdirTemp("", "mdbsock-"); err != nil {
					return fmt.Errorf("mariadbtest: socket directory: %w", err)
				}
			}
			s.Socket = filepath.Join(c.sockDir, name+".sock")
		}
		c.Servers = append(c.Servers, s)
	}

	if err := bootstrap(bins.installDB, c.dir, c.Servers[0].DataDir, c.Servers[0].TmpDir, testUser, password); err != nil {
		return err
	}
	if err := c.each(func(s *Server) error {
		if s == c.Servers[0] {
			return nil
		}
		if err := copyDir(c.Servers[0].DataDir, s.DataDir); err != nil {
			return fmt.Errorf("mariadbtest: copy data directory for %s: %w", s.Dir, err)
		}
		return nil
	}); err != nil {
		return err
	}
	return c.each(func(s *Server) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.startLocked(true)
	})
}

// each runs fn for every server in parallel and waits for all of them.
func (c *Cluster) each(fn func(s *Server) error) error {
	errs := make([]error, len(c.Servers))
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Go(func() { errs[i] = fn(s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Replicate makes replica a replica of primary (MariaDB GTID replication
// from primary's first event: both start from the same bootstrapped data)
// and waits until both replication threads run.
func Replicate(primary, replica *Server) error {
	db, err := sql.Open("mysql", replica.DSN(""))
	if err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	defer db.Close()
	stmts := []string{
		"STOP SLAVE",
		"RESET SLAVE ALL",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			primary.Port, primary.User, primary.Password),
		"START SLAVE",
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("mariadbtest: %s on %s: %w", strings.Fields(q)[0]+" "+strings.Fields(q)[1], replica.Addr, err)
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		io, sqlThread, lastErr, err := SlaveThreads(db)
		if err == nil && io == "Yes" && sqlThread == "Yes" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbtest: replica %s of %s did not start replicating (io %q, sql %q, %q, %v)", replica.Addr, primary.Addr, io, sqlThread, lastErr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SlaveThreads reads SHOW SLAVE STATUS: whether the IO and SQL threads run
// ("Yes", "No", "Connecting") and the last error either reported.
func SlaveThreads(db *sql.DB) (io, sqlThread, lastErr string, err error) {
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		return "", "", "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", "", "", err
	}
	if !rows.Next() {
		return "", "", "", errors.New("not a replica")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", "", "", err
	}
	for i, c := range cols {
		switch c {
		case "Slave_IO_Running":
			io = vals[i].String
		case "Slave_SQL_Running":
			sqlThread = vals[i].String
		case "Last_IO_Error", "Last_SQL_Error":
			if vals[i].String != "" {
				lastErr = vals[i].String
			}
		}
	}
	return io, sqlThread, lastErr, rows.Err()
}

// Stop shuts every server down cleanly (killing any that does not stop within 30 s) and removes the directory
// if Start created it. It is safe to call more than once and from several goroutines; later calls return the
// first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		err := c.each((*Server).Stop)
		if c.ownDir {
			err = errors.Join(err, os.RemoveAll(c.dir))
		}
		if c.sockDir != "" {
			err = errors.Join(err, os.RemoveAll(c.sockDir))
		}
		c.stopErr = err
	})
	return c.stopErr
}

// DSN returns a go-sql-driver/mysql DSN for the test account over TCP with database db ("" for none). It always
// ends in a query string, so callers may append "&name=value".
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?interpolateParams=false&parseTime=false", s.User, s.Password, s.Addr, db)
}

// Pid is the server's process id, 0 while it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Kill sends SIGKILL to the server and waits for the process to exit, as if the machine had lost it mid-query.
// The data directory stays; Restart brings the server back after InnoDB crash recovery.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return errNotRunning
	}
	p.kill()
	s.proc = nil
	return nil
}

// Pause stops the server's process with SIGSTOP: its sockets stay open
// and nothing answers, as when a machine hangs. Resume continues it.
//
// The kernel stops a process's threads one after another, as each is
// scheduled, so on a busy machine a thread can still answer a query
// after kill(2) returned; Pause returns once every thread is stopped.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return errNotRunning
	}
	p := s.proc.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(p.Pid, 10*time.Second)
}

// Resume continues a server stopped by Pause.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return errNotRunning
	}
	return s.proc.cmd.Process.Signal(sig)
}

// Stop shuts the server down cleanly with SIGTERM, killing it after 30 s. Stopping a stopped server is a no-op.
// It reports an error if the server had died on its own before Stop, so crashes do not go unnoticed.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

// Restart starts the server again on the same port and data directory and waits until it accepts connections.
// A running server is stopped cleanly first. Restart waits up to 10 s for the port to become free.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopLocked(); err != nil {
		return err
	}
	return s.startLocked(false)
}

func (s *Server) stopLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	select {
	case <-p.done:
		return fmt.Errorf("mariadbtest: mariadbd on %s had exited on its own (%v)%s", s.Addr, p.err, s.logTail(0))
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.kill()
		return fmt.Errorf("mariadbtest: mariadbd on %s did not shut down within %v; killed it%s", s.Addr, stopTimeout, s.logTail(0))
	}
	if p.err != nil {
		return fmt.Errorf("mariadbtest: mariadbd on %s shut down with %v%s", s.Addr, p.err, s.logTail(0))
	}
	return nil
}

// startLocked starts mariadbd and waits until it is ready. With freshPort it picks a free port first, and picks
// another when mariadbd loses the port to a different process; otherwise it reuses s.Port and lets mariadbd
// wait for it to become free.
func (s *Server) startLocked(freshPort bool) error {
	if s.proc != nil {
		return fmt.Errorf("mariadbtest: mariadbd on %s is already running", s.Addr)
	}
	for attempt := 1; ; attempt++ {
		if freshPort {
			port, err := freePort()
			if err != nil {
				return err
			}
			s.Port, s.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
		err := s.spawn(freshPort)
		if err == nil || !freshPort || !errors.Is(err, errBind) || attempt == portAttempts {
			return err
		}
	}
}

// spawn runs one mariadbd and waits for it to accept connections. On failure the process is gone.
func (s *Server) spawn(freshPort bool) error {
	logOffset := fileSize(s.ErrorLog)
	args := []string{
		"--no-defaults", // must come first
		"--datadir=" + s.DataDir,
		"--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1",
		"--socket=" + s.Socket,
		"--pid-file=" + filepath.Join(s.Dir, "mysqld.pid"),
		"--log-error=" + s.ErrorLog,
		"--tmpdir=" + s.TmpDir,
		"--innodb-buffer-pool-size=64M",
		"--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=2",
		// Binary logs as change streams and replicas need them: row
		// events with full images, GTIDs, written by replicas too.
		"--log-bin=mysql-bin",
		"--server-id=" + strconv.Itoa(s.ServerID),
		"--binlog-format=ROW",
		"--binlog-row-image=FULL",
		"--binlog-row-metadata=FULL",
		"--log-slave-updates",
		"--sync-binlog=0",
		"--max-connections=1000",
		"--skip-name-resolve",
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
		"--ssl-ca=" + s.CAFile,
		"--ssl-cert=" + s.tlsCert,
		"--ssl-key=" + s.tlsKey,
	}
	if !freshPort {
		args = append(args, "--port-open-timeout="+strconv.Itoa(restartPortWait))
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root") // mariadbd refuses to run as root without it
	}
	// mariadbd writes almost everything to --log-error; console.log catches what comes before it opens that.
	console, err := os.OpenFile(filepath.Join(s.Dir, "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	cmd := exec.Command(s.mariadbd, args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	console.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("mariadbtest: start %s: %w", s.mariadbd, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	// This goroutine ends when the process does; whoever ends the process (Stop, Kill) waits on done.
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := s.waitReady(p, logOffset); err != nil {
		p.kill()
		return err
	}
	s.proc = p
	return nil
}

// waitReady polls the server with a TCP connect, handshake and ping as the test account until one succeeds,
// the process exits, or readyTimeout passes.
func (s *Server) waitReady(p *process, logOffset int64) error {
	cfg := mysqldriver.NewConfig()
	cfg.User, cfg.Passwd = s.User, s.Password
	cfg.Net, cfg.Addr = "tcp", s.Addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	connector, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	// The server that answers must be this one: another server of the
	// cluster, started at the same time, may have been given the same
	// free port and won it (this one then fails to bind and exits).
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var id int
		if err := db.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
			return err
		}
		if id != s.ServerID {
			return fmt.Errorf("%s answers as server_id %d, not %d: another server has the port", s.Addr, id, s.ServerID)
		}
		return nil
	}

	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		lastErr := ping()
		if lastErr == nil {
			return nil
		}
		select {
		case <-p.done:
			tail := s.logTail(logOffset)
			err := fmt.Errorf("mariadbtest: mariadbd on %s exited before accepting connections (%v)%s", s.Addr, p.err, tail)
			if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "Bind on TCP/IP port") {
				err = fmt.Errorf("%w: %w", errBind, err)
			}
			return err
		case <-deadline.C:
			return fmt.Errorf("mariadbtest: mariadbd on %s not ready after %v (last error: %v)%s", s.Addr, readyTimeout, lastErr, s.logTail(logOffset))
		case <-tick.C:
		}
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// logTail returns the last lines of error.log written at or after offset, plus anything mariadbd printed to its
// console, formatted to be appended to an error message.
func (s *Server) logTail(offset int64) string {
	var b strings.Builder
	if tail := readTail(s.ErrorLog, offset); tail != "" {
		fmt.Fprintf(&b, "\n--- tail of %s ---\n%s", s.ErrorLog, tail)
	}
	console := filepath.Join(s.Dir, "console.log")
	if tail := readTail(console, 0); tail != "" {
		fmt.Fprintf(&b, "\n--- tail of %s ---\n%s", console, tail)
	}
	return b.String()
}

// readTail returns the last logTailLines lines of path from offset on, or "" if there are none.
func readTail(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || offset >= int64(len(data)) {
		return ""
	}
	data = bytes.TrimRight(data[offset:], "\n")
	lines := strings.Split(string(data), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
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

// bootstrap creates a data directory with mariadb-install-db. The test account is created in the same run from
// an --extra-file; the bootstrap server runs without grant tables, so the file loads them first.
func bootstrap(installDB, workDir, dataDir, tmpDir, user, password string) error {
	sqlFile := filepath.Join(workDir, "bootstrap.sql")
	script := fmt.Sprintf("FLUSH PRIVILEGES;\n"+
		"CREATE USER '%[1]s'@'%%' IDENTIFIED VIA mysql_native_password USING PASSWORD('%[2]s');\n"+
		"GRANT ALL PRIVILEGES ON *.* TO '%[1]s'@'%%' WITH GRANT OPTION;\n", user, password)
	if err := os.WriteFile(sqlFile, []byte(script), 0o600); err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	defer os.Remove(sqlFile)

	args := []string{
		"--no-defaults", // must come first
		"--datadir=" + dataDir,
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
		"--skip-name-resolve",
		"--extra-file=" + sqlFile,
		"--tmpdir=" + tmpDir, // see Server.TmpDir
		// Passed through to the bootstrap mariadbd; the redo log is created with the size the servers use.
		"--innodb-buffer-pool-size=64M",
		"--innodb-log-file-size=16M",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, installDB, args...)
	cmd.Dir = workDir
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		// The cause comes first; mariadb-install-db's generic advice follows it.
		if i := strings.Index(string(out), "Installation of system tables failed"); i >= 0 {
			out = out[:i]
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) > logTailLines {
			lines = lines[len(lines)-logTailLines:]
		}
		return fmt.Errorf("mariadbtest: %s failed: %w\n--- output ---\n%s", installDB, err, strings.Join(lines, "\n"))
	}
	return nil
}

// copyDir copies the tree at src to dst, which must not exist. Only regular files, directories and symlinks
// occur in a fresh data directory.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		default:
			return fmt.Errorf("unexpected file type %v at %s", d.Type(), path)
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// freePort asks the kernel for a free port on 127.0.0.1. Another process may take it before mariadbd binds it;
// startLocked retries with a new port when that happens.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("mariadbtest: find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// Never the same port twice in one process: two servers started
		// together would race for it.
		if !portsGiven[port] {
			portsGiven[port] = true
			return port, nil
		}
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// findBinaries locates mariadbd and mariadb-install-db in PATH, then in the directories Debian installs them to
// (/usr/sbin is often missing from a non-root PATH).
func findBinaries() (binaries, error) {
	var b binaries
	var err error
	if b.mariadbd, err = lookBin("mariadbd"); err != nil {
		return b, err
	}
	if b.installDB, err = lookBin("mariadb-install-db"); err != nil {
		return b, err
	}
	return b, nil
}

func lookBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w; %s is not in PATH, /usr/sbin or /usr/bin", ErrNotInstalled, name)
}

// randomPassword returns a fresh password per Start, so that no test depends on a fixed secret.
func randomPassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("mariadbtest: %w", err)
	}
	return hex.EncodeToString(b), nil
}
