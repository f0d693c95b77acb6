package mysql

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
)

// testKey is one 2048-bit RSA key shared by the whole test binary:
// generating it takes a noticeable fraction of a second.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// seqSalt is the scramble 0x01..0x14.
var seqSalt = []byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14")

func xorBytes(a, b []byte) []byte {
	out := make([]byte, len(a))
	for i := range a {
		out[i] = a[i] ^ b[i]
	}
	return out
}

// nativeScramble is SHA1(pw) XOR SHA1(salt + SHA1(SHA1(pw))), written out
// independently of the package.
func nativeScramble(salt []byte, pw string) []byte {
	h1 := sha1.Sum([]byte(pw))
	h2 := sha1.Sum(h1[:])
	h3 := sha1.Sum(append(append([]byte(nil), salt...), h2[:]...))
	return xorBytes(h1[:], h3[:])
}

// sha2Scramble is SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + salt).
func sha2Scramble(salt []byte, pw string) []byte {
	h1 := sha256.Sum256([]byte(pw))
	h2 := sha256.Sum256(h1[:])
	h3 := sha256.Sum256(append(h2[:], salt...))
	return xorBytes(h1[:], h3[:])
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestScrambleNative(t *testing.T) {
	// Computed with Python's hashlib for password "secret" and salt 0x01..0x14.
	known := mustHex("b32bb3a583e1340c0a1108d58b1be49781ad8c2f")
	if got := ScrambleNative(seqSalt, "secret"); !bytes.Equal(got, known) {
		t.Errorf("ScrambleNative(secret) = %x, want %x", got, known)
	}
	for _, pw := range []string{"secret", "p", "pässwörd", strings.Repeat("long", 100)} {
		for _, salt := range [][]byte{seqSalt, testSalt} {
			if got, want := ScrambleNative(salt, pw), nativeScramble(salt, pw); !bytes.Equal(got, want) {
				t.Errorf("ScrambleNative(%q, %q) = %x, want %x", salt, pw, got, want)
			}
		}
	}
	if got := ScrambleNative(seqSalt, ""); got != nil {
		t.Errorf("ScrambleNative with empty password = %x, want nil", got)
	}
}

func TestScrambleCachingSha2(t *testing.T) {
	known := mustHex("746ebe205d56a0707acb3e796e834e0dd7b1d61743b26bd5202c7a623230c7c9")
	if got := ScrambleCachingSha2(seqSalt, "secret"); !bytes.Equal(got, known) {
		t.Errorf("ScrambleCachingSha2(secret) = %x, want %x", got, known)
	}
	for _, pw := range []string{"secret", "p", "pässwörd", strings.Repeat("long", 100)} {
		for _, salt := range [][]byte{seqSalt, testSalt} {
			if got, want := ScrambleCachingSha2(salt, pw), sha2Scramble(salt, pw); !bytes.Equal(got, want) {
				t.Errorf("ScrambleCachingSha2(%q, %q) = %x, want %x", salt, pw, got, want)
			}
		}
	}
	if got := ScrambleCachingSha2(seqSalt, ""); got != nil {
		t.Errorf("ScrambleCachingSha2 with empty password = %x, want nil", got)
	}
}

func TestCheckScramble(t *testing.T) {
	want := ScrambleNative(testSalt, "secret")
	other := ScrambleNative(testSalt, "Secret")
	tests := []struct {
		name      string
		got, want []byte
		ok        bool
	}{
		{"match", bytes.Clone(want), want, true},
		{"wrong password", other, want, false},
		{"short", want[:19], want, false},
		{"long", append(bytes.Clone(want), 0), want, false},
		{"empty response for a password", nil, want, false},
		{"empty password, empty response", nil, nil, true},
		{"empty password, zero-length response", []byte{}, nil, true},
		{"empty password, some response", want, nil, false},
	}
	for _, tc := range tests {
		if got := CheckScramble(tc.got, tc.want); got != tc.ok {
			t.Errorf("%s: CheckScramble = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestEncryptPassword(t *testing.T) {
	key := testKey()
	for _, pw := range []string{"", "secret", "a password longer than the twenty-byte salt", strings.Repeat("x", 213)} {
		enc, err := EncryptPassword(pw, testSalt, &key.PublicKey)
		if err != nil {
			t.Fatalf("EncryptPassword(len %d): %v", len(pw), err)
		}
		if len(enc) != 256 {
			t.Errorf("EncryptPassword(len %d) = %d bytes, want 256", len(pw), len(enc))
		}
		got, err := DecryptPassword(enc, testSalt, key)
		if err != nil || got != pw {
			t.Errorf("DecryptPassword(EncryptPassword(%q)) = %q, %v", pw, got, err)
		}
		// The same ciphertext with another salt gives another password.
		if got, err := DecryptPassword(enc, seqSalt, key); err == nil && got == pw && pw != "" {
			t.Errorf("DecryptPassword with the wrong salt recovered the password")
		}
	}

	// Check the exact plaintext against an independent implementation:
	// OAEP(SHA-1) of (password + NUL) XOR salt, salt repeated.
	enc, err := EncryptPassword("secret", seqSalt, &key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rsa.DecryptOAEP(sha1.New(), nil, key, enc, nil)
	if err != nil {
		t.Fatalf("DecryptOAEP: %v", err)
	}
	if want := xorBytes([]byte("secret\x00"), seqSalt); !bytes.Equal(plain, want) {
		t.Errorf("plaintext = % x, want % x", plain, want)
	}

	if _, err := DecryptPassword([]byte("not a ciphertext"), testSalt, key); err == nil {
		t.Error("DecryptPassword(garbage) succeeded")
	}
	if _, err := EncryptPassword(strings.Repeat("x", 214), testSalt, &key.PublicKey); err == nil {
		t.Error("EncryptPassword of a password too long for the key succeeded")
	}
}

// TestEncryptPasswordEmptySalt: a backend may switch to
// caching_sha2_password with an empty scramble; that must be an error, not
// a division by zero.
func TestEncryptPasswordEmptySalt(t *testing.T) {
	key := testKey()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("EncryptPassword with an empty salt panicked: %v", r)
		}
	}()
	if _, err := EncryptPassword("secret", nil, &key.PublicKey); err == nil {
		t.Error("EncryptPassword with an empty salt succeeded")
	}
}

func TestPublicKey(t *testing.T) {
	key := testKey()
	p, err := MarshalPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(p, []byte("-----BEGIN PUBLIC KEY-----\n")) || !bytes.HasSuffix(p, []byte("-----END PUBLIC KEY-----\n")) {
		t.Errorf("MarshalPublicKey = %q, want a PEM PUBLIC KEY block", p)
	}
	pub, err := ParsePublicKey(p)
	if err != nil {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	if !pub.Equal(&key.PublicKey) {
		t.Error("ParsePublicKey(MarshalPublicKey(k)) is not k's public key")
	}
	// Servers send the key inside AuthMoreData, sometimes with a trailing
	// NUL.
	if pub, err := ParsePublicKey(append(bytes.Clone(p), 0)); err != nil || !pub.Equal(&key.PublicKey) {
		t.Errorf("ParsePublicKey with trailing NUL: %v", err)
	}

	for _, bad := range [][]byte{
		nil,
		[]byte("no pem here"),
		[]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"),
	} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("ParsePublicKey(%q) succeeded", bad)
		}
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(edPub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePublicKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); err == nil {
		t.Error("ParsePublicKey accepted an Ed25519 key")
	}
}

func TestNewSalt(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := NewSalt()
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 20 {
			t.Fatalf("NewSalt = %d bytes, want 20", len(s))
		}
		for i, b := range s {
			if b == 0 || b == '$' || b > 0x7f {
				t.Fatalf("NewSalt byte %d = %#x; want 1..127 without '$'", i, b)
			}
		}
		if seen[string(s)] {
			t.Fatalf("NewSalt repeated %q", s)
		}
		seen[string(s)] = true
	}
}
