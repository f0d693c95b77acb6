package server_test

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// health is the JSON body of /healthz.
type health struct {
	Status string `json:"status"`
	Nodes  []struct {
		Name string `json:"name"`
		Up   bool   `json:"up"`
	} `json:"nodes"`
}

func getHealth(t *testing.T, h http.Handler) (int, health) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	var body health
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("/healthz body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, body
}

func nodeUp(body health, name string) bool {
	for _, n := range body.Nodes {
		if n.Name == name {
			return n.Up
		}
	}
	return false
}

// lostBackend reports whether err is what a client sees when the backend
// died under its statement: the proxy's ERR, or the driver noticing that
// the proxy closed the connection.
func lostBackend(err error) bool {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == mysql.ErServerLost
	}
	return errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// TestBackendKilledMidQuery kills the MariaDB server under running
// statements: a SLEEP and two streaming result sets (small rows, and rows
// larger than the proxy's buffers). Each client gets an error within
// seconds; a client of another node of the same proxy is unaffected; once
// the server is back, the node recovers and no client meets a connection
// left over from before the crash.
func TestBackendKilledMidQuery(t *testing.T) {
	srvs := backends(t)
	doomed, steady := srvs[1], srvs[0]
	cfg := newConfig(t, doomed, steady) // node1 on doomed, node2 on steady
	cfg.Users = append(cfg.Users, config.User{User: "app2", Password: appPassword})
	cfg.Schemas = []config.Schema{
		{User: appUser, Nodes: []string{"node1"}, Default: "node1"},
		{User: "app2", Nodes: []string{"node2"}, Default: "node2"},
	}
	cfg.Nodes[0].MaxConnsLimit = 8
	p := startProxy(t, cfg)
	admin := p.srv.AdminHandler()
	dbSetup(t, doomed, "kill_t") // the sequence tables need a database

	// A read timeout turns a hung client into a failure instead of a
	// hung test.
	const params = "readTimeout=8s"
	victims := openDB(t, p.dsn("kill_t", params))
	other := conn(t, openDB(t, userDSN("app2", appPassword, p.addr, "", params)))
	if got := queryValue(t, other, "SELECT @@port"); got != fmt.Sprint(steady.Port) {
		t.Fatalf("app2 reaches port %s, want %d", got, steady.Port)
	}
	// Fill node1's pool with idle connections that the crash will break:
	// six, of which the four statements below take four.
	{
		var cs []*sql.Conn
		for range 6 {
			c := conn(t, victims)
			mustExec(t, c, "BEGIN")
			cs = append(cs, c)
		}
		for _, c := range cs {
			mustExec(t, c, "COMMIT")
			c.Close()
		}
	}

	type outcome struct {
		name string
		err  error
		at   time.Time
	}
	results := make(chan outcome, 4)
	started := make(chan string, 4)
	// run streams q's rows on its own connection. It reports on started
	// when the statement is under way: before sending it, or at the first
	// row when rowsFirst.
	run := func(name, q string, rowsFirst bool) {
		c, err := victims.Conn(t.Context())
		if err != nil {
			started <- name
			results <- outcome{name, err, time.Now()}
			return
		}
		defer c.Close()
		if !rowsFirst {
			started <- name
		}
		rows, err := c.QueryContext(t.Context(), q)
		if err != nil {
			if rowsFirst {
				started <- name
			}
			results <- outcome{name, err, time.Now()}
			return
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			if n++; n == 1 && rowsFirst {
				started <- name
			}
		}
		if n == 0 && rowsFirst {
			started <- name
		}
		err = rows.Err()
		if err == nil {
			err = errors.New("statement completed without error")
		}
		results <- outcome{name, err, time.Now()}
	}
	// Rows larger than the proxy's 16 KiB buffers are forwarded in pieces,
	// so the backend may die in the middle of one; two such streams make
	// that likely.
	victimsN := 4
	go run("sleep", "SELECT SLEEP(10)", false)
	go run("small rows", "SELECT seq, REPEAT('x', 100) FROM seq_1_to_50000000", true)
	go run("1 MB rows", "SELECT seq, REPEAT('y', 1048576) FROM seq_1_to_100000", true)
	go run("1 MB rows, second stream", "SELECT seq, REPEAT('w', 1048577) FROM seq_1_to_100000", true)
	for range victimsN {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("statements did not start")
		}
	}
	// The sleep has no rows: make sure it runs on the server.
	d := openDB(t, directDSN(doomed, "", ""))
	waitBackendQuery(t, d, "SELECT SLEEP(10)")
	d.Close()

	if err := doomed.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	restarted := false
	t.Cleanup(func() { // in case the test fails before restarting
		if !restarted {
			doomed.Restart()
		}
	})
	for range victimsN {
		select {
		case o := <-results:
			took := o.at.Sub(killed)
			if !lostBackend(o.err) {
				t.Errorf("%s: got %v, want error %d or a closed connection", o.name, o.err, mysql.ErServerLost)
			}
			if took > 5*time.Second {
				t.Errorf("%s: error came %v after the backend died", o.name, took)
			}
			t.Logf("%s: %v after %v", o.name, o.err, took)
		case <-time.After(15 * time.Second):
			t.Fatal("clients still waiting 15s after the backend died")
		}
	}

	// The other node is unaffected, for connected and new clients.
	if got := queryValue(t, other, "SELECT 'steady'"); got != "steady" {
		t.Fatal(got)
	}
	if got := queryValue(t, openDB(t, userDSN("app2", appPassword, p.addr, "", "")), "SELECT 'new'"); got != "new" {
		t.Fatal(got)
	}

	// node1 is marked down; its clients are refused at once.
	eventually(t, 5*time.Second, "healthz to report node1 down", func() bool {
		code, body := getHealth(t, admin)
		return code == http.StatusServiceUnavailable && !nodeUp(body, "node1") && nodeUp(body, "node2")
	})
	start := time.Now()
	_, err := victims.Exec("SELECT 1")
	me := wantSQLError(t, err, mysql.ErConnectFailed, "")
	if d := time.Since(start); d > time.Second {
		t.Errorf("query on a down node took %v", d)
	}
	t.Logf("while down: %v", me)

	restarted = true
	if err := doomed.Restart(); err != nil {
		t.Fatal(err)
	}
	upAgain := time.Now()
	eventually(t, cfg.Backend.HealthInterval+5*time.Second, "node1 to come back", func() bool {
		code, _ := getHealth(t, admin)
		return code == http.StatusOK
	})
	t.Logf("node1 up %v after the restart", time.Since(upAgain))
	// Every statement from here on succeeds: the pool must not hand out
	// connections to the server that died (two were left idle above).
	t.Run("no stale pooled connections", func(t *testing.T) {
		for i := range 10 {
			c := openDB(t, p.dsn("", ""))
			var n int
			if err := c.QueryRow("SELECT 1").Scan(&n); err != nil {
				t.Errorf("query %d (new client) after the node came back: %v", i, err)
			}
			c.Close()
		}
	})
	if got := queryValue(t, other, "SELECT 'steady'"); got != "steady" {
		t.Fatal(got)
	}
}

