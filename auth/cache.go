package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"net"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	lru "github.com/hashicorp/golang-lru/v2"
)

// ttlCache is a bounded LRU whose entries expire: the one place golang-lru is
// used. Expiry is checked on Get, not swept: golang-lru's expirable LRU runs a
// goroutine per cache that nothing can stop, and a configuration reload builds
// new caches, so every reload leaked three. An expired entry keeps its slot
// until Get meets it or the LRU evicts it, which the size bounds anyway.
type ttlCache[K comparable, V any] struct {
	lru *lru.Cache[K, expiring[V]]
	ttl time.Duration
}

type expiring[V any] struct {
	v     V
	until time.Time // monotonic: a wall-clock step changes nothing
}

// newTTLCache holds up to size entries for ttl each; size 0 disables it.
func newTTLCache[K comparable, V any](size int, ttl time.Duration) *ttlCache[K, V] {
	if size <= 0 {
		return nil
	}
	c, err := lru.New[K, expiring[V]](size)
	if err != nil {
		panic(err) // only for size <= 0, excluded above
	}
	return &ttlCache[K, V]{lru: c, ttl: ttl}
}

func (c *ttlCache[K, V]) Get(k K) (V, bool) {
	v, _, ok := c.getUntil(k)
	return v, ok
}

// getUntil is Get, and until when the entry holds.
func (c *ttlCache[K, V]) getUntil(k K) (V, time.Time, bool) {
	var zero V
	if c == nil {
		return zero, time.Time{}, false
	}
	e, ok := c.lru.Get(k)
	if !ok {
		return zero, time.Time{}, false
	}
	if !time.Now().Before(e.until) {
		c.lru.Remove(k)
		return zero, time.Time{}, false
	}
	return e.v, e.until, true
}

// Add keeps v for k and says until when (zero for a nil cache).
func (c *ttlCache[K, V]) Add(k K, v V) time.Time {
	if c == nil {
		return time.Time{}
	}
	until := time.Now().Add(c.ttl)
	c.lru.Add(k, expiring[V]{v: v, until: until})
	return until
}

func (c *ttlCache[K, V]) Remove(k K) {
	if c != nil {
		c.lru.Remove(k)
	}
}

func (c *ttlCache[K, V]) Purge() {
	if c != nil {
		c.lru.Purge()
	}
}

// Len counts entries held, expired ones not yet met included.
func (c *ttlCache[K, V]) Len() int {
	if c == nil {
		return 0
	}
	return c.lru.Len()
}

// Verified credentials (issue 17): a bearer token or client certificate
// already verified is not verified again while it is valid. A token's RS256
// signature costs most of a small request's CPU; the digest and lookup that
// replace it cost about a microsecond.
//
// What is remembered is only what a verification established: the subjects a
// credential names, until it expires. Groups are not (the directory has its own
// cache), nor anything about the request. The cache belongs to the
// Authenticator, which a configuration reload replaces whole (cmd/d1bridge
// newEngine builds a new one from the keys it reads again), so a token verified
// with keys no longer trusted is never believed by the new one.
//
// Failures are not remembered. A refusal is cheap when the token is malformed,
// and when it is not (a bad signature costs one RSA verification per key) a
// caller sending forgeries can vary them at will, so a cache of refusals would
// save nothing while letting anyone evict the verified credentials of others;
// and some refusals stop holding (a token not valid yet becomes valid). Only
// verified credentials enter, so only callers who hold one can fill the cache.

// Credential kinds, keeping the digests of tokens and certificates apart.
const (
	tokenCredential byte = iota + 1
	certCredential
)

// DefaultCredentialCacheSize is the number of verified credentials an
// Authenticator remembers unless told otherwise.
const DefaultCredentialCacheSize = 10_000

// credentialTTL is the longest any credential is believed without verifying it
// again, whatever its expiry: a token of a year is verified once a minute.
const credentialTTL = time.Minute

// credentialKey is a credential's kind and the SHA-256 of its bytes (the token
// string, or the certificate's DER): the credential itself is never kept.
type credentialKey struct {
	kind byte
	sum  [sha256.Size]byte
}

// key is cred's key in the cache.
func (cred credential) key() credentialKey {
	if cred.cert != nil {
		return certKey(cred.cert.Raw)
	}
	return tokenKey(cred.token)
}

