package main_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessSIGHUP: SIGHUP reloads ks.yaml in place. A client connected
// before goes on; a user the new file adds can log in; a file that does not
// parse is refused (logged), and the proxy keeps serving with what it had.
// The proxy runs as make run runs it: the file as the user edits it, with
// a certificate given on the command line, which a reload keeps (else the
// reload would be refused: tls_cert changed).
func TestProcessSIGHUP(t *testing.T) {
	cert, key := selfSignedCert(t)
	p := startProxy(t, settings{nodes: servers(t)[:1], args: []string{"-tls-cert", cert, "-tls-key", key}})
	before := p.openDB(t, "")
	before.SetMaxOpenConns(1)
	if _, err := before.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(p.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	added := strings.Replace(string(orig), "nodes:\n", fmt.Sprintf("  - user: second\n    password: %q\nnodes:\n", appPassword), 1) +
		"  - user: second\n    nodes: [node1]\n    default: node1\n"
	secondDSN := strings.Replace(p.dsn(""), appUser+":", "second:", 1)
	if db, _ := sql.Open("mysql", secondDSN); db.Ping() == nil {
		t.Fatal("user second could log in before the reload")
	}
	reload := func(text string) {
		if err := os.WriteFile(p.cfgPath, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	reload(added)
	second, _ := sql.Open("mysql", secondDSN)
	defer second.Close()
	deadline := time.Now().Add(5 * time.Second)
	for second.Ping() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("user second cannot log in 5 s after SIGHUP\n%s", tail(p.logPath, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	reload(added + "nodes: [\n")
	deadline = time.Now().Add(5 * time.Second)
	for !strings.Contains(tail(p.logPath, 4000), "reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged for a file that does not parse\n%s", tail(p.logPath, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p.exited() {
		t.Fatal("the proxy exited on a bad file")
	}
	for _, db := range []*sql.DB{before, second} {
		if _, err := db.Exec("SELECT 1"); err != nil {
			t.Errorf("after the refused reload: %v", err)
		}
	}
}

// selfSignedCert writes a self-signed certificate for 127.0.0.1 and its
// key (PEM) into a temporary directory.
func selfSignedCert(t *testing.T) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shardgate test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
