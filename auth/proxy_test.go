package auth

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

const (
	hdrSubject = "Ssl-Client-Subject-Dn"
	hdrVerify  = "Ssl-Client-Verify"
	hdrSecret  = "X-Proxy-Key"
	secret     = "s3cret-shared-with-the-proxy"
)

func proxyNet(t testing.TB, cidr string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProxySessions: a forwarded subject is believed only from the trusted
// proxy (its secret, its address, both when both are configured) and only when
// the proxy says it verified the certificate; anything else is the public
// session with the reason (InvalidToken where rights are needed).
func TestProxySessions(t *testing.T) {
	t.Parallel()
	bySecret := &ProxyTrust{SubjectHeader: hdrSubject, VerifyHeader: hdrVerify, SecretHeader: hdrSecret, Secret: secret}
	byAddress := &ProxyTrust{SubjectHeader: hdrSubject, VerifyHeader: hdrVerify,
		Addresses: []*net.IPNet{proxyNet(t, "10.0.0.0/8"), proxyNet(t, "fd00::/8")}}
	both := &ProxyTrust{SubjectHeader: hdrSubject, SecretHeader: hdrSecret, Secret: secret,
		Addresses: []*net.IPNet{proxyNet(t, "192.0.2.10/32")}}
	neither := &ProxyTrust{SubjectHeader: hdrSubject, VerifyHeader: hdrVerify, SecretHeader: hdrSecret}

	tests := []struct {
		name   string
		proxy  *ProxyTrust
		remote string
		header []string
		reason string // "" when the subject must be believed
	}{
		{"secret and SUCCESS", bySecret, "203.0.113.5:4000", []string{hdrSubject, janeDN, hdrSecret, secret, hdrVerify, "SUCCESS"}, ""},
		{"secret, verify in lower case", bySecret, "203.0.113.5:4000", []string{hdrSubject, janeDN, hdrSecret, secret, hdrVerify, "success"}, ""},
		{"no secret", bySecret, "203.0.113.5:4000", []string{hdrSubject, janeDN, hdrVerify, "SUCCESS"}, "without the proxy secret"},
		{"wrong secret", bySecret, "203.0.113.5:4000", []string{hdrSubject, janeDN, hdrSecret, "guess", hdrVerify, "SUCCESS"}, "without the proxy secret"},
		{"secret prefix", bySecret, "203.0.113.5:4000", []string{hdrSubject, janeDN, hdrSecret, secret[:5], hdrVerify, "SUCCESS"}, "without the proxy secret"},
		{"verify failed", bySecret, "203.0.113.5:4000", []string{hdrSubject, janeDN, hdrSecret, secret, hdrVerify, "FAILED:unable to get issuer"}, "did not verify"},
		{"verify missing", bySecret, "203.0.113.5:4000", []string{hdrSubject, janeDN, hdrSecret, secret}, "did not verify"},
		{"blank subject", bySecret, "203.0.113.5:4000", []string{hdrSubject, "   ", hdrSecret, secret, hdrVerify, "SUCCESS"}, "blank"},
		{"trusted address", byAddress, "10.1.2.3:5555", []string{hdrSubject, janeDN, hdrVerify, "SUCCESS"}, ""},
		{"trusted IPv6 address", byAddress, "[fd00::1]:5555", []string{hdrSubject, janeDN, hdrVerify, "SUCCESS"}, ""},
		{"untrusted address", byAddress, "192.168.1.1:5555", []string{hdrSubject, janeDN, hdrVerify, "SUCCESS"}, "not a trusted proxy address"},
		{"address, secret is not enough", byAddress, "192.168.1.1:5555", []string{hdrSubject, janeDN, hdrSecret, secret, hdrVerify, "SUCCESS"}, "not a trusted proxy address"},
		{"both from the proxy", both, "192.0.2.10:443", []string{hdrSubject, janeDN, hdrSecret, secret}, ""},
		{"both, secret from elsewhere", both, "192.0.2.11:443", []string{hdrSubject, janeDN, hdrSecret, secret}, "not a trusted proxy address"},
		{"both, address without secret", both, "192.0.2.10:443", []string{hdrSubject, janeDN}, "without the proxy secret"},
		{"nothing configured to trust", neither, "127.0.0.1:1", []string{hdrSubject, janeDN, hdrVerify, "SUCCESS"}, "no proxy secret or address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAuthenticator(AuthenticatorOptions{Proxy: tc.proxy})
			r := request(tc.header...)
			r.RemoteAddr = tc.remote
			s, err := a.Session(r)
			if err != nil {
				t.Fatalf("Session: %v", err)
			}
			if tc.reason == "" {
				want := []string{janeDN, adapter.SubjectAuthenticatedUser, adapter.SubjectPublic}
				if s.Subject != janeDN || s.CredentialError != "" || !slices.Equal(s.Subjects, want) {
					t.Errorf("session %q %q (%q), want %q", s.Subject, s.Subjects, s.CredentialError, want)
				}
				return
			}
			if s.Subject != adapter.SubjectPublic || !slices.Equal(s.Subjects, []string{adapter.SubjectPublic}) {
				t.Errorf("refused forwarded subject gave %q %q, want the public session", s.Subject, s.Subjects)
			}
			if !strings.Contains(s.CredentialError, tc.reason) {
				t.Errorf("credential error %q, want it to mention %q", s.CredentialError, tc.reason)
			}
			// Where rights are needed the refusal is InvalidToken, naming the reason.
			err = NewAuthorizer(Policy{}).Check(r.Context(), s, Authenticated, nil)
			if !adapter.IsKind(err, adapter.InvalidToken) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Check: %v, want InvalidToken mentioning %q", err, tc.reason)
			}
		})
	}
}

