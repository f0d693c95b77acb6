#!/usr/bin/env bash
# scripts/dev-cert.sh DIR: a local certificate authority and a server certificate for 127.0.0.1 and localhost in
# DIR (ca.pem, cert.pem, key.pem), for `make run`'s TLS: clients verify with DIR/ca.pem
# (mariadb --ssl --ssl-ca=DIR/ca.pem --ssl-verify-server-cert). Existing files are kept. For testing only: use
# certificates from your own CA in production (tls_cert, tls_key in ks.yaml).
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
cd "$dir"
[[ -s cert.pem && -s key.pem && -s ca.pem ]] && exit 0
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 -subj "/CN=shardgate local CA" \
	-keyout ca-key.pem -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=shardgate local" \
	-keyout key.pem -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 825 -extfile ext.cnf \
	-out cert.pem 2>/dev/null
rm -f server.csr ext.cnf ca.srl
chmod 600 key.pem ca-key.pem
echo "dev-cert: wrote $dir/ca.pem, $dir/cert.pem, $dir/key.pem"
