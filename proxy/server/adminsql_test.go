package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardgate/shardgate/config"
)

// TestAdminSQL: kingshard's admin SQL on the client port, for admin_user
// only: the show commands, replicas added, taken down, brought up and
// deleted, a master taken out of service and back, allow_ips and
// slow_log_time changed through a validated reload, and the same data as
// JSON on the admin listener.
func TestAdminSQL(t *testing.T) {
	servers := backends(t)
	cfg := newConfig(t, servers[0])
	cfg.Users = append(cfg.Users, config.User{User: "adm", Password: appPassword})
	cfg.Schemas = append(cfg.Schemas, config.Schema{User: "adm", Nodes: []string{"node1"}, Default: "node1"})
	cfg.AdminUser = "adm"
	p := startProxy(t, cfg)
	app := openDB(t, p.dsn("", ""))
	adm := openDB(t, userDSN("adm", appPassword, p.addr, "", ""))

	_, err := app.Exec("admin server(opt,k,v) values('show','proxy','config')")
	wantSQLError(t, err, 1227, "42000")
	_, err = adm.Exec("admin node values('x')")
	wantSQLError(t, err, 1064, "42000")

	proxyConfig := func() map[string]string {
		m := map[string]string{}
		for _, r := range queryStrings(t, adm, "admin server(opt,k,v) values('show','proxy','config')") {
			m[r[0]] = r[1]
		}
		return m
	}
	if got := proxyConfig()["Nodes_List"]; got != "node1" {
		t.Errorf("Nodes_List = %q", got)
	}
	nodes := func() [][]string { return queryStrings(t, adm, "show node status") }
	if got := nodes(); len(got) != 1 || got[0][2] != "master" || got[0][3] != "up" {
		t.Errorf("show node status: %q", got)
	}

	replica := servers[1].Addr
	mustExec(t, adm, "admin node(opt,node,k,v) values('add','node1','slave','"+replica+"')")
	got := nodes()
	if len(got) != 2 || got[1][1] != replica || got[1][2] != "slave@1" || !strings.HasPrefix(got[1][4], "no") {
		t.Errorf("after add: %q (a server that does not replicate is not usable)", got)
	}
	mustExec(t, adm, "admin node(opt,node,k,v) values('down','node1','slave','"+replica+"')")
	if got := nodes(); got[1][3] != "down (admin)" {
		t.Errorf("after down: %q", got[1])
	}
	mustExec(t, adm, "admin node(opt,node,k,v) values('up','node1','slave','"+replica+"')")
	if got := nodes(); got[1][3] == "down (admin)" {
		t.Errorf("after up: %q", got[1])
	}
	_, err = adm.Exec("admin node(opt,node,k,v) values('add','node1','slave','" + replica + "')")
	wantSQLError(t, err, 1210, "HY000")
	mustExec(t, adm, "admin node(opt,node,k,v) values('del','node1','slave','"+replica+"')")
	if got := nodes(); len(got) != 1 {
		t.Errorf("after del: %q", got)
	}

	// A master taken out of service refuses statements until it is back.
	mustExec(t, adm, "admin node(opt,node,k,v) values('down','node1','master','"+servers[0].Addr+"')")
	c := conn(t, app)
	if _, err := c.ExecContext(t.Context(), "SELECT 1"); err == nil || !strings.Contains(err.Error(), "taken out of service") {
		t.Errorf("a statement on a master taken down: %v", err)
	}
	mustExec(t, adm, "admin node(opt,node,k,v) values('up','node1','master','"+servers[0].Addr+"')")
	queryValue(t, c, "SELECT 1")

	mustExec(t, adm, "admin server(opt,k,v) values('add','allow_ip','127.0.0.1')",
		"admin server(opt,k,v) values('change','slow_log_time','250')")
	if m := proxyConfig(); m["AllowIPs"] != "127.0.0.1" || m["SlowLogTime"] != "250" || m["ConfigVersion"] != "3" {
		t.Errorf("after the changes: %v", m)
	}
	_, err = adm.Exec("admin server(opt,k,v) values('add','allow_ip','not-an-ip')")
	wantSQLError(t, err, 1210, "HY000")
	mustExec(t, adm, "admin server(opt,k,v) values('del','allow_ip','127.0.0.1')")

	if rows := queryStrings(t, adm, "show schema config"); len(rows) != 2 || rows[0][0] != appUser {
		t.Errorf("show schema config: %q", rows)
	}
	rec := httptest.NewRecorder()
	p.srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/config", nil))
	var body struct {
		Proxy map[string]string   `json:"proxy"`
		Nodes []map[string]string `json:"nodes"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Nodes) != 1 || body.Proxy["Nodes_List"] != "node1" {
		t.Errorf("GET /admin/config: %v %s", err, rec.Body)
	}
}