// TestProxyRefusesAmbiguousSubjects: a header sent twice (a proxy that adds
// to the client's instead of replacing it) and a subject with a control
// character (which the decision cache's key could not tell apart) are refused.
func TestProxyRefusesAmbiguousSubjects(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{Proxy: &ProxyTrust{SubjectHeader: hdrSubject, VerifyHeader: hdrVerify, SecretHeader: hdrSecret, Secret: secret}})
	twice := request(hdrSubject, "CN=Mallory,DC=org", hdrSecret, secret, hdrVerify, "SUCCESS")
	twice.Header.Add(hdrSubject, janeDN)
	nul := request(hdrSubject, `CN=Jane\00cn=researchers,DC=org`, hdrSecret, secret, hdrVerify, "SUCCESS")
	for name, tc := range map[string]struct {
		r      *http.Request
		reason string
	}{"subject sent twice": {twice, "sent 2 times"}, "NUL in the subject": {nul, "control character"}} {
		s, err := a.Session(tc.r)
		if err != nil {
			t.Fatalf("%s: Session: %v", name, err)
		}
		if s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, tc.reason) {
			t.Errorf("%s: session %q (%q), want the public session mentioning %q", name, s.Subject, s.CredentialError, tc.reason)
		}
	}
}

// TestProxyDisabled: without enableSessionFromHeader (no ProxyTrust) the
// headers are not a credential at all, whatever they carry.
func TestProxyDisabled(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{})
	r := request(hdrSubject, janeDN, hdrSecret, secret, hdrVerify, "SUCCESS")
	r.RemoteAddr = "127.0.0.1:1"
	s, err := a.Session(r)
	if err != nil {
		t.Fatal(err)
	}
	if s.Subject != adapter.SubjectPublic || s.CredentialError != "" {
		t.Errorf("got %q (%q), want the plain public session", s.Subject, s.CredentialError)
	}
}

