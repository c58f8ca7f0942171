package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/golang-jwt/jwt/v5"
)

const aliceDN = "uid=alice,ou=People,dc=example,dc=org"

// TestTokenSessions runs real RS256 tokens, and the usual forgeries, through
// Authenticator.Session: a valid token gives its sub; any other gives the public
// session with the reason, so that public operations still work and the rest
// answer InvalidToken.
func TestTokenSessions(t *testing.T) {
	t.Parallel()
	now := time.Now()
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims(aliceDN)
		edit(c)
		return c
	}
	pubPEM := publicKeyPEM(t, cnKey())
	hsWithPublicKey, err := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims(aliceDN)).SignedString(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The confusion token is a good HS256 token for a verifier that takes the
	// key it is given for whatever alg the header names: the attack is real.
	if _, err := jwt.Parse(hsWithPublicKey, func(*jwt.Token) (any, error) { return pubPEM, nil }); err != nil {
		t.Fatalf("the HS256 token does not verify with the PEM as HMAC secret, so the test proves nothing: %v", err)
	}
	none := unsignedToken(t, validClaims(aliceDN))
	if _, err := jwt.Parse(none, func(*jwt.Token) (any, error) { return jwt.UnsafeAllowNoneSignatureType, nil }); err != nil {
		t.Fatalf("the alg none token is not a well-formed unsigned token, so the test proves nothing: %v", err)
	}

	tests := []struct {
		name    string
		token   string
		subject string // "" when the token must be refused
		reason  string // in CredentialError when refused
	}{
		{"valid", signRS256(t, cnKey(), validClaims(aliceDN)), aliceDN, ""},
		{"valid userId claim", signRS256(t, cnKey(), with(func(c jwt.MapClaims) { delete(c, "sub"); c["userId"] = "http://orcid.org/0000-0002-1825-0097" })), "http://orcid.org/0000-0002-1825-0097", ""},
		{"expired within leeway", signRS256(t, cnKey(), with(func(c jwt.MapClaims) { c["exp"] = now.Add(-5 * time.Second).Unix() })), aliceDN, ""},
		{"expired", signRS256(t, cnKey(), with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() })), "", "expired at " + now.Add(-time.Hour).UTC().Format(time.RFC3339)},
		{"nbf in the future", signRS256(t, cnKey(), with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() })), "", "not valid yet: not before " + now.Add(time.Hour).UTC().Format(time.RFC3339)},
		{"no exp", signRS256(t, cnKey(), with(func(c jwt.MapClaims) { delete(c, "exp") })), "", "exp"},
		{"no subject", signRS256(t, cnKey(), with(func(c jwt.MapClaims) { delete(c, "sub") })), "", "no subject"},
		{"wrong key", signRS256(t, otherKey(), validClaims(aliceDN)), "", "signature is invalid"},
		{"alg none", none, "", "signing method none is invalid"},
		{"HS256 keyed with the public key PEM", hsWithPublicKey, "", "signing method HS256 is invalid"},
		{"garbage", "garbage", "", "malformed"},
		{"three garbage segments", "a.b.c", "", "malformed"},
		{"tampered claims", retarget(t, signRS256(t, cnKey(), validClaims(aliceDN)), validClaims("uid=mallory,ou=People,dc=example,dc=org")), "", "signature is invalid"},
	}
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := a.Session(bearerRequest(tc.token))
			if err != nil {
				t.Fatalf("Session: %v", err)
			}
			if tc.subject != "" {
				if s.CredentialError != "" || s.Subject != tc.subject {
					t.Fatalf("subject %q (credential error %q), want %q", s.Subject, s.CredentialError, tc.subject)
				}
				want := []string{tc.subject, adapter.SubjectAuthenticatedUser, adapter.SubjectPublic}
				if !slices.Equal(s.Subjects, want) {
					t.Errorf("subjects %q, want %q", s.Subjects, want)
				}
				return
			}
			if s.Subject != adapter.SubjectPublic || !slices.Equal(s.Subjects, []string{adapter.SubjectPublic}) {
				t.Errorf("refused token gave subject %q, subjects %q; want the public session", s.Subject, s.Subjects)
			}
			if !strings.Contains(s.CredentialError, tc.reason) {
				t.Errorf("credential error %q, want it to mention %q", s.CredentialError, tc.reason)
			}
		})
	}
}

// retarget swaps a signed token's claims for others, keeping header and signature.
func retarget(t testing.TB, token string, claims jwt.MapClaims) string {
	forged := unsignedToken(t, claims)
	parts, fparts := strings.Split(token, "."), strings.Split(forged, ".")
	return parts[0] + "." + fparts[1] + "." + parts[2]
}

