package auth

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
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

// TestIssuerNoRenewal: a session that came from a token gets a token that
// expires no later than the one presented; public sessions get none.
func TestIssuerNoRenewal(t *testing.T) {
	t.Parallel()
	iss := NewIssuer(cnKey(), "urn:node:T", 18*time.Hour)
	presentedExp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	c := validClaims(aliceDN)
	c["exp"] = presentedExp.Unix()
	tok, err := iss.Issue(&adapter.Session{Subject: aliceDN, Token: signRS256(t, cnKey(), c)})
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{}
	jwt.NewParser().ParseUnverified(tok, claims)
	if exp, _ := claims.GetExpirationTime(); exp == nil || !exp.Time.Equal(presentedExp) {
		t.Errorf("renewed token expires at %v, want the presented token's %v", exp, presentedExp)
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
