#!/bin/sh
# Test certificates for the cluster's mutual TLS, made at run time with openssl (nothing
# secret is committed): DIR/ca.pem (a CA), DIR/member.pem + member.key (signed by it, valid
# for 127.0.0.1 and localhost), DIR/rogue-ca.pem and DIR/rogue.pem + rogue.key (a member of
# another CA). EC P-256 keys: quick to make.
set -eu
d=$1
mkdir -p "$d"
cd "$d"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # ca NAME
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=hypic test $1" 2>/dev/null
}
member() {  # member NAME CA
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=hypic test $1" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -out "$1.pem" -days 2 \
    -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca
member member ca
ca rogue-ca
member rogue rogue-ca