func TestTokenKeySelection(t *testing.T) {
	t.Parallel()
	t.Run("second configured key", func(t *testing.T) {
		a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&otherKey().PublicKey, &cnKey().PublicKey}})
		s, _ := a.Session(bearerRequest(signRS256(t, cnKey(), validClaims(aliceDN))))
		if s.Subject != aliceDN {
			t.Errorf("a token of the second key gave %q (%s), want %q", s.Subject, s.CredentialError, aliceDN)
		}
	})
	t.Run("expired with the second key stays expired", func(t *testing.T) {
		a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&otherKey().PublicKey, &cnKey().PublicKey}})
		c := validClaims(aliceDN)
		c["exp"] = time.Now().Add(-time.Hour).Unix()
		s, _ := a.Session(bearerRequest(signRS256(t, cnKey(), c)))
		if s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "expired") {
			t.Errorf("got %q (%q), want public with an expiry error", s.Subject, s.CredentialError)
		}
	})
	t.Run("no keys configured", func(t *testing.T) {
		a := NewAuthenticator(AuthenticatorOptions{})
		s, _ := a.Session(bearerRequest(signRS256(t, cnKey(), validClaims(aliceDN))))
		if s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "no token keys") {
			t.Errorf("got %q (%q), want public: this node accepts no tokens", s.Subject, s.CredentialError)
		}
	})
	t.Run("scheme is case-insensitive", func(t *testing.T) {
		a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
		s, _ := a.Session(request("Authorization", "bearer "+signRS256(t, cnKey(), validClaims(aliceDN))))
		if s.Subject != aliceDN {
			t.Errorf("got %q (%q)", s.Subject, s.CredentialError)
		}
	})
	t.Run("other schemes are no credential", func(t *testing.T) {
		a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
		for _, h := range []string{"Basic YWxpY2U6cHc=", "Bearer ", ""} {
			s, _ := a.Session(request("Authorization", h))
			if s.Subject != adapter.SubjectPublic || s.CredentialError != "" {
				t.Errorf("Authorization %q: got %q (%q), want the plain public session", h, s.Subject, s.CredentialError)
			}
		}
	})
}

// TestLoadTokenKeys reads the keys that verify tokens from a certificate PEM, a
// PKIX public key PEM and a PKCS#1 public key PEM, and refuses what cannot.
func TestLoadTokenKeys(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "unused")
	// A "CN certificate" carrying the token key, signed by the test CA.
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: "cn.dataone.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &cnKey().PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certPath := writeFile(t, "cn.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	pubPath := writeFile(t, "other.pub", publicKeyPEM(t, otherKey()))
	pkcs1Path := writeFile(t, "cn.pkcs1.pub", pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&cnKey().PublicKey)}))
	// A bundle: a private key block (skipped) before the certificate.
	bundle := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("ignored")}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	bundlePath := writeFile(t, "bundle.pem", bundle)

	keys, err := LoadTokenKeys([]string{certPath, pubPath, pkcs1Path, bundlePath})
	if err != nil {
		t.Fatalf("LoadTokenKeys: %v", err)
	}
	if len(keys) != 4 {
		t.Fatalf("%d keys, want 4", len(keys))
	}
	for i, want := range []*rsa.PublicKey{&cnKey().PublicKey, &otherKey().PublicKey, &cnKey().PublicKey, &cnKey().PublicKey} {
		if !keys[i].Equal(want) {
			t.Errorf("key %d is not the key of its file", i)
		}
	}
	// The loaded keys verify real tokens.
	for _, tc := range []struct {
		path string
		key  *rsa.PrivateKey
	}{{certPath, cnKey()}, {pubPath, otherKey()}} {
		ks, err := LoadTokenKeys([]string{tc.path})
		if err != nil {
			t.Fatal(err)
		}
		a := NewAuthenticator(AuthenticatorOptions{TokenKeys: ks})
		if s, _ := a.Session(bearerRequest(signRS256(t, tc.key, validClaims(aliceDN)))); s.Subject != aliceDN {
			t.Errorf("%s: a token of its key gave %q (%s)", tc.path, s.Subject, s.CredentialError)
		}
	}

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct{ name, path, want string }{
		{"missing file", "/nonexistent/cn.pem", "no such file"},
		{"no PEM", writeFile(t, "empty.pem", []byte("not a key\n")), "no certificate or public key"},
		{"EC key", writeFile(t, "ec.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})), "cannot verify RS256"},
		{"CA certificate with an EC key", writeFile(t, "ca.crt", ca.pem), "cannot verify RS256"},
		{"broken certificate", writeFile(t, "broken.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}})), "broken.crt"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := LoadTokenKeys([]string{tc.path}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if keys, err := LoadTokenKeys(nil); err != nil || keys != nil {
		t.Errorf("no paths: %v, %v; want no keys and no error", keys, err)
	}
}