// TestAuthSessionSubjects: every credentialed session acts as authenticatedUser
// and public too; no credential is public alone.
func TestAuthSessionSubjects(t *testing.T) {
	t.Parallel()
	a := NewAuthenticator(AuthenticatorOptions{})
	s, err := a.Session(&http.Request{Header: http.Header{}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Subject != adapter.SubjectPublic || !slices.Equal(s.Subjects, []string{adapter.SubjectPublic}) || s.CredentialError != "" {
		t.Errorf("no credential: %+v, want the public session", s)
	}
	if s.Has(adapter.SubjectAuthenticatedUser) {
		t.Error("the public session acts as authenticatedUser")
	}
}

// TestProxySubjectHexEscapes: a person is one subject whether d1bridge
// terminates TLS or a front proxy forwards the DN. nginx's $ssl_client_s_dn
// (the configuration config/OPERATING.md gives) is OpenSSL's RFC 2253 form,
// which escapes every byte above 0x7F as \XX ("CN=J\C3\BCrgen M\C3\BCller,...")
// where the certificate's subject is "CN=Jürgen Müller,...": the forwarded DN
// is decoded and escaped again as SubjectDN does, so both are the same
// subject. A forwarded DN whose escapes are not UTF-8 is refused; a subject
// that is not an RFC 4514 DN (an ORCID, a lower-case LDAP DN as written) is
// kept as sent.
func TestProxySubjectHexEscapes(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "Test CILogon CA")
	a := NewAuthenticator(AuthenticatorOptions{Proxy: &ProxyTrust{SubjectHeader: hdrSubject, VerifyHeader: hdrVerify, SecretHeader: hdrSecret, Secret: secret}})
	forward := func(t *testing.T, dn string) *adapter.Session {
		t.Helper()
		s, err := a.Session(request(hdrSubject, dn, hdrSecret, secret, hdrVerify, "SUCCESS"))
		if err != nil {
			t.Fatalf("Session: %v", err)
		}
		return s
	}

	t.Run("the certificate's subject", func(t *testing.T) {
		direct := request()
		direct.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{ca.issue(t, cilogonSubject(t, "Jürgen Müller")), ca.cert}}
		ds, err := a.Session(direct)
		if err != nil || ds.CredentialError != "" {
			t.Fatalf("TLS session: %v %q", err, ds.CredentialError)
		}
		if want := "CN=Jürgen Müller,O=Example,C=US,DC=cilogon,DC=org"; ds.Subject != want {
			t.Fatalf("TLS subject %q, want %q", ds.Subject, want)
		}
		// What nginx forwards for the same certificate.
		ps := forward(t, `CN=J\C3\BCrgen M\C3\BCller,O=Example,C=US,DC=cilogon,DC=org`)
		if ps.CredentialError != "" || ps.Subject != ds.Subject {
			t.Errorf("the same certificate is subject %q (%q) behind the proxy and %q over TLS", ps.Subject, ps.CredentialError, ds.Subject)
		}
	})

	tests := []struct{ name, forwarded, want string }{
		{"plain", janeDN, janeDN},
		{"UTF-8 unescaped (Apache)", "CN=Jürgen Müller,O=Example,C=US,DC=cilogon,DC=org", "CN=Jürgen Müller,O=Example,C=US,DC=cilogon,DC=org"},
		{"lower-case hex", `CN=J\c3\bcrgen,DC=org`, "CN=Jürgen,DC=org"},
		{"specials as SubjectDN escapes them", `CN=Doe\, Jane\2B\3dx=y,DC=org`, `CN=Doe\, Jane\+\=x\=y,DC=org`},
		{"leading hash and trailing space", `CN=\#1 Jane\20,DC=org`, `CN=\#1 Jane\ ,DC=org`},
		{"SubjectDN's own form is kept", `CN=a\+b \"c\"\;\<d\>\\e,O=Example,C=US,DC=cilogon,DC=org`, `CN=a\+b \"c\"\;\<d\>\\e,O=Example,C=US,DC=cilogon,DC=org`},
		{"multi-valued RDN", `CN=J\C3\BCrgen+UID=jm,DC=org`, "CN=Jürgen+UID=jm,DC=org"},
		{"OpenSSL attribute names", `serialNumber=A1,street=Main St,postalCode=123,CN=x`, `SERIALNUMBER=A1,STREET=Main St,POSTALCODE=123,CN=x`},
		{"unknown attribute dumped as BER", `1.2.3.4=#0C0178,DC=org`, "1.2.3.4=x,DC=org"},
		{"LDAP subject, lower case", "uid=jones,o=NCEAS,dc=ecoinformatics,dc=org", "uid=jones,o=NCEAS,dc=ecoinformatics,dc=org"},
		{"not a DN", "http://orcid.org/0000-0002-1825-0097", "http://orcid.org/0000-0002-1825-0097"},
		{"spaces after commas, kept", "CN=Jane Doe, O=Example", "CN=Jane Doe, O=Example"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := forward(t, tc.forwarded)
			if s.CredentialError != "" || s.Subject != tc.want {
				t.Errorf("forwarded %q is subject %q (%q), want %q", tc.forwarded, s.Subject, s.CredentialError, tc.want)
			}
		})
	}

	for _, bad := range []string{`CN=J\C3rgen,DC=org`, `CN=\FF,DC=org`, `CN=\C3,DC=org`} {
		t.Run("not UTF-8 "+bad, func(t *testing.T) {
			s := forward(t, bad)
			if s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "UTF-8") {
				t.Errorf("forwarded %q gave %q (%q), want the public session with the reason", bad, s.Subject, s.CredentialError)
			}
		})
	}
}
