package main

// End-to-end tests of authentication and authorization through the real binary
// (helpers_test.go: TestMain, startServer, server.do), with a real slapd
// (auth/ldaptest), real RS256 tokens signed in the test by a key whose
// certificate the node is given as auth.tokenKeys, and, for TLS, certificates
// made in the test. Every DataONE error body is validated against the schemas.
//
// The directory (seed of auth/ldaptest): alice and bob are members of the
// groupOfNames researchers, carol is not. Tokens name users by their entry DN
// (sub = uid=alice,ou=People,dc=example,dc=org) and the node finds them with the
// default filter (uid={uid}) and their groups with the default group filter.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
	"github.com/d1bridge/d1bridge/auth/ldaptest"
	"github.com/golang-jwt/jwt/v5"
)

var (
	authAlice   = ldaptest.UserDN("alice")
	authBob     = ldaptest.UserDN("bob")
	authCarol   = ldaptest.UserDN("carol")
	authDave    = ldaptest.UserDN("dave") // a researcher added by the test, first seen with the directory down
	authGroup   = ldaptest.GroupDN("researchers")
	authLDAPTTL = 3 * time.Second // ldap.cacheTTL of the instances
)

// authKeys are the CN's token key and a forger's, made once per test binary.
var authKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var ks [2]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

func authCNKey() *rsa.PrivateKey     { return authKeys()[0] }
func authForgerKey() *rsa.PrivateKey { return authKeys()[1] }

// authToken is an RS256 token for sub signed by key, valid for an hour unless
// edit changes its claims.
func authToken(t testing.TB, key *rsa.PrivateKey, sub string, edit ...func(jwt.MapClaims)) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"sub": sub, "iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
	for _, e := range edit {
		e(c)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// authNoneToken is an unsigned (alg none) token for sub, built by hand.
func authNoneToken(t testing.TB, sub string) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." +
		enc(map[string]any{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}) + "."
}

// authCA is a certificate authority made in the test.
type authCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var authSerial atomic.Int64

func authNewCA(t testing.TB, cn string) *authCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1 + authSerial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &authCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// sign issues a certificate for pub from tmpl (serial and validity filled in).
func (ca *authCA) sign(t testing.TB, tmpl *x509.Certificate, pub any) []byte {
	t.Helper()
	tmpl.SerialNumber = big.NewInt(1 + authSerial.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// authWrite writes b to name in dir.
func authWrite(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// authTokenKeyFiles writes the CN's token key as a certificate (signed by a
// test CA) and as a public key PEM; it returns both paths and their contents.
func authTokenKeyFiles(t testing.TB) (certPath, pubPath string, certPEM, pubPEM []byte) {
	t.Helper()
	dir := t.TempDir()
	ca := authNewCA(t, "Test DataONE CA")
	der := ca.sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "cn.dataone.test"}}, &authCNKey().PublicKey)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pkix, err := x509.MarshalPKIXPublicKey(&authCNKey().PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})
	return authWrite(t, dir, "cn.crt", certPEM), authWrite(t, dir, "cn.pub", pubPEM), certPEM, pubPEM
}

// authLDAPEnv points an instance at srv with the configuration's default
// filters, the test's base DNs and a short cache TTL.
func authLDAPEnv(srv *ldaptest.Server, onError string) []string {
	return []string{
		"D1BRIDGE_ENABLEAPPENDLDAPGROUPS=true",
		"D1BRIDGE_LDAP_URL=" + srv.URL,
		"D1BRIDGE_LDAP_USERBASEDN=" + ldaptest.PeopleDN,
		"D1BRIDGE_LDAP_GROUPBASEDN=" + ldaptest.GroupsDN,
		"D1BRIDGE_LDAP_CACHETTL=" + authLDAPTTL.String(),
		"D1BRIDGE_LDAP_TIMEOUT=1s",
		"D1BRIDGE_LDAP_ONERROR=" + onError,
	}
}

