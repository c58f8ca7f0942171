package auth

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// fakeClock sets a's clock (the cache's and the token validator's) to a time
// the test moves; it returns the setter.
func fakeClock(a *Authenticator, start time.Time) func(time.Time) {
	now := start
	a.now = func() time.Time { return now }
	return func(t time.Time) { now = t }
}

func session1(t *testing.T, a *Authenticator, token string) *adapter.Session {
	t.Helper()
	s, err := a.Session(bearerRequest(token))
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	return s
}

// TestCredentialCacheHit: a token verified once is believed again without
// verifying it (the test takes the key away to show it), and gives the same
// session; each request still gets its own session to change.
func TestCredentialCacheHit(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	token := signRS256(t, cnKey(), validClaims(aliceDN))
	first := session1(t, a, token)
	if first.Subject != aliceDN || first.CredentialError != "" {
		t.Fatalf("first session %q (%q), want %q", first.Subject, first.CredentialError, aliceDN)
	}
	if n := a.creds.len(); n != 1 {
		t.Fatalf("%d credentials remembered after one verification, want 1", n)
	}
	a.tokenKeys = []*rsa.PublicKey{&otherKey().PublicKey} // a verification now would refuse it
	second := session1(t, a, token)
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("the cached session differs:\n%+v\n%+v", first, second)
	}
	second.Subjects = append(second.Subjects[:1], "mallory")
	if third := session1(t, a, token); !reflect.DeepEqual(first, third) {
		t.Fatalf("changing one session changed the next:\n%+v\n%+v", first, third)
	}
	// Another token is verified, and refused with the key it would need gone.
	if s := session1(t, a, signRS256(t, cnKey(), validClaims(aliceDN+"2"))); s.CredentialError == "" {
		t.Fatalf("a token never seen was not verified: %q", s.Subject)
	}
}

// TestCredentialCacheExpiry: a cached token is believed no later than its exp:
// past it, it is verified again (accepted within the leeway, then not
// remembered), and past the leeway it is refused as expired.
func TestCredentialCacheExpiry(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	start := time.Now()
	set := fakeClock(a, start)
	claims := validClaims(aliceDN)
	exp := start.Add(2 * time.Second).Truncate(time.Second)
	claims["exp"] = exp.Unix()
	token := signRS256(t, cnKey(), claims)
	if s := session1(t, a, token); s.Subject != aliceDN {
		t.Fatalf("fresh token: %q (%q)", s.Subject, s.CredentialError)
	}
	if a.creds.len() != 1 {
		t.Fatal("the verified token was not remembered")
	}

	set(exp.Add(time.Second)) // past exp, within the 30 s leeway
	if s := session1(t, a, token); s.Subject != aliceDN {
		t.Fatalf("within the leeway: %q (%q)", s.Subject, s.CredentialError)
	}
	if n := a.creds.len(); n != 0 {
		t.Fatalf("%d credentials remembered past the token's exp, want 0", n)
	}

	set(exp.Add(a.leeway + time.Second))
	s := session1(t, a, token)
	if s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "expired") {
		t.Fatalf("past exp and leeway, a token cached before gave %q (%q), want refused as expired", s.Subject, s.CredentialError)
	}
}

// TestCredentialCacheCeiling: a long-lived token is verified again once the
// cache's own ceiling has passed (here 1 s instead of credentialTTL: long
// enough for the second request to come within it on a loaded machine).
func TestCredentialCacheCeiling(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	a.creds = newCredentialCache(10, time.Second, time.Now)
	token := signRS256(t, cnKey(), validClaims(aliceDN))
	session1(t, a, token)
	a.tokenKeys = []*rsa.PublicKey{&otherKey().PublicKey}
	if s := session1(t, a, token); s.Subject != aliceDN {
		t.Fatalf("within the ceiling: %q (%q)", s.Subject, s.CredentialError)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(200 * time.Millisecond)
		if s := session1(t, a, token); s.CredentialError != "" {
			return // verified again, with a key that refuses it
		}
		if time.Now().After(deadline) {
			t.Fatal("the token is still believed from the cache long past its ceiling")
		}
	}
}

