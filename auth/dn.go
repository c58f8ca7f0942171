package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/d1bridge/d1bridge/adapter"
)

// attributeNames are the RDN types DataONE subjects use (RFC 4514 plus DC and UID,
// which Go's pkix prints as OIDs).
var attributeNames = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.9": "STREET",
	"2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.5": "SERIALNUMBER", "2.5.4.17": "POSTALCODE",
	"0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
	"1.2.840.113549.1.9.1": "emailAddress",
}

// SubjectDN renders a certificate subject the way DataONE writes subjects:
// RFC 4514, most specific first, upper-case attribute types
// (CN=Jane Doe A123,O=Google,C=US,DC=cilogon,DC=org).
func SubjectDN(c *x509.Certificate) (string, error) {
	var seq pkix.RDNSequence
	if _, err := asn1.Unmarshal(c.RawSubject, &seq); err != nil {
		return "", fmt.Errorf("the certificate subject cannot be read: %v", err)
	}
	var parts []string
	for i := len(seq) - 1; i >= 0; i-- {
		var atvs []string
		for _, atv := range seq[i] {
			name, ok := attributeNames[atv.Type.String()]
			if !ok {
				name = atv.Type.String()
			}
			atvs = append(atvs, name+"="+escapeRDN(fmt.Sprint(atv.Value)))
		}
		parts = append(parts, strings.Join(atvs, "+"))
	}
	return strings.Join(parts, ","), nil
}

