package server_test

import (
	"testing"
	"time"
)

// TestBackendLogins: with backend_logins, a client whose user is not in
// user_list logs in with a MariaDB account of the default node: MariaDB
// checks its password and privileges, CURRENT_USER() is the account, and
// its connection is its own (never pooled, closed when it leaves). Users
// of user_list log in as before.
func TestBackendLogins(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.BackendLogins = appUser
	p := startProxy(t, cfg)
	dbSetup(t, s, "exact_bl")
	admin := openDB(t, directDSN(s, "exact_bl", ""))
	mustExec(t, admin, "DROP USER IF EXISTS bl_user, bl_nopw", "CREATE TABLE t (a INT)", "INSERT INTO t VALUES (1)",
		"CREATE USER bl_user IDENTIFIED BY 'bl_pw'", "GRANT SELECT ON exact_bl.* TO bl_user",
		"CREATE USER bl_nopw", "GRANT SELECT ON exact_bl.* TO bl_nopw")
	t.Cleanup(func() { admin.Exec("DROP USER IF EXISTS bl_user, bl_nopw") })

	bl := openDB(t, userDSN("bl_user", "bl_pw", p.addr, "exact_bl", ""))
	if got := queryValue(t, bl, "SELECT CURRENT_USER()"); got != "bl_user@%" {
		t.Errorf("CURRENT_USER() = %s, want bl_user@%%", got)
	}
	if got := queryValue(t, bl, "SELECT COUNT(*) FROM t"); got != "1" {
		t.Errorf("SELECT: %s", got)
	}
	_, err := bl.Exec("INSERT INTO t VALUES (2)")
	wantSQLError(t, err, 1142, "42000") // MariaDB's privileges apply

	nopw := openDB(t, userDSN("bl_nopw", "", p.addr, "exact_bl", ""))
	if got := queryValue(t, nopw, "SELECT CURRENT_USER()"); got != "bl_nopw@%" {
		t.Errorf("CURRENT_USER() without a password = %s", got)
	}

	wrong := openDB(t, userDSN("bl_user", "nope", p.addr, "exact_bl", ""))
	wantSQLError(t, wrong.Ping(), 1045, "28000")
	unknown := openDB(t, userDSN("bl_nobody", "x", p.addr, "", ""))
	wantSQLError(t, unknown.Ping(), 1045, "28000")

	// user_list's users log in as before, with the proxy's account.
	app := openDB(t, p.dsn("exact_bl", ""))
	if got := queryValue(t, app, "SELECT CURRENT_USER()"); got == "bl_user@%" {
		t.Errorf("a user_list user runs as %s", got)
	}
	// A backend account cannot kill another user's session.
	appConn := conn(t, app)
	id := queryValue(t, appConn, "SELECT CONNECTION_ID()")
	_, err = bl.Exec("KILL " + id)
	wantSQLError(t, err, 1095, "HY000")

	// KILL ... USER runs on the server, with the node's account for a
	// user_list session: it ends bl_nopw's connection and says how many
	// (mtr main.kill). The account the pools log in with is refused:
	// its threads are every client's sessions.
	if err := nopw.Ping(); err != nil {
		t.Fatal(err)
	}
	res, err := appConn.ExecContext(t.Context(), "KILL CONNECTION USER bl_nopw")
	if err != nil {
		t.Fatalf("KILL CONNECTION USER bl_nopw: %v", err)
	}
	if n, _ := res.RowsAffected(); n < 1 {
		t.Errorf("KILL CONNECTION USER bl_nopw: %d rows affected, want its connections", n)
	}
	eventually(t, 5*time.Second, "bl_nopw's connection to end", func() bool {
		return queryValue(t, admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'bl_nopw'") == "0"
	})
	for _, q := range []string{"KILL QUERY USER " + s.User, "KILL QUERY USER '" + s.User + "'@'%'", "KILL USER `" + s.User + "`"} {
		_, err = appConn.ExecContext(t.Context(), q)
		wantSQLError(t, err, 1095, "HY000")
	}
	// Spellings whose account the proxy cannot be sure of are refused.
	for _, q := range []string{"KILL USER CURRENT_USER()", "KILL USER 'r\\oot'", "KILL USER /**/root"} {
		_, err = appConn.ExecContext(t.Context(), q)
		wantSQLError(t, err, 1235, "42000")
	}

	// Its connections are its own: gone from the server once it leaves.
	bl.Close()
	nopw.Close()
	eventually(t, 5*time.Second, "bl_user's backend connections to close", func() bool {
		return queryValue(t, admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER IN ('bl_user', 'bl_nopw')") == "0"
	})
}