// TestCredentialCacheFailuresNotCached: a refusal is not remembered, so a token
// not valid yet is accepted once it is.
func TestCredentialCacheFailuresNotCached(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	start := time.Now()
	set := fakeClock(a, start)
	claims := validClaims(aliceDN)
	claims["nbf"] = start.Add(time.Hour).Unix()
	token := signRS256(t, cnKey(), claims)
	if s := session1(t, a, token); !strings.Contains(s.CredentialError, "not valid yet") {
		t.Fatalf("before nbf: %q (%q), want refused", s.Subject, s.CredentialError)
	}
	if n := a.creds.len(); n != 0 {
		t.Fatalf("a refusal was remembered (%d entries)", n)
	}
	set(start.Add(time.Hour + time.Second))
	if s := session1(t, a, token); s.Subject != aliceDN {
		t.Fatalf("after nbf: %q (%q), want %q", s.Subject, s.CredentialError, aliceDN)
	}
}

// TestCredentialCacheReload: a reload builds a new Authenticator from the keys
// it reads again (cmd/d1bridge newEngine); a token the old one verified and
// remembers is refused by the new one when its key is no longer trusted.
func TestCredentialCacheReload(t *testing.T) {
	t.Parallel()
	before := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	token := signRS256(t, cnKey(), validClaims(aliceDN))
	if s := session1(t, before, token); s.Subject != aliceDN {
		t.Fatalf("before the reload: %q (%q)", s.Subject, s.CredentialError)
	}
	after := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&otherKey().PublicKey}})
	s := session1(t, after, token)
	if s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "signature") {
		t.Fatalf("after a reload with other keys: %q (%q), want refused", s.Subject, s.CredentialError)
	}
	// The engine being replaced finishes its requests with what it verified.
	if s := session1(t, before, token); s.Subject != aliceDN {
		t.Fatalf("the replaced authenticator: %q (%q)", s.Subject, s.CredentialError)
	}
}

// TestCertificateAuthorityDroppedOnReload: a reload that no longer trusts a
// client certificate's authority ends its session on a connection opened
// before (the handshake, which verified it, is not repeated); the authority
// still trusted keeps it.
func TestCertificateAuthorityDroppedOnReload(t *testing.T) {
	t.Parallel()
	ca, other := newCA(t, "Test DataONE CA"), newCA(t, "Another CA")
	cert := ca.issue(t, cilogonSubject(t, "Jane Doe"))
	conn := ConnContext(context.Background(), nil)
	on := func(a *Authenticator) *adapter.Session {
		t.Helper()
		r := request().WithContext(conn)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		s, err := a.Session(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pool := func(cas ...*testCA) *x509.CertPool {
		p := x509.NewCertPool()
		for _, c := range cas {
			p.AddCert(c.cert)
		}
		return p
	}
	if s := on(NewAuthenticator(AuthenticatorOptions{ClientCAs: pool(ca, other)})); s.Subject != janeDN {
		t.Fatalf("with its authority trusted: %q (%q), want %q", s.Subject, s.CredentialError, janeDN)
	}
	for name, p := range map[string]*x509.CertPool{"without its authority": pool(other), "without tls.clientCAs": pool()} {
		if s := on(NewAuthenticator(AuthenticatorOptions{ClientCAs: p})); s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "no longer trusted") {
			t.Errorf("after a reload %s: %q (%q), want public, no longer trusted", name, s.Subject, s.CredentialError)
		}
	}
}

// TestUsableSubjects: a credential whose primary subject is empty or holds a
// control character is refused; such a subject among the others (a
// SubjectInfo's groups) is dropped, which can only take rights away.
func TestUsableSubjects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want []string
		refused  bool
	}{
		{[]string{janeDN, orcid, labGroup}, []string{janeDN, orcid, labGroup}, false},
		{[]string{"  "}, nil, true},
		{[]string{"CN=Jane\x00cn=lab"}, nil, true},
		{[]string{janeDN, "cn=lab\n", "", orcid, "\u0085"}, []string{janeDN, orcid}, false},
	} {
		got, err := usableSubjects(tc.in)
		if (err != nil) != tc.refused || !slices.Equal(got, tc.want) {
			t.Errorf("usableSubjects(%q) = %q, %v; want %q, refused %v", tc.in, got, err, tc.want, tc.refused)
		}
	}
}

