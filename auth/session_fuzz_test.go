package auth

// Fuzz targets of the credentials a client presents: bearer tokens (verified
// against fixed keys) and client certificates (their subject and SubjectInfo
// extension). Run one with
//
//	go test -run '^$' -fuzz '^FuzzTokenSession$' -fuzztime 60s ./auth/

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/golang-jwt/jwt/v5"
)

// FuzzTokenSession sends a bearer token to Authenticator.Session with fixed
// keys: it never fails the request; a refused token gives the public session
// and a reason, never a subject; an accepted one is an RS256 token whose
// unverified claims name the session's subject, with authenticatedUser and
// public, each once.
func FuzzTokenSession(f *testing.F) {
	now := time.Now()
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims(aliceDN)
		edit(c)
		return c
	}
	for _, tok := range []string{
		signRS256(f, cnKey(), validClaims(aliceDN)),
		signRS256(f, cnKey(), with(func(c jwt.MapClaims) { delete(c, "sub"); c["userId"] = "http://orcid.org/0000-0002-1825-0097" })),
		signRS256(f, cnKey(), with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() })),
		signRS256(f, cnKey(), with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() })),
		signRS256(f, cnKey(), with(func(c jwt.MapClaims) { delete(c, "exp") })),
		signRS256(f, cnKey(), with(func(c jwt.MapClaims) { c["sub"] = 7 })),
		signRS256(f, otherKey(), validClaims(aliceDN)),
		unsignedToken(f, validClaims(aliceDN)),
		"", "a.b.c", "eyJ.eyJ.", "Bearer x", strings.Repeat("A", 300),
	} {
		f.Add(tok)
	}
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&otherKey().PublicKey, &cnKey().PublicKey}})
	f.Fuzz(func(t *testing.T, token string) {
		req := httptest.NewRequest("GET", "http://x/mn/v2/whoami", nil)
		req.Header["Authorization"] = []string{"Bearer " + token}
		s, err := a.Session(req)
		if err != nil {
			t.Fatalf("Session failed the request: %v", err)
		}
		if s.CredentialError != "" || s.Subject == adapter.SubjectPublic {
			if s.Subject != adapter.SubjectPublic || !slices.Equal(s.Subjects, []string{adapter.SubjectPublic}) {
				t.Fatalf("a refused token (%q) gave subjects %q", s.CredentialError, s.Subjects)
			}
			if strings.TrimSpace(token) != "" && s.CredentialError == "" {
				t.Fatal("a presented token was refused without a reason")
			}
			return
		}
		// Accepted: only the fixed keys sign RS256, so it must say so unverified.
		parts := strings.Split(strings.TrimSpace(token), ".")
		if len(parts) != 3 {
			t.Fatalf("accepted a token of %d parts", len(parts))
		}
		var header struct{ Alg string }
		if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &header) != nil || header.Alg != "RS256" {
			t.Fatalf("accepted a token whose header is not RS256: %q", parts[0])
		}
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(strings.TrimSpace(token), claims); err != nil {
			t.Fatalf("accepted a token that does not parse: %v", err)
		}
		sub, _ := claims["sub"].(string)
		if sub == "" {
			sub, _ = claims["userId"].(string)
		}
		if sub == "" || s.Subject != sub || s.Subjects[0] != sub {
			t.Fatalf("session subject %q, the token names %q", s.Subject, sub)
		}
		if !slices.Contains(s.Subjects, adapter.SubjectAuthenticatedUser) || !slices.Contains(s.Subjects, adapter.SubjectPublic) {
			t.Fatalf("subjects %q", s.Subjects)
		}
		for i, x := range s.Subjects {
			if slices.Index(s.Subjects, x) != i {
				t.Fatalf("subject %q twice in %q", x, s.Subjects)
			}
		}
	})
}

// FuzzCertificateSubjects gives CertificateSubjects a raw subject and a
// SubjectInfo extension: no panic; on success the DN comes first, as
// SubjectDN renders it, and every other subject is non-empty and listed once;
// a session from such a certificate is never public with an error.
func FuzzCertificateSubjects(f *testing.F) {
	subjects := [][]byte{
		cilogonSubject(f, "Jane Doe"),
		cilogonSubject(f, `a+b "c";<d>\e`),
		cilogonSubject(f, "#1 Jane "),
		rawSubject(f, []rdn{{oidDC, "org"}}, []rdn{{oidCN, "Jane"}, {oidUID, "jd"}}),
		rawSubject(f, []rdn{{oidDC, "org"}}, []rdn{{asn1.ObjectIdentifier{1, 2, 3, 4}, "x"}}),
		{0x30, 0x00}, {},
	}
	infos := [][]byte{nil, subjectInfoExt(f, janeSubjectInfo, false).Value, subjectInfoExt(f, janeSubjectInfo, true).Value, []byte("<x/>"), {0x0c, 0x01, '<'}}
	for _, s := range subjects {
		for _, i := range infos {
			f.Add(s, i)
		}
	}
	a := NewAuthenticator(AuthenticatorOptions{})
	f.Fuzz(func(t *testing.T, rawSubject, info []byte) {
		// Raw, which the credential cache keys on, differs as a real certificate's would.
		c := &x509.Certificate{Raw: []byte(fmt.Sprintf("%x|%x", rawSubject, info)), RawSubject: rawSubject,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		if info != nil {
			c.Extensions = []pkix.Extension{{Id: oidSubjectInfo, Value: info}}
		}
		got, err := CertificateSubjects(c)
		if err == nil {
			dn, derr := SubjectDN(c)
			if derr != nil || len(got) == 0 || got[0] != dn {
				t.Fatalf("subjects %q, DN %q (%v)", got, dn, derr)
			}
			for i, x := range got {
				if i > 0 && x == "" || slices.Index(got, x) != i {
					t.Fatalf("subjects %q", got)
				}
			}
		}
		req := httptest.NewRequest("GET", "https://x/mn/v2/whoami", nil)
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
		s, serr := a.Session(req)
		switch {
		case serr != nil:
			t.Fatalf("Session failed the request: %v", serr)
		case err != nil && (s.CredentialError == "" || s.Subject != adapter.SubjectPublic):
			t.Fatalf("an unusable certificate (%v) gave session %+v", err, s)
		case err == nil && len(got) > 0 && got[0] != "" && s.Subject != got[0]:
			t.Fatalf("session subject %q, certificate subject %q", s.Subject, got[0])
		}
	})
}