// authPath is an MN v2 path with id as one segment.
func authPath(resource, id string, query ...string) string {
	p := "/d1/mn/v2/" + resource + "/" + url.PathEscape(id)
	if len(query) > 0 {
		p += "?" + strings.Join(query, "&")
	}
	return p
}

// authDo sends a request with an optional bearer token and header pairs.
func authDo(t testing.TB, s *server, method, path, token string, header ...string) *response {
	t.Helper()
	if token != "" {
		header = append(header, "Authorization", "Bearer "+token)
	}
	return s.do(t, method, path, nil, header...)
}

// authWantError checks the DataONE error (wantError) and validates its body,
// if any, against the errors schema.
func authWantError(t testing.TB, r *response, code int, name string) *errorDoc {
	t.Helper()
	e := wantError(t, r, code, name)
	if len(r.Body) > 0 {
		xsdtest.Validate(t, r.Body)
	}
	return e
}

// authWantOK checks a 200 answer, and the object's bytes when data is given.
func authWantOK(t testing.TB, r *response, data []byte) {
	t.Helper()
	if !wantStatus(t, r, http.StatusOK) {
		return
	}
	if data != nil && !bytes.Equal(r.Body, data) {
		t.Errorf("body of %d bytes, want the object's %d", len(r.Body), len(data))
	}
}

// authObject is system metadata for data owned by owner with the given rules.
func authObject(pid, owner string, data []byte, rules ...adapter.AccessRule) *adapter.SystemMetadata {
	sm := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
	sm.RightsHolder = owner
	sm.AccessPolicy = &adapter.AccessPolicy{Allow: rules}
	return sm
}

func authRule(perm adapter.Permission, subjects ...string) adapter.AccessRule {
	return adapter.AccessRule{Subject: subjects, Permission: []adapter.Permission{perm}}
}

// authCreate creates sm as the bearer of token (or with header pairs).
func authCreate(t testing.TB, s *server, token string, sm *adapter.SystemMetadata, data []byte, header ...string) {
	t.Helper()
	body, ctype := multipartBody(false, createParts(sm, bytes.NewReader(data), false)...)
	header = append(header, "Content-Type", ctype)
	if token != "" {
		header = append(header, "Authorization", "Bearer "+token)
	}
	r := s.do(t, http.MethodPost, "/d1/mn/v2/object", body, header...)
	if r.Status != http.StatusOK {
		t.Fatalf("create %s: status %d\n%s", sm.Identifier, r.Status, r.Body)
	}
}

