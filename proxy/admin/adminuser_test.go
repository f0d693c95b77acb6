package admin

import (
	"errors"
	"testing"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// TestSQLNotAdmin: admin SQL by a user other than admin_user is refused
// with 1227/42000, and the message says what to do: with no admin_user,
// which key to set in which file and how to make it count; with one, to
// connect as that user (not named).
func TestSQLNotAdmin(t *testing.T) {
	const head = "Access denied; you need to be the proxy's admin_user to run shardgate's admin SQL"
	for _, c := range []struct {
		admin, user, path, want string
	}{
		{"", "app", "/etc/shardgate/ks.yaml", head + ", and none is set: add `admin_user: <name>` (a user of user_list) at the top level of /etc/shardgate/ks.yaml, then reload it (SIGHUP or POST /admin/reload) or restart the proxy"},
		{"", "root", "", head + ", and none is set: add `admin_user: <name>` (a user of user_list) at the top level of the proxy's configuration file (ks.yaml), then reload it (SIGHUP or POST /admin/reload) or restart the proxy"},
		{"root", "app", "etc/ks.yaml", head + ": connect as the user that admin_user names in etc/ks.yaml"},
	} {
		tc := newTestConsole(t, func(cfg *config.Config) { cfg.AdminUser = c.admin })
		tc.env.ConfigPath = c.path
		for _, sql := range []string{"show workflow status", "show proxy config"} {
			_, handled, err := tc.SQL(Session{User: c.user, Log: zap.NewNop()}, sql, "SHOW")
			var se *mysql.SQLError
			if !handled || !errors.As(err, &se) {
				t.Fatalf("%s by %s (admin_user %q): handled %v, %v", sql, c.user, c.admin, handled, err)
			}
			if se.Code != 1227 || se.State != "42000" || se.Message != c.want {
				t.Errorf("%s by %s (admin_user %q):\n got %d %s %q\nwant 1227 42000 %q", sql, c.user, c.admin, se.Code, se.State, se.Message, c.want)
			}
		}
	}
}
