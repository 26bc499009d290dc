package main

// The CA certificates of golang.org/x/crypto/x509roots/fallback, a pinned
// module: crypto/x509 uses them where the system has none, as in
// floodgate's container image, which has no certificate file of its own.
// So rediss:// and TLS on a bare image verify against the same roots,
// whatever host built it.
import _ "golang.org/x/crypto/x509roots/fallback"