// TestAuthTokensAndGroups: tokens, LDAP groups and access policies through the
// binary, on one instance (onError degrade), in order: the group member's
// reads, the other users and bad credentials, the membership removed, the
// directory stopped.
func TestAuthTokensAndGroups(t *testing.T) {
	t.Parallel()
	dir := ldaptest.Start(t)
	dir.AddUser(t, "dave")
	dir.AddMember(t, "researchers", "dave")
	certPath, _, certPEM, pubPEM := authTokenKeyFiles(t)
	s := startServer(t, "", append(authLDAPEnv(dir, "degrade"),
		"D1BRIDGE_AUTH_TOKENKEYS="+certPath,
		"D1BRIDGE_NODE_SUBMITTERS=authenticatedUser",
		"D1BRIDGE_AUTHCACHESIZE=8",
	)...)

	alice := authToken(t, authCNKey(), authAlice)
	bob := authToken(t, authCNKey(), authBob)
	carol := authToken(t, authCNKey(), authCarol)

	private, public := genBytes(1, 4000), genBytes(2, 1000)
	const pid, pubPID = "auth-private", "auth-public"
	authCreate(t, s, alice, authObject(pid, authAlice, private, authRule(adapter.PermRead, authGroup)), private)
	authCreate(t, s, alice, authObject(pubPID, authAlice, public, authRule(adapter.PermRead, adapter.SubjectPublic)), public)
	// bob's groups are looked up (and cached for authLDAPTTL) from here.
	bobFirstSeen := time.Now()

	t.Run("group member reads", func(t *testing.T) {
		authWantOK(t, authDo(t, s, http.MethodGet, authPath("object", pid), bob), private)
		r := authDo(t, s, http.MethodHead, authPath("object", pid), bob)
		if wantStatus(t, r, http.StatusOK) && r.Header.Get("Content-Length") != fmt.Sprint(len(private)) {
			t.Errorf("describe Content-Length %q, want %d", r.Header.Get("Content-Length"), len(private))
		}
		r = authDo(t, s, http.MethodGet, authPath("meta", pid), bob)
		if wantStatus(t, r, http.StatusOK) {
			var sm adapter.SystemMetadata
			decode(t, r, &sm)
			if sm.RightsHolder != authAlice {
				t.Errorf("rightsHolder %q", sm.RightsHolder)
			}
		}
	})

	t.Run("isAuthorized", func(t *testing.T) {
		for _, tc := range []struct {
			who, token, action string
			name               string // "" for 200
		}{
			{"alice", alice, "read", ""}, {"alice", alice, "write", ""}, {"alice", alice, "changePermission", ""},
			{"bob", bob, "read", ""}, {"bob", bob, "write", "NotAuthorized"}, {"bob", bob, "changePermission", "NotAuthorized"},
			{"carol", carol, "read", "NotAuthorized"}, {"carol", carol, "write", "NotAuthorized"},
			{"anonymous", "", "read", "InvalidToken"}, {"anonymous", "", "changePermission", "InvalidToken"},
		} {
			r := authDo(t, s, http.MethodGet, authPath("isAuthorized", pid, "action="+tc.action), tc.token)
			if tc.name == "" {
				if r.Status != http.StatusOK {
					t.Errorf("%s %s: status %d, want 200\n%s", tc.who, tc.action, r.Status, r.Body)
				}
				continue
			}
			if e := authWantError(t, r, http.StatusUnauthorized, tc.name); e.DetailCode != "1820" && e.DetailCode != "1840" {
				t.Errorf("%s %s: detailCode %q, want isAuthorized's 1820 or 1840", tc.who, tc.action, e.DetailCode)
			}
		}
		r := authDo(t, s, http.MethodGet, authPath("isAuthorized", pubPID, "action=read"), "")
		wantStatus(t, r, http.StatusOK)
	})

	t.Run("non-member", func(t *testing.T) {
		e := authWantError(t, authDo(t, s, http.MethodGet, authPath("object", pid), carol), http.StatusUnauthorized, "NotAuthorized")
		if !strings.Contains(e.Description, authCarol) {
			t.Errorf("NotAuthorized does not name the caller: %q", e.Description)
		}
		authWantError(t, authDo(t, s, http.MethodHead, authPath("object", pid), carol), http.StatusUnauthorized, "NotAuthorized")
		authWantError(t, authDo(t, s, http.MethodGet, authPath("meta", pid), carol), http.StatusUnauthorized, "NotAuthorized")
		authWantOK(t, authDo(t, s, http.MethodGet, authPath("object", pubPID), carol), public)
	})

	t.Run("anonymous", func(t *testing.T) {
		authWantError(t, authDo(t, s, http.MethodGet, authPath("object", pid), ""), http.StatusUnauthorized, "InvalidToken")
		authWantError(t, authDo(t, s, http.MethodHead, authPath("object", pid), ""), http.StatusUnauthorized, "InvalidToken")
		authWantError(t, authDo(t, s, http.MethodGet, authPath("meta", pid), ""), http.StatusUnauthorized, "InvalidToken")
		authWantOK(t, authDo(t, s, http.MethodGet, authPath("object", pubPID), ""), public)
	})

	t.Run("bad tokens", func(t *testing.T) {
		hs := func(secret []byte) string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": authAlice, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		// tamper changes one character in the middle of the signature.
		tamper := func(tok string) string {
			i, c := len(tok)-20, byte('A')
			if tok[i] == c {
				c = 'B'
			}
			return tok[:i] + string(c) + tok[i+1:]
		}
		expired, notBefore := time.Now().Add(-time.Hour).Unix(), time.Now().Add(time.Hour).Unix()
		at := func(unix int64) string { return time.Unix(unix, 0).UTC().Format(time.RFC3339) }
		// All in the name of alice, who owns the object; each with its reason.
		for name, tc := range map[string]struct{ token, reason string }{
			"expired":                          {authToken(t, authCNKey(), authAlice, func(c jwt.MapClaims) { c["exp"] = expired }), "the bearer token expired at " + at(expired)},
			"not yet valid":                    {authToken(t, authCNKey(), authAlice, func(c jwt.MapClaims) { c["nbf"] = notBefore }), "not valid yet: not before " + at(notBefore)},
			"forged (wrong key)":               {authToken(t, authForgerKey(), authAlice), "signature does not verify"},
			"tampered signature":               {tamper(authToken(t, authCNKey(), authAlice)), "signature does not verify"},
			"alg none":                         {authNoneToken(t, authAlice), "signing method none is invalid"},
			"HS256 keyed with the certificate": {hs(certPEM), "signing method HS256 is invalid"},
			"HS256 keyed with the public key":  {hs(pubPEM), "signing method HS256 is invalid"},
			"garbage":                          {"garbage", "malformed"},
		} {
			t.Run(name, func(t *testing.T) {
				tok := tc.token
				e := authWantError(t, authDo(t, s, http.MethodGet, authPath("object", pid), tok), http.StatusUnauthorized, "InvalidToken")
				if !strings.Contains(e.Description, tc.reason) {
					t.Errorf("InvalidToken does not say why (%q): %q", tc.reason, e.Description)
				}
				authWantError(t, authDo(t, s, http.MethodHead, authPath("object", pid), tok), http.StatusUnauthorized, "InvalidToken")
				authWantError(t, authDo(t, s, http.MethodGet, authPath("isAuthorized", pid, "action=read"), tok), http.StatusUnauthorized, "InvalidToken")
				// A refused credential is never taken for none: even a public
				// object, a listing or a CN read answers InvalidToken with the
				// reason (detail code per operation, API.md) ...
				for _, c := range []struct{ method, path, detail string }{
					{http.MethodGet, authPath("object", pubPID), "1010"},
					{http.MethodGet, "/d1/mn/v2/object", "1530"},
					{http.MethodGet, "/d1/mn/v1/object/" + pubPID, "1010"},
					{http.MethodGet, "/d1/mn/v2/log", "1470"},
					{http.MethodGet, "/d1/cn/v2/object", "1530"},
					{http.MethodGet, "/d1/cn/v2/meta/" + pubPID, "1050"},
					{http.MethodGet, "/d1/cn/v2/resolve/" + pubPID, "4130"},
				} {
					e := authWantError(t, authDo(t, s, c.method, c.path, tok), http.StatusUnauthorized, "InvalidToken")
					if e.DetailCode != c.detail || !strings.Contains(e.Description, tc.reason) {
						t.Errorf("%s %s: detail code %s, description %q; want %s with %q", c.method, c.path, e.DetailCode, e.Description, c.detail, tc.reason)
					}
				}
				e = authWantError(t, authDo(t, s, http.MethodHead, authPath("object", pubPID), tok), http.StatusUnauthorized, "InvalidToken")
				if !strings.Contains(e.Description, tc.reason) {
					t.Errorf("describe: %q does not say %q", e.Description, tc.reason)
				}
				// ... while operations that cannot raise it ignore it.
				wantStatus(t, authDo(t, s, http.MethodGet, "/d1/mn/v2/monitor/ping", tok), http.StatusOK)
				wantStatus(t, authDo(t, s, http.MethodGet, "/d1/mn/v2/node", tok), http.StatusOK)
				wantStatus(t, authDo(t, s, http.MethodGet, "/d1/cn/v2/monitor/ping", tok), http.StatusOK)
				wantStatus(t, authDo(t, s, http.MethodGet, "/d1/cn/v2/formats", tok), http.StatusOK)
			})
		}
		// No credential at all is the public session, as before.
		authWantOK(t, authDo(t, s, http.MethodGet, authPath("object", pubPID), ""), public)
		wantStatus(t, authDo(t, s, http.MethodGet, "/d1/mn/v2/object", ""), http.StatusOK)
		wantStatus(t, authDo(t, s, http.MethodGet, "/d1/cn/v2/object", ""), http.StatusOK)
	})

	t.Run("forwarded subject ignored", func(t *testing.T) {
		// enableSessionFromHeader is off: the headers are no credential at all.
		r := authDo(t, s, http.MethodGet, authPath("object", pid), "",
			"Ssl-Client-Subject-Dn", authAlice, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", "anything")
		authWantError(t, r, http.StatusUnauthorized, "InvalidToken")
	})

	t.Run("membership removed", func(t *testing.T) {
		dir.RemoveMember(t, "researchers", "bob")
		r := authDo(t, s, http.MethodGet, authPath("object", pid), bob)
		if since := time.Since(bobFirstSeen); since < authLDAPTTL-500*time.Millisecond {
			authWantOK(t, r, private) // bob's groups are still the cached ones
		} else {
			t.Logf("the removal came %s after bob's groups were read (TTL %s): the before-TTL check was not possible", since, authLDAPTTL)
		}
		var lost time.Time
		for deadline := time.Now().Add(authLDAPTTL + 10*time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			r = authDo(t, s, http.MethodGet, authPath("object", pid), bob)
			if r.Status != http.StatusOK {
				lost = time.Now()
				break
			}
		}
		if lost.IsZero() {
			t.Fatalf("bob still reads %s after the TTL", pid)
		}
		authWantError(t, r, http.StatusUnauthorized, "NotAuthorized")
		if after := lost.Sub(bobFirstSeen); after < authLDAPTTL {
			t.Errorf("bob lost access %s after his groups were read, before the TTL %s", after, authLDAPTTL)
		} else {
			t.Logf("bob lost access %s after his groups were read (TTL %s)", after, authLDAPTTL)
		}
		authWantError(t, authDo(t, s, http.MethodHead, authPath("object", pid), bob), http.StatusUnauthorized, "NotAuthorized")
	})

	t.Run("directory stopped", func(t *testing.T) {
		dir.Stop()
		dave := authToken(t, authCNKey(), authDave)
		bound := 5 * time.Second // 5 × ldap.timeout
		start := time.Now()
		r := authDo(t, s, http.MethodGet, authPath("object", pid), dave)
		elapsed := time.Since(start)
		t.Logf("a new subject's request with the directory stopped answered %d after %s", r.Status, elapsed)
		if elapsed > bound {
			t.Errorf("the answer took %s, bound %s", elapsed, bound)
		}
		// dave is a researcher, but without the directory the session has no groups.
		authWantError(t, r, http.StatusUnauthorized, "NotAuthorized")
		start = time.Now()
		authWantOK(t, authDo(t, s, http.MethodGet, authPath("object", pubPID), dave), public)
		authWantOK(t, authDo(t, s, http.MethodGet, authPath("object", pid), alice), private) // the owner needs no groups
		if elapsed := time.Since(start); elapsed > bound {
			t.Errorf("two requests took %s with the directory stopped, bound %s", elapsed, bound)
		}
	})
}

// TestAuthDirectoryFailureFails: with ldap.onError fail, a credentialed request
// the directory cannot complete answers ServiceFailure, within the timeout's
// bound whether the directory hangs or is gone; the public session, which
// needs no groups, is unaffected.
func TestAuthDirectoryFailureFails(t *testing.T) {
	t.Parallel()
	dir := ldaptest.Start(t)
	_, pubPath, _, _ := authTokenKeyFiles(t)
	s := startServer(t, "", append(authLDAPEnv(dir, "fail"),
		"D1BRIDGE_AUTH_TOKENKEYS="+pubPath, // a public key PEM this time
		"D1BRIDGE_NODE_SUBMITTERS=authenticatedUser",
		"D1BRIDGE_LDAP_BACKOFF=0s",
	)...)
	data := genBytes(3, 500)
	authCreate(t, s, authToken(t, authCNKey(), authAlice), authObject("auth-fail", authAlice, data, authRule(adapter.PermRead, adapter.SubjectPublic)), data)
	path := authPath("object", "auth-fail")
	bound := 5 * time.Second // 5 × ldap.timeout

	for _, outage := range []struct {
		name  string
		start func()
		sub   string
	}{
		{"hung", func() { dir.Freeze(t) }, authBob},
		{"stopped", func() { dir.Thaw(t); dir.Stop() }, authCarol},
	} {
		t.Run(outage.name, func(t *testing.T) {
			outage.start()
			start := time.Now()
			r := authDo(t, s, http.MethodGet, path, authToken(t, authCNKey(), outage.sub))
			elapsed := time.Since(start)
			t.Logf("directory %s: %d after %s", outage.name, r.Status, elapsed)
			authWantError(t, r, http.StatusInternalServerError, "ServiceFailure")
			if elapsed > bound {
				t.Errorf("the answer took %s, bound %s", elapsed, bound)
			}
			authWantError(t, authDo(t, s, http.MethodHead, path, authToken(t, authCNKey(), outage.sub)), http.StatusInternalServerError, "ServiceFailure")
			authWantOK(t, authDo(t, s, http.MethodGet, path, ""), data)
		})
	}
}

// TestAuthProxyHeaders: with enableSessionFromHeader on, a forwarded subject is
// the caller only with the proxy's secret and its SUCCESS verdict.
func TestAuthProxyHeaders(t *testing.T) {
	t.Parallel()
	const secret = "proxy-secret-made-in-the-test"
	certPath, _, _, _ := authTokenKeyFiles(t)
	s := startServer(t, "",
		"D1BRIDGE_AUTH_TOKENKEYS="+certPath,
		"D1BRIDGE_NODE_SUBMITTERS=authenticatedUser",
		"D1BRIDGE_ENABLESESSIONFROMHEADER=true",
		"D1BRIDGE_AUTH_PROXY_SECRET="+secret,
	)
	owner := "CN=Jane Doe,O=Example,C=US,DC=cilogon,DC=org"
	data := genBytes(4, 700)
	// Created through the proxy, as its owner.
	authCreate(t, s, "", authObject("auth-proxied", owner, data), data,
		"Ssl-Client-Subject-Dn", owner, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", secret)
	path := authPath("object", "auth-proxied")

	authWantOK(t, authDo(t, s, http.MethodGet, path, "", "Ssl-Client-Subject-Dn", owner, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", secret), data)
	wantStatus(t, authDo(t, s, http.MethodGet, authPath("isAuthorized", "auth-proxied", "action=changePermission"), "",
		"Ssl-Client-Subject-Dn", owner, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", secret), http.StatusOK)
	for name, h := range map[string][]string{
		"no secret":      {"Ssl-Client-Subject-Dn", owner, "Ssl-Client-Verify", "SUCCESS"},
		"wrong secret":   {"Ssl-Client-Subject-Dn", owner, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", "guess"},
		"verify failed":  {"Ssl-Client-Subject-Dn", owner, "Ssl-Client-Verify", "FAILED", "X-Proxy-Key", secret},
		"verify missing": {"Ssl-Client-Subject-Dn", owner, "X-Proxy-Key", secret},
	} {
		t.Run(name, func(t *testing.T) {
			e := authWantError(t, authDo(t, s, http.MethodGet, path, "", h...), http.StatusUnauthorized, "InvalidToken")
			if !strings.Contains(e.Description, "proxy") {
				t.Errorf("InvalidToken does not say why: %q", e.Description)
			}
			authWantError(t, authDo(t, s, http.MethodHead, path, "", h...), http.StatusUnauthorized, "InvalidToken")
			// A forwarded identity the node cannot trust is not taken for
			// none: a public listing answers InvalidToken too; ping ignores it.
			e = authWantError(t, authDo(t, s, http.MethodGet, "/d1/mn/v2/object", "", h...), http.StatusUnauthorized, "InvalidToken")
			if !strings.Contains(e.Description, "proxy") || e.DetailCode != "1530" {
				t.Errorf("listObjects: %s %q, want 1530 saying why", e.DetailCode, e.Description)
			}
			wantStatus(t, authDo(t, s, http.MethodGet, "/d1/mn/v2/monitor/ping", "", h...), http.StatusOK)
		})
	}
	wantStatus(t, authDo(t, s, http.MethodGet, "/d1/mn/v2/object", ""), http.StatusOK)
	// Another subject through the proxy is who the proxy says, and lacks the right.
	authWantError(t, authDo(t, s, http.MethodGet, path, "",
		"Ssl-Client-Subject-Dn", "CN=Someone Else,DC=example,DC=org", "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", secret),
		http.StatusUnauthorized, "NotAuthorized")
}

// TestAuthTLSClientCertificate: the binary terminates TLS (tls.cert, tls.key,
// tls.clientCAs); a client certificate from the trusted CA is the caller, its
// DN in DataONE form.
func TestAuthTLSClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA, rogueCA := authNewCA(t, "Test server CA"), authNewCA(t, "Test CILogon CA"), authNewCA(t, "Rogue CA")

	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serverDER := serverCA.sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, &serverKey.PublicKey)
	serverKeyDER, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile := authWrite(t, dir, "server.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverDER}))
	keyFile := authWrite(t, dir, "server.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: serverKeyDER}))
	casFile := authWrite(t, dir, "client-cas.pem", clientCA.pem)

	const jane = "CN=Jane Doe,O=Example,C=US,DC=cilogon,DC=org"
	janeCert := authClientCert(t, clientCA, "Jane Doe")
	joeCert := authClientCert(t, clientCA, "Joe Bloggs")
	rogueJane := authClientCert(t, rogueCA, "Jane Doe")

	s := authStartTLS(t, serverCA, "D1BRIDGE_TLS_CERT="+certFile, "D1BRIDGE_TLS_KEY="+keyFile, "D1BRIDGE_TLS_CLIENTCAS="+casFile,
		"D1BRIDGE_NODE_SUBMITTERS=authenticatedUser")
	data := genBytes(5, 900)
	sm := authObject("auth-tls", jane, data)
	body, ctype := multipartBody(false, createParts(sm, bytes.NewReader(data), false)...)
	r := authTLSDo(t, s, serverCA, &janeCert, http.MethodPost, "/d1/mn/v2/object", body, "Content-Type", ctype)
	if r.Status != http.StatusOK {
		t.Fatalf("create with the client certificate: %d\n%s", r.Status, r.Body)
	}
	path := authPath("object", "auth-tls")

	authWantOK(t, authTLSDo(t, s, serverCA, &janeCert, http.MethodGet, path, nil), data)
	wantStatus(t, authTLSDo(t, s, serverCA, &janeCert, http.MethodHead, path, nil), http.StatusOK)
	authWantError(t, authTLSDo(t, s, serverCA, nil, http.MethodGet, path, nil), http.StatusUnauthorized, "InvalidToken")
	e := authWantError(t, authTLSDo(t, s, serverCA, &joeCert, http.MethodGet, path, nil), http.StatusUnauthorized, "NotAuthorized")
	if want := "CN=Joe Bloggs,O=Example,C=US,DC=cilogon,DC=org"; !strings.Contains(e.Description, want) {
		t.Errorf("NotAuthorized does not name %q: %q", want, e.Description)
	}
	// A certificate from an authority the node does not trust ends the handshake.
	// (Go's client would not even send it, the server listing its acceptable
	// authorities: GetClientCertificate forces it on the server.)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: authPool(serverCA),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &rogueJane, nil
		}}}}
	if resp, err := c.Get(s.URL + path); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate of an untrusted CA was accepted: status %d", resp.StatusCode)
	} else {
		t.Logf("a certificate of an untrusted CA: %v", err)
	}
	// Without forcing, the client sends no certificate: no credential.
	authWantError(t, authTLSDo(t, s, serverCA, &rogueJane, http.MethodGet, path, nil), http.StatusUnauthorized, "InvalidToken")
	wantStatus(t, authTLSDo(t, s, serverCA, nil, http.MethodGet, "/d1/mn/v2/object", nil), http.StatusOK)

	// A certificate of the trusted CA that cannot be used (its SubjectInfo
	// extension is broken) is not taken for none: even the public listing
	// answers InvalidToken with the reason; ping ignores it.
	broken := authClientCert(t, clientCA, "Jane Doe", pkix.Extension{
		Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 34998, 2, 1}, Value: []byte("<not a SubjectInfo")})
	e = authWantError(t, authTLSDo(t, s, serverCA, &broken, http.MethodGet, "/d1/mn/v2/object", nil), http.StatusUnauthorized, "InvalidToken")
	if !strings.Contains(e.Description, "SubjectInfo") || e.DetailCode != "1530" {
		t.Errorf("listObjects with an unusable certificate: %s %q, want 1530 saying why", e.DetailCode, e.Description)
	}
	authWantError(t, authTLSDo(t, s, serverCA, &broken, http.MethodGet, path, nil), http.StatusUnauthorized, "InvalidToken")
	wantStatus(t, authTLSDo(t, s, serverCA, &broken, http.MethodGet, "/d1/mn/v2/monitor/ping", nil), http.StatusOK)
}

// authClientCert is a client certificate for CN=cn,O=Example,C=US,DC=cilogon,DC=org,
// with the extensions given.
func authClientCert(t testing.TB, ca *authCA, cn string, exts ...pkix.Extension) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dc := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	raw, err := asn1.Marshal(pkix.RDNSequence{
		{{Type: dc, Value: "org"}}, {{Type: dc, Value: "cilogon"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 6}, Value: "US"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Example"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: cn}},
	})
	if err != nil {
		t.Fatal(err)
	}
	der := ca.sign(t, &x509.Certificate{RawSubject: raw, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtraExtensions: exts}, &key.PublicKey)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func authPool(cas ...*authCA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.cert)
	}
	return p
}

