package auth

import (
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
