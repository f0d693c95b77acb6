package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a server certificate for 127.0.0.1 and localhost signed by
// ca to certFile and keyFile.
func (ca *testCA) issue(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "shardgate test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// registerTLS registers a go-sql-driver TLS configuration that trusts ca.
func registerTLS(t *testing.T, name string, ca *testCA) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	if err := gomysql.RegisterTLSConfig(name, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
}

// TestTLSClients: with tls_cert and tls_key, clients may log in over TLS
// (go-sql-driver tls=..., the mariadb command-line client --ssl), with
// mysql_native_password and with caching_sha2_password's full
// authentication (the password sent as it is, inside TLS). A client that
// trusts another CA is refused by its own side; require_secure_transport
// refuses clients without TLS (1045); a rotated certificate is served to
// new connections without a restart.
func TestTLSClients(t *testing.T) {
	s := backends(t)[0]
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca, other := newTestCA(t, "shardgate test CA"), newTestCA(t, "another CA")
	ca.issue(t, certFile, keyFile)
	caFile, otherFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other.pem")
	os.WriteFile(caFile, ca.pem, 0o600)
	os.WriteFile(otherFile, other.pem, 0o600)
	registerTLS(t, "sg-ca", ca)
	registerTLS(t, "sg-other", other)

	for _, plugin := range []string{mysql.AuthNativePassword, mysql.AuthCachingSha2Password} {
		t.Run(plugin, func(t *testing.T) {
			cfg := newConfig(t, s)
			cfg.TLSCert, cfg.TLSKey = certFile, keyFile
			cfg.DefaultAuthPlugin = plugin
			p := startProxy(t, cfg)
			c := conn(t, openDB(t, p.dsn("", "tls=sg-ca")))
			if got := queryValue(t, c, "SELECT 1"); got != "1" {
				t.Errorf("over TLS: %s", got)
			}
			c.Close()
			if _, err := openDB(t, p.dsn("", "tls=sg-other")).Exec("SELECT 1"); err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("a client trusting another CA: %v, want a certificate error", err)
			}
			// Without TLS, still allowed here.
			if got := queryValue(t, openDB(t, p.dsn("", "")), "SELECT 2"); got != "2" {
				t.Errorf("without TLS: %s", got)
			}
		})
	}

	cfg := newConfig(t, s)
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	cfg.RequireSecureTransport = true
	p := startProxy(t, cfg)
	_, err := openDB(t, p.dsn("", "")).Exec("SELECT 1")
	wantSQLError(t, err, mysql.ErAccessDenied, "28000")
	if got := queryValue(t, openDB(t, p.dsn("", "tls=sg-ca")), "SELECT 3"); got != "3" {
		t.Errorf("over TLS with require_secure_transport: %s", got)
	}

	// The mariadb command-line client.
	host, port, _ := net.SplitHostPort(p.addr)
	cli := func(args ...string) (string, error) {
		base := []string{"--protocol=tcp", "-h", host, "-P", port, "-u", appUser, "-p" + appPassword, "-N", "-B", "-e", "SELECT 40+2"}
		out, err := exec.Command("mariadb", append(base, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if _, err := exec.LookPath("mariadb"); err != nil {
		t.Fatal("the mariadb client is not installed")
	}
	if out, err := cli("--ssl", "--ssl-ca="+caFile, "--ssl-verify-server-cert"); err != nil || out != "42" {
		t.Errorf("mariadb --ssl with the CA: %q, %v", out, err)
	}
	if out, err := cli("--ssl", "--ssl-ca="+otherFile, "--ssl-verify-server-cert"); err == nil {
		t.Errorf("mariadb --ssl with another CA: %q, want a refusal", out)
	}
	if out, err := cli("--skip-ssl"); err == nil || !strings.Contains(out, "1045") {
		t.Errorf("mariadb --skip-ssl under require_secure_transport: %q, %v", out, err)
	}

	// Rotation: a certificate from the other CA, picked up without a
	// restart.
	time.Sleep(1100 * time.Millisecond) // a modification time the store sees as new
	other.issue(t, certFile, keyFile)
	eventually(t, 5*time.Second, "the rotated certificate", func() bool {
		_, err := openDB(t, p.dsn("", "tls=sg-other")).Exec("SELECT 1")
		return err == nil
	})
	if _, err := openDB(t, p.dsn("", "tls=sg-ca")).Exec("SELECT 1"); err == nil {
		t.Errorf("the old CA still verifies after the rotation")
	}
}

// TestTLSBackends: with tls: true and tls_ca on a node, every connection
// the proxy opens to it runs over TLS with the certificate verified
// (Ssl_cipher on the backend session is set); a CA that did not sign
// the server's certificate, or a server name it does not carry, is
// refused and the node is reported down.
func TestTLSBackends(t *testing.T) {
	s := backends(t)[0]
	dir := t.TempDir()
	otherFile := filepath.Join(dir, "other.pem")
	os.WriteFile(otherFile, newTestCA(t, "another CA").pem, 0o600)

	cfg := newConfig(t, s)
	cfg.Nodes[0].TLS, cfg.Nodes[0].TLSCA = true, s.CAFile
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("", ""))
	if got := queryValue(t, db, "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'SSL_CIPHER'"); got == "" {
		t.Errorf("the backend session has no TLS cipher")
	}

	for _, bad := range []struct {
		name string
		edit func(n *config.Node)
	}{
		{"a CA that did not sign it", func(n *config.Node) { n.TLSCA = otherFile }},
		{"a name it does not carry", func(n *config.Node) { n.TLSServerName = "db.example.com" }},
	} {
		t.Run(bad.name, func(t *testing.T) {
			cfg := newConfig(t, s)
			cfg.Nodes[0].TLS, cfg.Nodes[0].TLSCA = true, s.CAFile
			bad.edit(&cfg.Nodes[0])
			p := startProxy(t, cfg)
			_, err := openDB(t, p.dsn("", "")).Exec("SELECT 1")
			if err == nil {
				t.Fatal("the proxy used a backend whose certificate does not verify")
			}
			if !strings.Contains(err.Error(), "certificate") && !strings.Contains(err.Error(), "down") {
				t.Errorf("error %v does not say why", err)
			}
		})
	}
}
