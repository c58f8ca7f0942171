package auth

// Helpers of the auth tests: keys, tokens, certificates and requests made in the
// test with the standard library and golang-jwt, nothing prepared in advance.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// rsaKeys are generated once per test binary: RSA generation is slow, and the
// tests only need keys no one else holds.
var rsaKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
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

// cnKey signs the tokens the node trusts; otherKey is a forger's.
func cnKey() *rsa.PrivateKey    { return rsaKeys()[0] }
func otherKey() *rsa.PrivateKey { return rsaKeys()[1] }

// signRS256 signs claims with key (RS256).
func signRS256(t testing.TB, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validClaims are the claims of a token for sub valid for an hour.
func validClaims(sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"sub": sub, "iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(),
		"exp": now.Add(time.Hour).Unix(), "iss": "cn.dataone.test"}
}

// unsignedToken builds a token with alg "none" by hand (golang-jwt refuses to
// make one without its unsafe marker): header.claims. with an empty signature.
func unsignedToken(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." + enc(claims) + "."
}

// publicKeyPEM is the PKIX PEM of key's public half.
func publicKeyPEM(t testing.TB, key *rsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// writeFile writes b to name in a temporary directory of t.
func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rdn is one attribute of a subject, in the order of rdns: the ASN.1 order,
// least specific (DC=org) first.
type rdn struct {
	oid   asn1.ObjectIdentifier
	value string
}

var (
	oidCN  = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidC   = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidO   = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU  = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidDC  = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
)

// rawSubject encodes rdns, each its own RDN unless grouped in one slice.
func rawSubject(t testing.TB, rdns ...[]rdn) []byte {
	t.Helper()
	var seq pkix.RDNSequence
	for _, set := range rdns {
		var s pkix.RelativeDistinguishedNameSET
		for _, a := range set {
			s = append(s, pkix.AttributeTypeAndValue{Type: a.oid, Value: a.value})
		}
		seq = append(seq, s)
	}
	b, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testCA is a certificate authority made in the test.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(1000 + serial.Add(1)) }

func newCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn, Organization: []string{"d1bridge tests"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a client certificate with the raw subject and extra extensions.
func (ca *testCA) issue(t testing.TB, subject []byte, exts ...pkix.Extension) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), RawSubject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		ExtraExtensions: exts,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// request is a GET with the given header pairs ("Name", "value", ...).
func request(header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/d1/mn/v2/object/x", nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func bearerRequest(token string) *http.Request { return request("Authorization", "Bearer "+token) }
