package rest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
)

// BenchmarkDescribeToken is describe (HEAD /object/{id}) through the real
// engine and the real Authenticator, in one run: anonymous on a public object
// (the baseline), and with a bearer token on a private object that the token's
// subject may read, with the verified-credential cache off (every request
// verifies the RS256 signature, as before issue 17) and on, and on a
// connection that sent the same token before (auth.ConnContext's memo: no
// digest nor cache lookup); and with a client certificate, through the cache
// and on its connection. The node is a fake, so the figures are the engine's
// and the session's own. Each is reported as its median ns per request
// (ns-<case>/op), and x-before and x-after are the token rate as a fraction
// of the anonymous rate (anonymous ns ÷ token ns: 1 is parity; the issue asks
// for at least 0.9), x-conn the same with the connection's memo, x-cert and
// x-cert-conn those of the certificate.
//
//	go test -run '^$' -bench DescribeToken -benchtime 20000x -count 5 ./adapter/rest/
func BenchmarkDescribeToken(b *testing.B) {
	const alice = "CN=Alice,O=Example,C=US,DC=cilogon,DC=org"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	issuer := auth.NewIssuer(key, "urn:node:B", time.Hour)
	token, err := issuer.Issue(&adapter.Session{Subject: alice})
	if err != nil {
		b.Fatal(err)
	}
	cert, certSubject := selfSigned(b, "Alice")
	rule := func(subject string) *adapter.AccessPolicy {
		return &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{subject}, Permission: []adapter.Permission{adapter.PermRead}}}}
	}
	type variant struct {
		name  string
		h     http.Handler
		token string
		cert  *x509.Certificate
		ctx   context.Context // the connection's
		took  []time.Duration // of each request
	}
	var vs []*variant
	for _, c := range []struct {
		name      string
		policy    *adapter.AccessPolicy
		token     string
		cert      *x509.Certificate
		cacheSize int // of the Authenticator's verified credentials
		conn      bool
	}{
		{"anonymous", rule(adapter.SubjectPublic), "", nil, 0, false},
		{"token-before", rule(alice), token, nil, -1, false}, // no cache: every request verifies
		{"token-after", rule(alice), token, nil, 0, false},
		{"token-conn", rule(alice), token, nil, 0, true},
		{"cert-after", rule(certSubject), "", cert, 0, false},
		{"cert-conn", rule(certSubject), "", cert, 0, true},
	} {
		f := newFake()
		f.meta.RightsHolder = "CN=Owner,O=Example,C=US,DC=cilogon,DC=org"
		f.meta.AccessPolicy = c.policy
		authn := auth.NewAuthenticator(auth.AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{issuer.PublicKey()},
			CredentialCacheSize: c.cacheSize})
		h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:B"}, MN: f, CN: f,
			Authorizer: auth.NewAuthorizer(auth.Policy{CacheSize: 1000, CacheTTL: time.Minute}),
			Sessions:   authn.Session})
		ctx := context.Background()
		if c.conn {
			ctx = auth.ConnContext(ctx, nil)
		}
		vs = append(vs, &variant{name: c.name, h: h, token: c.token, cert: c.cert, ctx: ctx})
	}
	// The variants alternate request by request, so a change in the machine's
	// load falls on all of them alike.
	for b.Loop() {
		for _, v := range vs {
			r := httptest.NewRequest(http.MethodHead, "/d1/mn/v2/object/x%2Fy", nil).WithContext(v.ctx)
			if v.token != "" {
				r.Header.Set("Authorization", "Bearer "+v.token)
			}
			if v.cert != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{v.cert}}
			}
			w := httptest.NewRecorder()
			t0 := time.Now()
			v.h.ServeHTTP(w, r)
			v.took = append(v.took, time.Since(t0))
			if w.Code != http.StatusOK {
				b.Fatalf("%s describe: %d %s", v.name, w.Code, wireHeader(w, "DataONE-Exception-Description"))
			}
		}
	}
	// Medians: a request the scheduler preempted counts as one slow request,
	// not as a share of the mean.
	median := map[string]float64{}
	for _, v := range vs {
		slices.Sort(v.took)
		median[v.name] = float64(v.took[len(v.took)/2].Nanoseconds())
		b.ReportMetric(median[v.name], "ns-"+v.name+"/op")
	}
	b.ReportMetric(median["anonymous"]/median["token-before"], "x-before")
	b.ReportMetric(median["anonymous"]/median["token-after"], "x-after")
	b.ReportMetric(median["anonymous"]/median["token-conn"], "x-conn")
	b.ReportMetric(median["anonymous"]/median["cert-after"], "x-cert")
	b.ReportMetric(median["anonymous"]/median["cert-conn"], "x-cert-conn")
}

// selfSigned is a client certificate for the common name cn, signed by its
// own key, and its DataONE subject.
func selfSigned(b *testing.B, cn string) (*x509.Certificate, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"Example"}, Country: []string{"US"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	subject, err := auth.SubjectDN(cert)
	if err != nil {
		b.Fatal(err)
	}
	return cert, subject
}
