package admin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/metrics"
)

// testConsole is a console over one node that is never started (no
// backend is reached) and a configuration that reloads are applied to.
type testConsole struct {
	*Console
	cfg      *config.Config
	version  uint64
	draining bool
	reloaded []*config.Config
}

func newTestConsole(t *testing.T, mod func(*config.Config)) *testConsole {
	cfg := &config.Config{Addr: "127.0.0.1:9696", AdminUser: "root", SlowLogTime: 100,
		Users: []config.User{{User: "root"}, {User: "app"}},
		Nodes: []config.Node{{Name: "node1", Master: "127.0.0.1:3307", MaxConnsLimit: 4}}}
	if mod != nil {
		mod(cfg)
	}
	n := backend.NewNode(cfg.Nodes[0], cfg.Backend, nil)
	tc := &testConsole{cfg: cfg, version: 1}
	m := metrics.New(metrics.Options{Nodes: []string{"node1"}, Collector: metrics.Collector{Stats: func() metrics.Stats { return metrics.Stats{} }}})
	tc.Console = New(Env{
		Log:      zap.NewNop(),
		Config:   func() (*config.Config, uint64) { return tc.cfg, tc.version },
		Nodes:    func() []*backend.Node { return []*backend.Node{n} },
		Metrics:  m,
		Stats:    func() metrics.Stats { return metrics.Stats{Sessions: 7} },
		Sessions: func() int { return 2 },
		Queries:  func() uint64 { return 42 },
		Draining: func() bool { return tc.draining },
		Reload: func(c *config.Config) error {
			tc.reloaded = append(tc.reloaded, c)
			tc.cfg, tc.version = c, tc.version+1
			return nil
		},
		ReloadFile:   func(string) ([]string, error) { return nil, errors.New("no file here") },
		ReplicaAdded: func() {},
	})
	return tc
}

func (tc *testConsole) get(t *testing.T, method, target string, auth ...string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(method, target, nil)
	if len(auth) == 2 {
		r.SetBasicAuth(auth[0], auth[1])
	}
	tc.HTTP().ServeHTTP(rec, r)
	return rec
}

