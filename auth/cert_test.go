package auth

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// janeDN is the DataONE form of the subject cilogonSubject encodes.
const janeDN = "CN=Jane Doe,O=Example,C=US,DC=cilogon,DC=org"

// cilogonSubject is a CILogon-style subject, in ASN.1 order (least specific first).
func cilogonSubject(t testing.TB, cn string) []byte {
	return rawSubject(t, []rdn{{oidDC, "org"}}, []rdn{{oidDC, "cilogon"}}, []rdn{{oidC, "US"}},
		[]rdn{{oidO, "Example"}}, []rdn{{oidCN, cn}})
}

// TestCertSubjectDN checks the DataONE rendering of certificate subjects: RFC
// 4514, most specific first, upper-case types (DC and UID by name, not OID),
// special characters escaped.
func TestCertSubjectDN(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "Test CILogon CA")
	tests := []struct {
		name    string
		subject []byte
		want    []string // any of these (a multi-valued RDN's order is DER's)
	}{
		{"cilogon", cilogonSubject(t, "Jane Doe"), []string{janeDN}},
		{"comma in CN", cilogonSubject(t, "Doe, Jane"), []string{`CN=Doe\, Jane,O=Example,C=US,DC=cilogon,DC=org`}},
		{"plus, quotes, semicolon, angle brackets, backslash", cilogonSubject(t, `a+b "c";<d>\e`),
			[]string{`CN=a\+b \"c\"\;\<d\>\\e,O=Example,C=US,DC=cilogon,DC=org`}},
		{"leading hash and spaces", cilogonSubject(t, "#1 Jane "), []string{`CN=\#1 Jane\ ,O=Example,C=US,DC=cilogon,DC=org`}},
		{"leading space", cilogonSubject(t, " Jane"), []string{`CN=\ Jane,O=Example,C=US,DC=cilogon,DC=org`}},
		{"non-ASCII", cilogonSubject(t, "Jürgen Müller"), []string{"CN=Jürgen Müller,O=Example,C=US,DC=cilogon,DC=org"}},
		{"uid and ou", rawSubject(t, []rdn{{oidDC, "org"}}, []rdn{{oidDC, "example"}}, []rdn{{oidOU, "People"}}, []rdn{{oidUID, "alice"}}),
			[]string{"UID=alice,OU=People,DC=example,DC=org"}},
		{"multi-valued RDN", rawSubject(t, []rdn{{oidDC, "org"}}, []rdn{{oidCN, "Jane"}, {oidUID, "jd"}}),
			[]string{"CN=Jane+UID=jd,DC=org", "UID=jd+CN=Jane,DC=org"}},
		{"unknown attribute by OID", rawSubject(t, []rdn{{oidDC, "org"}}, []rdn{{asn1.ObjectIdentifier{1, 2, 3, 4}, "x"}}),
			[]string{"1.2.3.4=x,DC=org"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ca.issue(t, tc.subject)
			got, err := SubjectDN(c)
			if err != nil {
				t.Fatalf("SubjectDN: %v", err)
			}
			if !slices.Contains(tc.want, got) {
				t.Errorf("SubjectDN = %q, want %q", got, tc.want[0])
			}
			// Forwarded by a proxy as d1bridge writes it, it is the same subject.
			if fwd, err := ForwardedDN(got); err != nil || fwd != got {
				t.Errorf("ForwardedDN(%q) = %q, %v; want it unchanged", got, fwd, err)
			}
			subjects, err := CertificateSubjects(c)
			if err != nil || !slices.Equal(subjects, []string{got}) {
				t.Errorf("CertificateSubjects = %q, %v; want just the DN", subjects, err)
			}
		})
	}
}

// subjectInfoExt is DataONE's SubjectInfo extension holding doc, as a UTF8String
// (raw stores the XML bytes unwrapped, as some issuers do).
func subjectInfoExt(t testing.TB, doc string, raw bool) pkix.Extension {
	t.Helper()
	if raw {
		return pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 34998, 2, 1}, Value: []byte(doc)}
	}
	b, err := asn1.MarshalWithParams(doc, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 34998, 2, 1}, Value: b}
}