// TestCredentialCacheBounded: no more than the configured number of
// credentials are remembered; a negative size remembers none.
func TestCredentialCacheBounded(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}, CredentialCacheSize: 3})
	off := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}, CredentialCacheSize: -1})
	for i := range 5 {
		token := signRS256(t, cnKey(), validClaims(fmt.Sprintf("%s-%d", aliceDN, i)))
		for _, x := range []*Authenticator{a, off} {
			if s := session1(t, x, token); s.CredentialError != "" {
				t.Fatal(s.CredentialError)
			}
		}
	}
	if n := a.creds.len(); n != 3 {
		t.Errorf("%d credentials remembered with a size of 3", n)
	}
	if off.creds != nil || off.creds.len() != 0 {
		t.Errorf("a negative size still remembers credentials")
	}
}

// TestCredentialCacheCertificate: a client certificate's subjects are read once
// and remembered until its NotAfter, not past it.
func TestCredentialCacheCertificate(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "Test DataONE CA")
	a := NewAuthenticator(AuthenticatorOptions{})
	set := fakeClock(a, time.Now())
	cert := ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, janeSubjectInfo, false))
	withCert := func() *adapter.Session {
		r := request()
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert, ca.cert}}
		s, err := a.Session(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := withCert()
	if first.Subject != janeDN || a.creds.len() != 1 {
		t.Fatalf("first: %q, %d remembered", first.Subject, a.creds.len())
	}
	if second := withCert(); !reflect.DeepEqual(first, second) {
		t.Fatalf("the cached session differs:\n%+v\n%+v", first, second)
	}
	if first.Expires != cert.NotAfter {
		t.Errorf("the session expires at %v, want the certificate's NotAfter %v", first.Expires, cert.NotAfter)
	}
	set(cert.NotAfter)
	if s := withCert(); s.Subject != janeDN { // within the clock leeway
		t.Fatalf("at its NotAfter the certificate gave %q (%q), want %q", s.Subject, s.CredentialError, janeDN)
	}
	if n := a.creds.len(); n != 0 {
		t.Fatalf("a certificate is remembered at its NotAfter (%d entries)", n)
	}
	for _, at := range []time.Time{cert.NotAfter.Add(time.Minute), cert.NotBefore.Add(-time.Minute)} {
		set(at)
		if s := withCert(); s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "client certificate") {
			t.Errorf("at %v, outside the certificate's validity, the session is %q (%q), want public with the reason", at, s.Subject, s.CredentialError)
		}
	}
}

// TestConnectionRemembersItsCertificate: a client certificate's subjects are
// believed again on its connection without the cache (after a purge, a
// request on it leaves the cache empty), on no other connection, and not past
// its NotAfter.
func TestConnectionRemembersItsCertificate(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "Test DataONE CA")
	a := NewAuthenticator(AuthenticatorOptions{})
	set := fakeClock(a, time.Now())
	cert := ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, janeSubjectInfo, false))
	presented := cert
	on := func(ctx context.Context) *adapter.Session {
		t.Helper()
		r := request().WithContext(ctx)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{presented, ca.cert}}
		s, err := a.Session(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	conn := ConnContext(context.Background(), nil)
	first := on(conn)
	a.creds.c.Purge()
	if second := on(conn); !reflect.DeepEqual(first, second) || a.creds.len() != 0 {
		t.Fatalf("the same certificate on its connection: %+v, %d in the cache; want %+v from the memo, none", second, a.creds.len(), first)
	}
	if other := on(ConnContext(context.Background(), nil)); !reflect.DeepEqual(first, other) || a.creds.len() != 1 {
		t.Fatalf("another connection: %+v, %d in the cache; want it read again and cached", other, a.creds.len())
	}
	presented = ca.issue(t, cilogonSubject(t, "Bob Roe"))
	if s := on(conn); s.Subject == first.Subject {
		t.Fatalf("another certificate on the connection was taken for the last one: %q", s.Subject)
	}
	set(cert.NotAfter)
	if _, ok := memoOf(conn).get(a, credential{cert: cert}); ok {
		t.Fatalf("the memo answers for a certificate at its NotAfter")
	}
	// A connection kept alive past the certificate's end is no longer its.
	presented = cert
	set(cert.NotAfter.Add(time.Minute))
	if s := on(conn); s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "expired") {
		t.Fatalf("a kept-alive connection past its certificate's NotAfter is %q (%q), want public, expired", s.Subject, s.CredentialError)
	}
}