// authStartTLS starts the binary as startServer does, but serving HTTPS with
// the given environment, and waits until ping answers over TLS (startServer
// pings over plain HTTP). It is stopped with SIGTERM when the test ends.
func authStartTLS(t *testing.T, serverCA *authCA, env ...string) *server {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, URL: "https://127.0.0.1:" + port, DataDir: t.TempDir(), env: env, log: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binPath, "serve")
	s.cmd.Env = append(withoutD1Bridge(os.Environ()), append([]string{
		"D1BRIDGE_LISTEN=127.0.0.1:" + port, "D1BRIDGE_DATADIR=" + s.DataDir,
		"D1BRIDGE_NODE_ID=" + testNodeID, "D1BRIDGE_SHUTDOWNTIMEOUT=10s",
	}, env...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("log of the server at %s:\n%s", s.URL, s.log.String())
		}
	})
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: authPool(serverCA)}}}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-s.done:
			t.Fatalf("the TLS server exited before answering: %v\n%s", s.waitErr, s.log.String())
		default:
		}
		if resp, err := c.Get(s.URL + "/d1/mn/v2/monitor/ping"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
	}
	t.Fatalf("the TLS server did not answer ping within 15s\n%s", s.log.String())
	return nil
}

// authTLSDo is server.do over TLS, presenting cert when given.
func authTLSDo(t testing.TB, s *server, serverCA *authCA, cert *tls.Certificate, method, path string, body io.Reader, header ...string) *response {
	t.Helper()
	tc := &tls.Config{RootCAs: authPool(serverCA)}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tc}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	checkXML(t, method+" "+path, r)
	return r
}
