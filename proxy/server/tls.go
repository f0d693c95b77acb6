package server

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// certStore serves the certificate of tls_cert and tls_key, read again
// when either file changes, so a rotated certificate takes effect for new
// connections without a restart. A file that fails to load keeps the
// previous certificate in use (the failure is logged by the caller once).
type certStore struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modCert time.Time
	modKey  time.Time
	checked time.Time
}

func newCertStore(certFile, keyFile string) (*certStore, error) {
	s := &certStore{certFile: certFile, keyFile: keyFile}
	if _, err := s.get(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// get returns the current certificate, reloading the files at most once a
// second when their modification times changed.
func (s *certStore) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.cert != nil && now.Sub(s.checked) < time.Second {
		return s.cert, nil
	}
	s.checked = now
	ci, err1 := os.Stat(s.certFile)
	ki, err2 := os.Stat(s.keyFile)
	if err1 == nil && err2 == nil && s.cert != nil && ci.ModTime().Equal(s.modCert) && ki.ModTime().Equal(s.modKey) {
		return s.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		if s.cert != nil {
			return s.cert, nil
		}
		return nil, fmt.Errorf("tls_cert %s, tls_key %s: %w", s.certFile, s.keyFile, err)
	}
	s.cert = &cert
	if err1 == nil && err2 == nil {
		s.modCert, s.modKey = ci.ModTime(), ki.ModTime()
	}
	return s.cert, nil
}

// tlsConfig is the server side TLS configuration for clients.
func (s *certStore) tlsConfig() *tls.Config {
	return &tls.Config{GetCertificate: s.get, MinVersion: tls.VersionTLS12}
}

// prefixConn reads pending first, then from the connection: the bytes of
// a TLS ClientHello that arrived with the SSLRequest.
type prefixConn struct {
	net.Conn
	pending []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
