package auth

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/golang-jwt/jwt/v5"
)

// TestIssuerTokensVerify: a token the issuer signs gives a session for the
// subject through an Authenticator that knows the issuer's public key, and not
// through one that does not.
func TestIssuerTokensVerify(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(cnKey())}))
	iss, err := LoadIssuer(path, "urn:node:T", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Issue(&adapter.Session{Subject: aliceDN, Subjects: []string{aliceDN, "public"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{iss.PublicKey()}}).Session(bearerRequest(tok))
	if err != nil || s.Subject != aliceDN {
		t.Fatalf("issued token gives subject %q (err %v), want %q", s.Subject, err, aliceDN)
	}
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok, claims); err != nil {
		t.Fatal(err)
	}
	exp, _ := claims.GetExpirationTime()
	if d := time.Until(exp.Time); d < 59*time.Minute || d > time.Hour+time.Second {
		t.Errorf("expires in %s, want the lifetime, 1h", d)
	}
	if claims["iss"] != "urn:node:T" || claims["userId"] != aliceDN {
		t.Errorf("claims %v: want iss urn:node:T and userId %s", claims, aliceDN)
	}
	other, _ := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&otherKey().PublicKey}}).Session(bearerRequest(tok))
	if other.Subject != adapter.SubjectPublic || other.CredentialError == "" {
		t.Errorf("a node that does not know the key accepted the token: %+v", other)
	}
}

// TestIssuerNoRenewal: a session that came from a token or a client
// certificate gets a token that expires no later than the credential
// presented; public sessions get none.
func TestIssuerNoRenewal(t *testing.T) {
	t.Parallel()
	iss := NewIssuer(cnKey(), "urn:node:T", 18*time.Hour)
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	presentedExp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	c := validClaims(aliceDN)
	c["exp"] = presentedExp.Unix()
	byToken := bearerRequest(signRS256(t, cnKey(), c))
	ca := newCA(t, "Test DataONE CA")
	cert := ca.issue(t, cilogonSubject(t, "Jane Doe"))
	byCert := request()
	byCert.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert, ca.cert}}
	for name, tc := range map[string]struct {
		r    *http.Request
		want time.Time
	}{"token": {byToken, presentedExp}, "certificate": {byCert, cert.NotAfter.Truncate(time.Second)}} {
		s, err := a.Session(tc.r)
		if err != nil || s.CredentialError != "" {
			t.Fatalf("%s: session %v %q", name, err, s.CredentialError)
		}
		tok, err := iss.Issue(s)
		if err != nil {
			t.Fatal(err)
		}
		claims := jwt.MapClaims{}
		jwt.NewParser().ParseUnverified(tok, claims)
		if exp, _ := claims.GetExpirationTime(); exp == nil || !exp.Time.Equal(tc.want) {
			t.Errorf("%s: the issued token expires at %v, want the presented credential's %v", name, exp, tc.want)
		}
	}
	if _, err := iss.Issue(adapter.PublicSession()); !adapter.IsKind(err, adapter.NotAuthorized) {
		t.Errorf("public session: got %v, want NotAuthorized", err)
	}
}

func TestLoadIssuerRefusesOtherKeys(t *testing.T) {
	t.Parallel()
	if _, err := LoadIssuer(writeFile(t, "pub.pem", publicKeyPEM(t, cnKey())), "x", time.Hour); err == nil {
		t.Error("a public key was accepted as a signing key")
	}
	der, _ := x509.MarshalPKCS8PrivateKey(cnKey())
	if _, err := LoadIssuer(writeFile(t, "pk8.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "x", time.Hour); err != nil {
		t.Errorf("PKCS#8 key: %v", err)
	}
}