const (
	orcid     = "http://orcid.org/0000-0002-1825-0097"
	janeGroup = "CN=lab-members,DC=dataone,DC=org"
	labGroup  = "CN=field-team,DC=dataone,DC=org"
)

// janeSubjectInfo lists Jane, verified, with an equivalent identity and a group;
// another person (whose claims must not rub off on Jane); and a group that has
// Jane as a member.
var janeSubjectInfo = `<?xml version="1.0" encoding="UTF-8"?>
<d1:subjectInfo xmlns:d1="http://ns.dataone.org/service/types/v1">
  <person>
    <subject>` + janeDN + `</subject>
    <givenName>Jane</givenName>
    <familyName>Doe</familyName>
    <email>jane@example.org</email>
    <isMemberOf>` + janeGroup + `</isMemberOf>
    <equivalentIdentity>` + orcid + `</equivalentIdentity>
    <verified>true</verified>
  </person>
  <person>
    <subject>CN=Someone Else,O=Example,C=US,DC=cilogon,DC=org</subject>
    <familyName>Else</familyName>
    <isMemberOf>CN=dataone-admins,DC=dataone,DC=org</isMemberOf>
    <equivalentIdentity>CN=admin,DC=dataone,DC=org</equivalentIdentity>
    <verified>true</verified>
  </person>
  <group>
    <subject>` + labGroup + `</subject>
    <groupName>field team</groupName>
    <hasMember>` + janeDN + `</hasMember>
  </group>
  <group>
    <subject>CN=not-jane,DC=dataone,DC=org</subject>
    <groupName>others</groupName>
    <hasMember>CN=Someone Else,O=Example,C=US,DC=cilogon,DC=org</hasMember>
  </group>
</d1:subjectInfo>`

func TestCertSubjectInfo(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "Test DataONE CA")
	want := []string{janeDN, orcid, janeGroup, adapter.SubjectVerifiedUser, labGroup}
	for _, raw := range []bool{false, true} {
		name := map[bool]string{false: "UTF8String", true: "raw XML"}[raw]
		t.Run(name, func(t *testing.T) {
			c := ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, janeSubjectInfo, raw))
			got, err := CertificateSubjects(c)
			if err != nil {
				t.Fatalf("CertificateSubjects: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("subjects %q, want %q", got, want)
			}
		})
	}
	t.Run("unverified", func(t *testing.T) {
		doc := strings.Replace(janeSubjectInfo, "<verified>true</verified>", "<verified>false</verified>", 1)
		got, err := CertificateSubjects(ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, doc, false)))
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(got, adapter.SubjectVerifiedUser) {
			t.Errorf("verified=false gave %q", got)
		}
	})
	t.Run("invalid document", func(t *testing.T) {
		c := ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, "<subjectInfo><person>", false))
		if _, err := CertificateSubjects(c); err == nil || !strings.Contains(err.Error(), "SubjectInfo") {
			t.Errorf("error %v, want one about the SubjectInfo extension", err)
		}
	})
}

// TestCertSession runs certificates through Authenticator.Session, as a TLS
// listener hands them over: the certificate comes before a bearer token, its
// subjects are followed by authenticatedUser and public, and an unusable one
// gives the public session with the reason.
func TestCertSession(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "Test DataONE CA")
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: []*rsa.PublicKey{&cnKey().PublicKey}})
	withCert := func(c *x509.Certificate, header ...string) *adapter.Session {
		r := request(header...)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c, ca.cert}}
		s, err := a.Session(r)
		if err != nil {
			t.Fatalf("Session: %v", err)
		}
		return s
	}
	s := withCert(ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, janeSubjectInfo, false)),
		"Authorization", "Bearer "+signRS256(t, cnKey(), validClaims(aliceDN)))
	want := []string{janeDN, orcid, janeGroup, adapter.SubjectVerifiedUser, labGroup, adapter.SubjectAuthenticatedUser, adapter.SubjectPublic}
	if s.Subject != janeDN || !slices.Equal(s.Subjects, want) {
		t.Errorf("session %q %q, want %q %q", s.Subject, s.Subjects, janeDN, want)
	}

	s = withCert(ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, "<nope", false)))
	if s.Subject != adapter.SubjectPublic || !strings.Contains(s.CredentialError, "SubjectInfo") {
		t.Errorf("a certificate with a broken SubjectInfo gave %q (%q), want public with the reason", s.Subject, s.CredentialError)
	}

	// TLS without a client certificate: the token is used.
	r := bearerRequest(signRS256(t, cnKey(), validClaims(aliceDN)))
	r.TLS = &tls.ConnectionState{}
	if s, _ := a.Session(r); s.Subject != aliceDN {
		t.Errorf("TLS without a client certificate and a token gave %q, want %q", s.Subject, aliceDN)
	}
}