func tokenKey(token string) credentialKey {
	// The token's bytes are hashed where they are: []byte(token) would copy
	// them (a token is about 700 bytes) on every request. Sum256 neither
	// writes nor keeps its argument.
	return credentialKey{kind: tokenCredential, sum: sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))}
}

func certKey(der []byte) credentialKey {
	return credentialKey{kind: certCredential, sum: sha256.Sum256(der)}
}

// verified is what a verification established.
type verified struct {
	subjects []string  // clipped: an append by a caller copies, never writes here
	until    time.Time // the credential's expiry (a token's exp, a certificate's NotAfter)
}

// credentialCache remembers verified credentials: at most size, each for at
// most ttl and never at or past its own expiry by now. nil remembers nothing.
type credentialCache struct {
	c   *ttlCache[credentialKey, verified]
	now func() time.Time
}

func newCredentialCache(size int, ttl time.Duration, now func() time.Time) *credentialCache {
	c := newTTLCache[credentialKey, verified](size, ttl)
	if c == nil {
		return nil
	}
	return &credentialCache{c: c, now: now}
}

// get gives what k was verified for, unless it has expired since, and until
// when the cache believes it without verifying it again (monotonic).
func (c *credentialCache) get(k credentialKey) (verified, time.Time, bool) {
	if c == nil {
		return verified{}, time.Time{}, false
	}
	v, fresh, ok := c.c.getUntil(k)
	if !ok {
		return verified{}, time.Time{}, false
	}
	if !c.now().Before(v.until) {
		c.c.Remove(k) // verified again from now on, which refuses it past the leeway
		return verified{}, time.Time{}, false
	}
	return v, fresh, true
}

// add remembers that k names subjects until until, and gives what it kept and
// until when the cache believes it (monotonic); ok is false when it kept
// nothing: a credential already past its expiry (accepted within the clock
// leeway) is not remembered.
func (c *credentialCache) add(k credentialKey, subjects []string, until time.Time) (v verified, fresh time.Time, ok bool) {
	if c == nil || until.IsZero() || !c.now().Before(until) {
		return verified{}, time.Time{}, false
	}
	v = verified{subjects: slices.Clip(subjects), until: until}
	return v, c.c.Add(k, v), true
}

// Connections remember the credential believed last on them (ConnContext): a
// client sends the same token on every request of a kept-alive connection,
// and a TLS connection has one client certificate; comparing it with the last
// one costs less than the digest and lookup that find it in the cache (the
// SHA-256 of a 650-byte token alone is 0.4 µs, a tenth of a describe's work
// in the engine, and a certificate is larger). The memo believes no more than
// the cache: the subjects, until the credential's expiry and the cache's TTL,
// and for the Authenticator that verified it only (a reload builds a new
// one). It holds the token itself as long as the connection lives, as
// net/http holds each request's; with the cache off (a negative size) there
// is no memo.

type connMemoKey struct{}

type connMemo struct{ last atomic.Pointer[memoEntry] }

// credential is what a request presented: a bearer token or a client
// certificate (the same *x509.Certificate on every request of a connection).
type credential struct {
	token string
	cert  *x509.Certificate
}

type memoEntry struct {
	a     *Authenticator
	cred  credential
	v     verified  // v.until is the credential's expiry, by a.now
	fresh time.Time // the cache's TTL, monotonic
}

// ConnContext is an http.Server's ConnContext: each connection gets a memo of
// the credential believed last on it.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connMemoKey{}, &connMemo{})
}

func memoOf(ctx context.Context) *connMemo {
	m, _ := ctx.Value(connMemoKey{}).(*connMemo)
	return m
}

// get gives what cred was verified for if it is the connection's last one, a
// verified and still believed it.
func (m *connMemo) get(a *Authenticator, cred credential) (verified, bool) {
	if m == nil {
		return verified{}, false
	}
	e := m.last.Load()
	if e == nil || e.a != a || e.cred != cred || !time.Now().Before(e.fresh) || !a.now().Before(e.v.until) {
		return verified{}, false
	}
	return e.v, true
}

func (m *connMemo) keep(a *Authenticator, cred credential, v verified, fresh time.Time) {
	if m != nil {
		m.last.Store(&memoEntry{a: a, cred: cred, v: v, fresh: fresh})
	}
}

func (c *credentialCache) len() int {
	if c == nil {
		return 0
	}
	return c.c.Len()
}
