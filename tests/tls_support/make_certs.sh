#!/usr/bin/env bash
# make_certs.sh DIR CA_NAME: a test CA (DIR/ca.crt, ca.key) and a server and a client
# certificate it signs for 127.0.0.1 / localhost (DIR/server.crt|key, DIR/client.crt|key),
# made with the openssl CLI. Used by tests/clients/run.sh and bench/tls.sh; the Rust tests
# make theirs with rcgen (tests/tls_support/mod.rs).
set -euo pipefail
dir=$1
ca=$2
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=$ca" -keyout ca.key -out ca.crt 2>/dev/null
for who in server client; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$who" \
    -keyout "$who.key" -out "$who.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$who.ext"
  openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile "$who.ext" -out "$who.crt" 2>/dev/null
done
