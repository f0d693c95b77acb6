package server_test

import (
	"errors"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/mysql"
)

func TestAuthNativePassword(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))

	db := openDB(t, p.dsn("", ""))
	if got := queryValue(t, db, "SELECT 40+2"); got != "42" {
		t.Fatalf("SELECT 40+2 = %q", got)
	}

	for _, tc := range []struct {
		name, user, password, msg string
	}{
		{"wrong password", appUser, appPassword + "x", "Access denied for user 'app'@'127.0.0.1' (using password: YES)"},
		{"unknown user", "nobody", appPassword, "Access denied for user 'nobody'@'127.0.0.1' (using password: YES)"},
		{"empty password", appUser, "", "Access denied for user 'app'@'127.0.0.1' (using password: NO)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, userDSN(tc.user, tc.password, p.addr, "", ""))
			me := wantSQLError(t, db.PingContext(t.Context()), mysql.ErAccessDenied, "28000")
			if me.Message != tc.msg {
				t.Errorf("message %q, want %q", me.Message, tc.msg)
			}
		})
	}

	// allowNativePasswords=false refuses the plugin the proxy announces,
	// in the driver, exactly as it refuses MariaDB's.
	t.Run("allowNativePasswords=false", func(t *testing.T) {
		for name, dsn := range map[string]string{
			"direct": directDSN(s, "", "allowNativePasswords=false"),
			"proxy":  p.dsn("", "allowNativePasswords=false"),
		} {
			err := openDB(t, dsn).PingContext(t.Context())
			if !errors.Is(err, gomysql.ErrNativePassword) {
				t.Errorf("%s: got %v, want %v", name, err, gomysql.ErrNativePassword)
			}
		}
	})

	// The handshake collation the driver sends becomes the session's.
	t.Run("collation", func(t *testing.T) {
		for _, coll := range []string{"latin1_swedish_ci", "utf8mb4_unicode_ci", "utf8mb4_bin"} {
			db := openDB(t, p.dsn("", "collation="+coll))
			if got := queryValue(t, db, "SELECT @@collation_connection"); got != coll {
				t.Errorf("collation=%s: @@collation_connection = %q", coll, got)
			}
		}
	})
}

// TestAuthCachingSha2 logs in with caching_sha2_password: go-sql-driver
// does full authentication with the RSA public key exchange (no TLS) the
// first time, and the proxy then takes the fast path. Raw probes check which
// path the proxy actually chose.
func TestAuthCachingSha2(t *testing.T) {
	s := backends(t)[0]
	cfg := newConfig(t, s)
	cfg.DefaultAuthPlugin = mysql.AuthCachingSha2Password
	p := startProxy(t, cfg)

	login := func(password, params string) error {
		db := openDB(t, userDSN(appUser, password, p.addr, "", params))
		defer db.Close()
		var n int
		if err := db.QueryRowContext(t.Context(), "SELECT 40+2").Scan(&n); err != nil {
			return err
		}
		if n != 42 {
			t.Fatalf("SELECT 40+2 = %d", n)
		}
		return nil
	}

	// Nothing is cached yet: the proxy asks for full authentication.
	if got, _ := sha2Probe(t, p.addr, appPassword); got != mysql.CachingSha2FullAuth {
		t.Fatalf("first probe: AuthMoreData %#x, want full authentication %#x", got, mysql.CachingSha2FullAuth)
	}
	// A wrong password on the full path.
	wantSQLError(t, login(appPassword+"x", ""), mysql.ErAccessDenied, "28000")
	if got, _ := sha2Probe(t, p.addr, appPassword); got != mysql.CachingSha2FullAuth {
		t.Fatalf("a failed full authentication filled the cache: AuthMoreData %#x", got)
	}
	// The right password on the full path, which fills the cache.
	if err := login(appPassword, ""); err != nil {
		t.Fatalf("full authentication: %v", err)
	}
	if got, _ := sha2Probe(t, p.addr, appPassword); got != mysql.CachingSha2FastAuthOK {
		t.Fatalf("probe after full authentication: AuthMoreData %#x, want fast auth OK %#x", got, mysql.CachingSha2FastAuthOK)
	}
	// The fast path: right and wrong passwords.
	if err := login(appPassword, ""); err != nil {
		t.Fatalf("fast authentication: %v", err)
	}
	wantSQLError(t, login(appPassword+"x", ""), mysql.ErAccessDenied, "28000")
	if _, e := sha2Probe(t, p.addr, appPassword+"x"); e == nil || e.Code != mysql.ErAccessDenied {
		t.Fatalf("fast path with a wrong scramble: %v, want 1045", e)
	}
	// An unknown user fails the same way.
	wantSQLError(t, openDB(t, userDSN("nobody", appPassword, p.addr, "", "")).PingContext(t.Context()), mysql.ErAccessDenied, "28000")
	// caching_sha2_password does not need native passwords.
	if err := login(appPassword, "allowNativePasswords=false"); err != nil {
		t.Fatalf("allowNativePasswords=false: %v", err)
	}
}

// sha2Probe starts a caching_sha2_password login with a raw client and
// reports the AuthMoreData status byte the proxy answered with (after
// checking the OK that follows a fast-auth success), or the ERR it sent.
func sha2Probe(t *testing.T, addr, password string) (byte, *mysql.SQLError) {
	t.Helper()
	r := dialRaw(t, addr)
	defer r.nc.Close()
	if r.hs.AuthPlugin != mysql.AuthCachingSha2Password {
		t.Fatalf("greeting announces %q, want %q", r.hs.AuthPlugin, mysql.AuthCachingSha2Password)
	}
	r.write(mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
		Capabilities: rawCaps,
		MaxPacket:    mysql.MaxPacketPayload,
		Charset:      45,
		User:         appUser,
		AuthResponse: mysql.ScrambleCachingSha2(r.hs.Salt, password),
		AuthPlugin:   mysql.AuthCachingSha2Password,
	}))
	pk := r.read()
	if len(pk) > 0 && pk[0] == mysql.ErrHeader {
		return 0, mysql.ParseErr(pk)
	}
	if len(pk) != 2 || pk[0] != mysql.AuthMoreData {
		t.Fatalf("got %s, want AuthMoreData", describe(pk))
	}
	if pk[1] == mysql.CachingSha2FastAuthOK {
		r.expectOK()
	}
	return pk[1], nil
}
