#!/bin/sh
# Writes the certificates the TLS tests use into $1, with the openssl command line tool:
#   ca.pem/ca.key            a test CA (ECDSA P-256)
#   server.pem/server.key    issued by it for DNS:localhost and IP:127.0.0.1
#   other.pem/other.key      issued by it for DNS:other.example (a name mismatch, a reload)
#   expired.pem/expired.key  issued by it for localhost, expired yesterday
#   self.pem/self.key        self-signed for localhost
#   client.pem/client.key    issued by it for a client (CN=test-client)
set -eu
cd "$1"
ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.pem -subj /CN=cogwheel-test-ca -days 2 2>/dev/null
issue() {  # name cn san days
  openssl req -new $ec -keyout "$1.key" -out "$1.csr" -subj "/CN=$2" 2>/dev/null
  printf 'subjectAltName=%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$4" -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}
issue server localhost DNS:localhost,IP:127.0.0.1 2
issue other other.example DNS:other.example 2
issue expired localhost DNS:localhost,IP:127.0.0.1 -1
issue client test-client DNS:test-client 2
openssl req -x509 $ec -keyout self.key -out self.pem -subj /CN=localhost -days 2 \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