func TestHTTP(t *testing.T) {
	tc := newTestConsole(t, nil)
	if rec := tc.get(t, "GET", "/healthz"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"status":"ok"`) {
		t.Errorf("/healthz: %d %s", rec.Code, rec.Body)
	}
	tc.draining = true
	if rec := tc.get(t, "GET", "/healthz"); rec.Code != 503 || !strings.Contains(rec.Body.String(), `"shutting down"`) {
		t.Errorf("/healthz while draining: %d %s", rec.Code, rec.Body)
	}
	if rec := tc.get(t, "GET", "/stats"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"sessions": 7`) {
		t.Errorf("/stats: %d %s", rec.Code, rec.Body)
	}
	if rec := tc.get(t, "POST", "/admin/reload"); rec.Code != 409 || !strings.Contains(rec.Body.String(), "not started from a configuration file") {
		t.Errorf("/admin/reload without a file: %d %s", rec.Code, rec.Body)
	}
	if rec := tc.get(t, "GET", "/admin/workflows"); rec.Code != 503 {
		t.Errorf("/admin/workflows without the sidecar: %d %s", rec.Code, rec.Body)
	}
	if rec := tc.get(t, "GET", "/admin/digest"); rec.Code != 404 {
		t.Errorf("/admin/digest with digest_size 0: %d %s", rec.Code, rec.Body)
	}
	if rec := tc.get(t, "POST", "/admin/switch_master?node=node1&addr=10.0.0.1:3306"); rec.Code != 400 {
		t.Errorf("/admin/switch_master to an unknown server: %d %s", rec.Code, rec.Body)
	}
	rec := tc.get(t, "GET", "/admin/config")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"ClientConns": "2"`) || !strings.Contains(rec.Body.String(), `"Address": "127.0.0.1:3307"`) {
		t.Errorf("/admin/config: %d %s", rec.Code, rec.Body)
	}
	if rec := tc.get(t, "GET", "/status"); rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Errorf("/status: %d %s", rec.Code, rec.Header())
	}
}

func TestHTTPAuth(t *testing.T) {
	tc := newTestConsole(t, func(c *config.Config) { c.WebUser, c.WebPassword = "op", "secret" })
	if rec := tc.get(t, "GET", "/stats"); rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("/stats without credentials: %d", rec.Code)
	}
	if rec := tc.get(t, "GET", "/stats", "op", "wrong"); rec.Code != http.StatusUnauthorized {
		t.Errorf("/stats with a wrong password: %d", rec.Code)
	}
	if rec := tc.get(t, "GET", "/stats", "op", "secret"); rec.Code != 200 {
		t.Errorf("/stats with credentials: %d", rec.Code)
	}
	if rec := tc.get(t, "GET", "/healthz"); rec.Code != 200 {
		t.Errorf("/healthz needs no credentials: %d", rec.Code)
	}
}

func TestSQL(t *testing.T) {
	tc := newTestConsole(t, nil)
	root := Session{User: "root", Log: zap.NewNop()}
	code := func(err error) uint16 {
		var se *mysql.SQLError
		if errors.As(err, &se) {
			return se.Code
		}
		return 0
	}
	if _, handled, _ := tc.SQL(root, "SHOW TABLES", "SHOW"); handled {
		t.Error("SHOW TABLES is not admin SQL")
	}
	if _, handled, err := tc.SQL(Session{User: "app", Log: zap.NewNop()}, "show proxy config", "SHOW"); !handled || code(err) != mysql.ErSpecificAccessDenied {
		t.Errorf("show proxy config by app: handled %v, %v", handled, err)
	}
	if _, _, err := tc.SQL(root, "admin nonsense", "ADMIN"); code(err) != mysql.ErSyntax {
		t.Errorf("admin nonsense: %v", err)
	}
	res, _, err := tc.SQL(root, "show proxy config", "SHOW")
	if err != nil || len(res.Columns) != 2 || len(res.Rows) != 11 || string(res.Rows[7][1]) != "2" || string(res.Rows[8][1]) != "42" {
		t.Fatalf("show proxy config: %v %+v", err, res)
	}
	res, _, err = tc.SQL(root, "admin node(opt,node,k,v) values('down','node1','master','127.0.0.1:3307')", "ADMIN")
	if err != nil || res.Columns != nil || res.Affected != 1 {
		t.Fatalf("admin node down: %v %+v", err, res)
	}
	res, _, _ = tc.SQL(root, "show node status", "SHOW")
	if len(res.Rows) != 1 || string(res.Rows[0][3]) != "down (admin)" {
		t.Fatalf("show node status after down: %q", res.Rows)
	}
	if _, _, err := tc.SQL(root, "admin node(opt,node,k,v) values('down','node9','master','x:1')", "ADMIN"); code(err) != mysql.ErWrongArguments {
		t.Errorf("admin node of no node: %v", err)
	}
	res, _, err = tc.SQL(root, "admin server(opt,k,v) values('add','allow_ip','10.0.0.0/8')", "ADMIN")
	if err != nil || res.Affected != 1 || len(tc.reloaded) != 1 || tc.cfg.AllowIPs != "10.0.0.0/8" {
		t.Fatalf("add allow_ip: %v %+v (reloads %d)", err, res, len(tc.reloaded))
	}
	res, _, _ = tc.SQL(root, "show proxy config", "SHOW")
	if string(res.Rows[10][1]) != "2" {
		t.Errorf("ConfigVersion after a change = %s, want 2", res.Rows[10][1])
	}
	if _, _, err := tc.SQL(root, "show workflow status", "SHOW"); code(err) != mysql.ErNotSupported {
		t.Errorf("show workflow status without the sidecar: %v", err)
	}
	if _, _, err := tc.SQL(root, "show shardgate digest", "SHOW"); code(err) != mysql.ErNotSupported {
		t.Errorf("show shardgate digest with digest_size 0: %v", err)
	}
}