// TestConnectionRemembersItsToken: a token verified on a connection is believed
// again on it without the cache (the test purges the cache and takes the key
// away to show it), on no other connection, by no other Authenticator (a
// reload), and not past its expiry; another token on the connection replaces
// it.
func TestConnectionRemembersItsToken(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	start := time.Now()
	set := fakeClock(a, start)
	claims := validClaims(aliceDN)
	exp := start.Add(time.Hour).Truncate(time.Second)
	claims["exp"] = exp.Unix()
	token := signRS256(t, cnKey(), claims)
	conn := ConnContext(context.Background(), nil)
	on := func(ctx context.Context, a *Authenticator, token string) *adapter.Session {
		t.Helper()
		s, err := a.Session(bearerRequest(token).WithContext(ctx))
		if err != nil {
			t.Fatalf("Session: %v", err)
		}
		return s
	}
	if s := on(conn, a, token); s.Subject != aliceDN {
		t.Fatalf("first request: %q (%q)", s.Subject, s.CredentialError)
	}
	a.creds.c.Purge()
	a.tokenKeys = []*rsa.PublicKey{&otherKey().PublicKey} // a verification now would refuse it
	if s := on(conn, a, token); s.Subject != aliceDN {
		t.Errorf("the same token on the same connection: %q (%q), want the remembered %q", s.Subject, s.CredentialError, aliceDN)
	}
	if s := on(ConnContext(context.Background(), nil), a, token); s.CredentialError == "" {
		t.Errorf("another connection believed the token without verifying it: %q", s.Subject)
	}
	reloaded := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&otherKey().PublicKey}})
	if s := on(conn, reloaded, token); s.CredentialError == "" {
		t.Errorf("a reloaded Authenticator believed the old one's memo: %q", s.Subject)
	}
	set(exp)
	if s := on(conn, a, token); s.CredentialError == "" {
		t.Errorf("the memo outlived the token's exp: %q", s.Subject)
	}

	// A second token replaces the first in the memo.
	set(start)
	a.tokenKeys = []*rsa.PublicKey{&cnKey().PublicKey}
	bob := signRS256(t, cnKey(), validClaims(aliceDN+"2"))
	on(conn, a, token)
	on(conn, a, bob)
	a.creds.c.Purge()
	a.tokenKeys = []*rsa.PublicKey{&otherKey().PublicKey}
	if s := on(conn, a, token); s.CredentialError == "" {
		t.Errorf("the memo kept a token the connection sent before the last: %q", s.Subject)
	}
	if s := on(conn, a, bob); s.Subject != aliceDN+"2" {
		t.Errorf("the connection's last token: %q (%q)", s.Subject, s.CredentialError)
	}

	// With the cache off nothing is remembered, on the connection either.
	off := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}, CredentialCacheSize: -1})
	conn = ConnContext(context.Background(), nil)
	on(conn, off, token)
	off.tokenKeys = []*rsa.PublicKey{&otherKey().PublicKey}
	if s := on(conn, off, token); s.CredentialError == "" {
		t.Errorf("with the cache off the connection remembered the token: %q", s.Subject)
	}
}
