package server

import (
	"crypto/rand"
	"crypto/rsa"
	"sync"

	"github.com/shardgate/shardgate/mysql"
)

// sha2Keys is the server side of caching_sha2_password (auth.go): the RSA
// key pair of full authentication, made on first use, and the passwords
// that passed full authentication, which the fast path then accepts. Safe
// for concurrent use.
type sha2Keys struct {
	keyOnce sync.Once
	rsaKey  *rsa.PrivateKey
	pubPEM  []byte
	keyErr  error

	sha2Mu    sync.Mutex
	sha2Cache map[string]string // user -> password that passed full authentication
}

// rsaKeys returns the key pair used by caching_sha2_password full
// authentication, generating it on first use.
func (k *sha2Keys) rsaKeys() (*rsa.PrivateKey, []byte, error) {
	k.keyOnce.Do(func() {
		k.rsaKey, k.keyErr = rsa.GenerateKey(rand.Reader, 2048)
		if k.keyErr == nil {
			k.pubPEM, k.keyErr = mysql.MarshalPublicKey(k.rsaKey)
		}
	})
	return k.rsaKey, k.pubPEM, k.keyErr
}

func (k *sha2Keys) sha2Cached(user, password string) bool {
	k.sha2Mu.Lock()
	defer k.sha2Mu.Unlock()
	pw, ok := k.sha2Cache[user]
	return ok && pw == password
}

func (k *sha2Keys) sha2Remember(user, password string) {
	k.sha2Mu.Lock()
	if k.sha2Cache == nil {
		k.sha2Cache = make(map[string]string)
	}
	k.sha2Cache[user] = password
	k.sha2Mu.Unlock()
}