func escapeRDN(v string) string {
	var b strings.Builder
	for i, r := range v {
		switch {
		case strings.ContainsRune(`,+"\<>;=`, r),
			i == 0 && (r == ' ' || r == '#'),
			i == len(v)-1 && r == ' ':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// oidSubjectInfo is DataONE's certificate extension carrying a SubjectInfo document.
var oidSubjectInfo = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 34998, 2, 1}

// CertificateSubjects are the subjects a client certificate establishes: its DN,
// then the equivalent identities and groups its SubjectInfo extension lists for it
// (and verifiedUser when that says the person is verified).
func CertificateSubjects(c *x509.Certificate) ([]string, error) {
	dn, err := SubjectDN(c)
	if err != nil {
		return nil, err
	}
	subjects := []string{dn}
	for _, ext := range c.Extensions {
		if !ext.Id.Equal(oidSubjectInfo) {
			continue
		}
		var doc string
		if _, err := asn1.UnmarshalWithParams(ext.Value, &doc, "utf8"); err != nil {
			doc = string(ext.Value) // some issuers store the XML raw
		}
		var info adapter.SubjectInfo
		if err := adapter.Decode(strings.NewReader(doc), &info); err != nil {
			return nil, fmt.Errorf("the certificate's SubjectInfo extension is not valid: %v", err)
		}
		subjects = appendSubjectInfo(subjects, dn, &info)
	}
	return subjects, nil
}

// appendSubjectInfo adds the subjects info establishes for primary: the
// identities reachable from it through equivalentIdentity, transitively (as
// DataONE's AuthUtils.findPersonsSubjects recurses), each identity's groups
// (isMemberOf, and the groups listing it as hasMember) and verifiedUser when
// one of them is verified. The document comes from the client: each identity
// is followed once (cycles end), and the work is linear in its size.
func appendSubjectInfo(subjects []string, primary string, info *adapter.SubjectInfo) []string {
	seen := make(map[string]bool, len(subjects))
	for _, s := range subjects {
		seen[s] = true
	}
	add := func(ss ...string) {
		for _, s := range ss {
			if s != "" && !seen[s] {
				seen[s] = true
				subjects = append(subjects, s)
			}
		}
	}
	persons := make(map[string][]int, len(info.Person))
	for i, p := range info.Person {
		persons[p.Subject] = append(persons[p.Subject], i)
	}
	identities := map[string]bool{primary: true}
	for queue := []string{primary}; len(queue) > 0; queue = queue[1:] {
		for _, i := range persons[queue[0]] {
			p := &info.Person[i]
			for _, e := range p.EquivalentIdentity {
				if e != "" && !identities[e] {
					identities[e] = true
					queue = append(queue, e)
				}
			}
			add(p.EquivalentIdentity...)
			add(p.IsMemberOf...)
			if p.Verified != nil && *p.Verified {
				add(adapter.SubjectVerifiedUser)
			}
		}
	}
	for _, g := range info.Group {
		if slices.ContainsFunc(g.HasMember, func(m string) bool { return identities[m] }) {
			add(g.Subject)
		}
	}
	return subjects
}

// openSSLNames are the attribute types OpenSSL's RFC 2253 form (nginx's
// $ssl_client_s_dn, Apache's SSL_CLIENT_S_DN) spells otherwise than SubjectDN.
var openSSLNames = map[string]string{"serialNumber": "SERIALNUMBER", "street": "STREET", "postalCode": "POSTALCODE"}

// ForwardedDN is the subject a front proxy forwards, written as SubjectDN
// writes a certificate's, so that a person is one subject behind the proxy and
// over TLS: nginx escapes every byte above 0x7F as \XX ("CN=J\C3\BCrgen")
// where SubjectDN writes "CN=Jürgen". A strict RFC 4514 DN has its escapes
// decoded and its values escaped again as SubjectDN does, values dumped as BER
// (#hex, OpenSSL's form for unknown attributes) decoded, and OpenSSL's
// attribute names given SubjectDN's; attribute types otherwise keep their
// case (uid=jones,dc=org stays so). Anything else (an ORCID, a DN with spaces
// after its commas) is kept as sent.
//
// A value that is not UTF-8 once decoded is refused rather than kept escaped:
// no certificate has such a subject (Go refuses the certificate, OpenSSL
// cannot print it), so only a broken or forged header sends one, and kept it
// would be another spelling of a name, matching no rule written for it.
func ForwardedDN(s string) (string, error) {
	var out strings.Builder
	for i := 0; ; {
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 || !attributeType(s[i:i+eq]) {
			return s, nil
		}
		typ := s[i : i+eq]
		if name, ok := openSSLNames[typ]; ok {
			typ = name
		}
		i += eq + 1
		var value string
		if i < len(s) && s[i] == '#' {
			end := i + strings.IndexAny(s[i:]+",", ",+")
			v, ok := berValue(s[i+1 : end])
			if !ok {
				return s, nil
			}
			value, i = v, end
		} else {
			var (
				b       []byte
				escaped bool // the last character was escaped
				begin   = i
			)
			for i < len(s) && s[i] != ',' && s[i] != '+' {
				c := s[i]
				switch {
				case c == '\\' && i+1 < len(s) && strings.IndexByte(`"+,;<>\= #`, s[i+1]) >= 0:
					b, i, escaped = append(b, s[i+1]), i+2, true
				case c == '\\':
					x, err := hex.DecodeString(s[i+1 : min(i+3, len(s))])
					if err != nil || len(x) != 1 {
						return s, nil
					}
					b, i, escaped = append(b, x[0]), i+3, true
				case strings.IndexByte(`";<>`, c) >= 0, c == 0, c == ' ' && i == begin:
					return s, nil // unescaped where RFC 4514 wants an escape
				default:
					b, i, escaped = append(b, c), i+1, false
				}
			}
			if i > begin && s[i-1] == ' ' && !escaped {
				return s, nil // an unescaped trailing space
			}
			value = string(b)
		}
		if !utf8.ValidString(value) {
			return "", fmt.Errorf("the forwarded subject %q is not UTF-8 once its \\XX escapes are decoded", s)
		}
		out.WriteString(typ + "=" + escapeRDN(value))
		if i == len(s) {
			return out.String(), nil
		}
		out.WriteByte(s[i]) // the separator, ',' or '+'
		i++
	}
}

// attributeType says whether t is an RFC 4514 attribute type: a keyword
// (ALPHA *(ALPHA / DIGIT / "-")) or a numeric OID.
func attributeType(t string) bool {
	if t == "" {
		return false
	}
	if t[0] >= '0' && t[0] <= '9' {
		for _, n := range strings.Split(t, ".") {
			if n == "" || strings.Trim(n, "0123456789") != "" || (len(n) > 1 && n[0] == '0') {
				return false
			}
		}
		return true
	}
	for i, c := range []byte(t) {
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alpha && (i == 0 || c != '-' && (c < '0' || c > '9')) {
			return false
		}
	}
	return true
}

// berValue is the value a #hex BER encoding holds, printed as SubjectDN prints
// an attribute value.
func berValue(h string) (string, bool) {
	raw, err := hex.DecodeString(h)
	if err != nil {
		return "", false
	}
	var v any
	if rest, err := asn1.Unmarshal(raw, &v); err != nil || len(rest) > 0 {
		return "", false
	}
	return fmt.Sprint(v), true
}