// TestClientGoneMidResult: a client asks for ~50 MB, reads a little and
// disconnects. The proxy closes that backend connection (it is mid-result)
// and returns its pool slot.
func TestClientGoneMidResult(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	p := startProxy(t, cfg)
	dbSetup(t, s, "gone_t") // the sequence tables need a database
	direct := openDB(t, directDSN(s, "", ""))
	const q = "SELECT seq, REPEAT('z', 1024) FROM seq_1_to_51200 /* client gone */"

	for _, rowsRead := range []int{0, 10, 1000} {
		t.Run(fmt.Sprintf("after %d rows", rowsRead), func(t *testing.T) {
			r := dialRaw(t, p.addr)
			r.loginDB("gone_t", rawCaps)
			r.command(append([]byte{mysql.ComQuery}, q...))
			if pk := r.read(); len(pk) != 1 || pk[0] != 2 {
				t.Fatalf("got %s, want a column count of 2", describe(pk))
			}
			r.read()
			r.read() // column definitions
			for range rowsRead {
				r.read()
			}
			r.nc.Close()

			eventually(t, 10*time.Second, "the session to end and its backend connection to be released", func() bool {
				st := p.srv.Stats()
				return st.Sessions == 0 && st.Nodes[0].InUse == 0
			})
			eventually(t, 10*time.Second, "the backend to stop running the query", func() bool {
				var n int
				err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", q).Scan(&n)
				return err == nil && n == 0
			})
			db := openDB(t, p.dsn("gone_t", ""))
			if got := queryValue(t, db, "SELECT COUNT(*) FROM seq_1_to_1000"); got != "1000" {
				t.Fatalf("after the client left: %s", got)
			}
			db.Close()
		})
	}
}

// TestNodeDownAtStart: a node whose master does not listen does not stop
// the proxy; its clients get error 2003's replacement at once and /healthz
// says the node is down.
func TestNodeDownAtStart(t *testing.T) {
	s := backends(t)[0]
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	cfg := newConfig(t, s)
	cfg.Nodes[0].Master = addr
	start := time.Now()
	p := startProxy(t, cfg)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("New with a down node took %v", d)
	}

	db := openDB(t, p.dsn("", ""))
	for range 3 {
		start := time.Now()
		_, err := db.Exec("SELECT 1")
		me := wantSQLError(t, err, mysql.ErConnectFailed, "")
		if d := time.Since(start); d > time.Second {
			t.Errorf("query on a down node took %v", d)
		}
		if !strings.Contains(me.Message, "node1") || !strings.Contains(me.Message, addr) {
			t.Errorf("message %q does not name the node and its address", me.Message)
		}
	}
	wantSQLError(t, openDB(t, p.dsn("some_db", "")).Ping(), mysql.ErConnectFailed, "")

	code, body := getHealth(t, p.srv.AdminHandler())
	if code != http.StatusServiceUnavailable || body.Status != "degraded" || nodeUp(body, "node1") {
		t.Errorf("/healthz: %d %+v", code, body)
	}
	if st := p.srv.Stats(); len(st.Nodes) != 1 || st.Nodes[0].Up || st.Nodes[0].InUse != 0 {
		t.Errorf("stats: %+v", st.Nodes)
	}
}