// TestSubjectInfoFollowsEquivalentIdentities: the subjects a certificate's
// SubjectInfo establishes are the primary's and, transitively, those of its
// equivalent identities: their groups (isMemberOf, and groups listing them as
// hasMember), their own equivalents and their verified flag, as DataONE's
// AuthUtils.findPersonsSubjects recurses into every equivalent identity.
// Here Jane's CILogon DN maps to her ORCID, and the ORCID person is the one in
// the groups (as in DataONE, where groups list ORCID members). Cycles among
// equivalents end; a person no identity leads to adds nothing.
func TestSubjectInfoFollowsEquivalentIdentities(t *testing.T) {
	t.Parallel()
	const (
		orcidGroup  = "CN=orcid-lab,DC=dataone,DC=org"
		orcidTeam   = "CN=orcid-team,DC=dataone,DC=org"
		secondOrcid = "http://orcid.org/0000-0001-0000-0001"
		thirdGroup  = "CN=third,DC=dataone,DC=org"
	)
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<d1:subjectInfo xmlns:d1="http://ns.dataone.org/service/types/v1">
  <person>
    <subject>` + janeDN + `</subject>
    <givenName>Jane</givenName>
    <familyName>Doe</familyName>
    <equivalentIdentity>` + orcid + `</equivalentIdentity>
  </person>
  <person>
    <subject>` + orcid + `</subject>
    <givenName>Jane</givenName>
    <familyName>Doe</familyName>
    <isMemberOf>` + orcidGroup + `</isMemberOf>
    <equivalentIdentity>` + secondOrcid + `</equivalentIdentity>
    <equivalentIdentity>` + janeDN + `</equivalentIdentity>
    <verified>true</verified>
  </person>
  <person>
    <subject>` + secondOrcid + `</subject>
    <familyName>Doe</familyName>
    <equivalentIdentity>` + orcid + `</equivalentIdentity>
    <equivalentIdentity>` + secondOrcid + `</equivalentIdentity>
  </person>
  <person>
    <subject>CN=Someone Else,O=Example,C=US,DC=cilogon,DC=org</subject>
    <familyName>Else</familyName>
    <isMemberOf>CN=dataone-admins,DC=dataone,DC=org</isMemberOf>
    <equivalentIdentity>` + orcid + `</equivalentIdentity>
  </person>
  <group>
    <subject>` + orcidTeam + `</subject>
    <groupName>team</groupName>
    <hasMember>` + orcid + `</hasMember>
  </group>
  <group>
    <subject>` + thirdGroup + `</subject>
    <groupName>third</groupName>
    <hasMember>` + secondOrcid + `</hasMember>
  </group>
</d1:subjectInfo>`
	ca := newCA(t, "Test DataONE CA")
	got, err := CertificateSubjects(ca.issue(t, cilogonSubject(t, "Jane Doe"), subjectInfoExt(t, doc, false)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{janeDN, orcid, secondOrcid, orcidGroup, adapter.SubjectVerifiedUser, orcidTeam, thirdGroup}
	if !slices.Equal(got, want) {
		t.Errorf("subjects %q, want %q", got, want)
	}
}
