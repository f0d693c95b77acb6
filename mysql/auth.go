package mysql

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"errors"
)

// Bytes of AuthMoreData used by caching_sha2_password.
const (
	CachingSha2FastAuthOK       byte = 0x03 // fast_auth_success
	CachingSha2FullAuth         byte = 0x04 // perform_full_authentication
	CachingSha2RequestPublicKey byte = 0x02 // client asks for the RSA public key
)

// NewSalt returns a 20-byte scramble of printable, non-NUL bytes, as MySQL
// servers send.
func NewSalt() ([]byte, error) {
	s := make([]byte, 20)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	for i, b := range s {
		b &= 0x7f
		if b == 0 || b == '$' {
			b++
		}
		s[i] = b
	}
	return s, nil
}

// ScrambleNative computes the mysql_native_password response:
// SHA1(password) XOR SHA1(salt + SHA1(SHA1(password))).
func ScrambleNative(salt []byte, password string) []byte {
	if password == "" {
		return nil
	}
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	h := sha1.New()
	h.Write(salt)
	h.Write(h2[:])
	h3 := h.Sum(nil)
	for i := range h3 {
		h3[i] ^= h1[i]
	}
	return h3
}

// ScrambleCachingSha2 computes the caching_sha2_password fast-path response:
// SHA256(password) XOR SHA256(SHA256(SHA256(password)) + salt).
func ScrambleCachingSha2(salt []byte, password string) []byte {
	if password == "" {
		return nil
	}
	h1 := sha256.Sum256([]byte(password))
	h2 := sha256.Sum256(h1[:])
	h := sha256.New()
	h.Write(h2[:])
	h.Write(salt)
	h3 := h.Sum(nil)
	for i := range h3 {
		h3[i] ^= h1[i]
	}
	return h3
}

// CheckScramble compares a client's response with the expected one in
// constant time. An empty password expects an empty response.
func CheckScramble(got, want []byte) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	return subtle.ConstantTimeCompare(got, want) == 1
}

// xorSalt XORs the NUL-terminated password with the salt, repeating it.
func xorSalt(password, salt []byte) []byte {
	out := make([]byte, len(password)+1)
	copy(out, password)
	for i := range out {
		out[i] ^= salt[i%len(salt)]
	}
	return out
}

// EncryptPassword encrypts password for caching_sha2_password full
// authentication without TLS: RSA-OAEP (SHA-1) of password XOR salt.
func EncryptPassword(password string, salt []byte, pub *rsa.PublicKey) ([]byte, error) {
	if len(salt) == 0 {
		return nil, errors.New("mysql: empty salt for caching_sha2_password")
	}
	return rsa.EncryptOAEP(sha1.New(), rand.Reader, pub, xorSalt([]byte(password), salt), nil)
}

// DecryptPassword reverses EncryptPassword with the server's private key and
// returns the cleartext password.
func DecryptPassword(cipher, salt []byte, key *rsa.PrivateKey) (string, error) {
	plain, err := rsa.DecryptOAEP(sha1.New(), rand.Reader, key, cipher, nil)
	if err != nil {
		return "", err
	}
	if len(salt) == 0 {
		return "", errors.New("empty salt")
	}
	for i := range plain {
		plain[i] ^= salt[i%len(salt)]
	}
	// The client encrypts the password with its terminating NUL.
	if n := len(plain); n > 0 && plain[n-1] == 0 {
		plain = plain[:n-1]
	}
	return string(plain), nil
}

// MarshalPublicKey returns key's public half as a PEM "PUBLIC KEY" block,
// the form MySQL sends in AuthMoreData.
func MarshalPublicKey(key *rsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKey decodes a PEM public key sent by a server.
func ParsePublicKey(p []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(p)
	if block == nil {
		return nil, errors.New("mysql: server sent no PEM public key")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("mysql: server public key is not RSA")
	}
	return pub, nil
}
