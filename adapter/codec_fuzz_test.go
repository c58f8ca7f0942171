package adapter_test

// Fuzz targets of what clients and upstream nodes send the adapter: identifiers,
// system metadata, access and replication policies, replica metadata and
// SubjectInfo documents. Run one with
//
//	go test -run '^$' -fuzz '^FuzzDecodeSystemMetadata$' -fuzztime 60s ./adapter/
//
// The seeds are the examples in testdata/examples and the documents of the
// codec tests; testdata/fuzz/<FuzzName>/ holds inputs that once failed.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/d1bridge/d1bridge/adapter"
)

// FuzzCheckIdentifier: an identifier CheckIdentifier accepts is valid UTF-8 of
// 1 to 800 characters with no whitespace, no control character and nothing XML
// 1.0 cannot carry (U+FFFE, U+FFFF), and every
// other is refused; an accepted one reads back unchanged from an identifier
// document.
func FuzzCheckIdentifier(f *testing.F) {
	for _, s := range []string{"x/y", "doi:10.5063/F1QN64NZ", "urn:uuid:0a1b", "a b", "a\x01b", "a\u0085b",
		"a\u00a0b", "", strings.Repeat("é", 800), strings.Repeat("a", 801), "\xff", "a\u2028b", "ab\ufffe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := adapter.CheckIdentifier(id)
		n := utf8.RuneCountInString(id)
		valid := utf8.ValidString(id) && n >= 1 && n <= adapter.MaxIdentifierLength &&
			strings.IndexFunc(id, unicode.IsSpace) < 0 && strings.IndexFunc(id, adapter.IsControl) < 0 &&
			!strings.ContainsAny(id, "\uFFFE\uFFFF")
		if (err == nil) != valid {
			t.Fatalf("CheckIdentifier(%q) = %v, want valid=%v", id, err, valid)
		}
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := adapter.Encode(&buf, &adapter.Identifier{Value: id}, 2); err != nil {
			t.Fatalf("Encode: %v", err)
		}
		var back adapter.Identifier
		if err := adapter.DecodeStrict(&buf, &back); err != nil {
			t.Fatalf("an accepted identifier %q does not read back: %v\n%s", id, err, buf.String())
		}
		if back.Value != id {
			t.Fatalf("identifier %q reads back as %q", id, back.Value)
		}
	})
}

// addExamples adds every XML example of testdata/examples as a seed.
func addExamples(f *testing.F) {
	paths, _ := filepath.Glob("testdata/examples/*.xml")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

const smV2 = `<?xml version="1.0"?><d2:systemMetadata xmlns:d2="http://ns.dataone.org/service/types/v2.0">` +
	`<serialVersion>1</serialVersion><identifier>p1</identifier><formatId>text/plain</formatId>` +
	`<size>5</size><checksum algorithm="MD5">5d41402abc4b2a76b9719d911017c592</checksum>` +
	`<submitter>CN=a</submitter><rightsHolder>CN=a</rightsHolder>` +
	`<accessPolicy><allow><subject>public</subject><permission>read</permission></allow></accessPolicy>` +
	`<replicationPolicy replicationAllowed="true" numberReplicas="2"><preferredMemberNode>urn:node:A</preferredMemberNode>` +
	`<blockedMemberNode>urn:node:B</blockedMemberNode></replicationPolicy><obsoletes>p0</obsoletes>` +
	`<archived>false</archived><dateUploaded>2024-01-31T12:00:00.000Z</dateUploaded>` +
	`<dateSysMetadataModified>2024-01-31T12:00:00Z</dateSysMetadataModified>` +
	`<originMemberNode>urn:node:A</originMemberNode><authoritativeMemberNode>urn:node:A</authoritativeMemberNode>` +
	`<replica><replicaMemberNode>urn:node:A</replicaMemberNode><replicationStatus>completed</replicationStatus>` +
	`<replicaVerified>2024-01-31</replicaVerified></replica><seriesId>s1</seriesId>` +
	`<mediaType name="text/csv"><property name="header">present</property></mediaType><fileName>a.txt</fileName>` +
	`</d2:systemMetadata>`

// FuzzDecodeSystemMetadata: system metadata v1 or v2 never panics the decoders;
// what DecodeStrict accepts Decode accepts too, with the same result; what is
// decoded writes out (v2 and v1) and reads back strictly to the same value (v1:
// its v1 view); CheckSystemMetadata's refusals are Exceptions of the kinds it
// promises.
func FuzzDecodeSystemMetadata(f *testing.F) {
	addExamples(f)
	f.Add([]byte(smV2))
	f.Add([]byte(strings.ReplaceAll(smV2, "types/v2.0", "types/v1")))
	f.Add([]byte(strings.Replace(smV2, "<archived>", "<bogus/><archived>", 1)))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var loose adapter.SystemMetadata
		looseErr := adapter.Decode(bytes.NewReader(doc), &loose)
		var sm adapter.SystemMetadata
		if err := adapter.DecodeStrict(bytes.NewReader(doc), &sm); err != nil {
			return
		}
		if looseErr != nil {
			t.Fatalf("DecodeStrict accepts what Decode refuses (%v)", looseErr)
		}
		if !reflect.DeepEqual(loose, sm) {
			t.Fatalf("Decode and DecodeStrict differ:\n%+v\n%+v", loose, sm)
		}
		roundTrip(t, &sm, 2, &sm)
		roundTrip(t, &sm, 1, adapter.ViewV1(&sm))
		if err := adapter.CheckSystemMetadata(&sm); err != nil {
			wantKind(t, err, adapter.InvalidSystemMetadata, adapter.InvalidRequest)
		}
	})
}

// roundTrip writes v in API version and checks that it reads back strictly as want.
func roundTrip[T any](t *testing.T, v *T, version int, want any) {
	t.Helper()
	var buf bytes.Buffer
	if err := adapter.Encode(&buf, v, version); err != nil {
		t.Fatalf("Encode v%d: %v", version, err)
	}
	var back T
	if err := adapter.DecodeStrict(bytes.NewReader(buf.Bytes()), &back); err != nil {
		t.Fatalf("what Encode v%d wrote does not decode: %v\n%s", version, err, buf.String())
	}
	if !reflect.DeepEqual(&back, want) {
		t.Fatalf("v%d round trip changed the document:\n%#v\n%#v\n%s", version, want, &back, buf.String())
	}
}

// wantKind checks that err is an Exception of one of kinds.
func wantKind(t *testing.T, err error, kinds ...adapter.Kind) {
	t.Helper()
	var e *adapter.Exception
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an Exception", err, err)
	}
	for _, k := range kinds {
		if e.Kind == k {
			return
		}
	}
	t.Fatalf("exception %v, want one of %v", e.Kind, kinds)
}

// FuzzDecodePolicies: access policies, replication policies (as the CN setters
// and MN setAccessPolicy receive them), replica metadata and SubjectInfo never
// panic the strict decoder and round-trip through Encode; the policy checks
// never pass an empty subject or node, nor more than the caps.
func FuzzDecodePolicies(f *testing.F) {
	const (
		ap  = `<d1:accessPolicy xmlns:d1="http://ns.dataone.org/service/types/v1"><allow><subject>public</subject><subject>CN=a</subject><permission>read</permission><permission>write</permission></allow></d1:accessPolicy>`
		rp  = `<d1:replicationPolicy xmlns:d1="http://ns.dataone.org/service/types/v1" replicationAllowed="true" numberReplicas="2"><preferredMemberNode>urn:node:A</preferredMemberNode><blockedMemberNode>urn:node:B</blockedMemberNode></d1:replicationPolicy>`
		rep = `<d1:replica xmlns:d1="http://ns.dataone.org/service/types/v1"><replicaMemberNode>urn:node:A</replicaMemberNode><replicationStatus>completed</replicationStatus><replicaVerified>2024-01-01T00:00:00Z</replicaVerified></d1:replica>`
		si  = `<d1:subjectInfo xmlns:d1="http://ns.dataone.org/service/types/v1"><person><subject>CN=Jane</subject><givenName>Jane</givenName><familyName>Doe</familyName><isMemberOf>CN=g</isMemberOf><equivalentIdentity>http://orcid.org/0000-0002-1825-0097</equivalentIdentity><verified>true</verified></person><group><subject>CN=g</subject><groupName>g</groupName><hasMember>CN=Jane</hasMember></group></d1:subjectInfo>`
	)
	for i, d := range []string{ap, rp, rep, si} {
		f.Add(uint8(i), []byte(d))
	}
	f.Add(uint8(0), []byte(strings.Replace(ap, "<permission>read", "<deny/><permission>read", 1)))
	f.Add(uint8(1), []byte(strings.Replace(rp, "urn:node:B", " ", 1)))
	f.Fuzz(func(t *testing.T, which uint8, doc []byte) {
		switch which % 4 {
		case 0:
			var p adapter.AccessPolicy
			if adapter.DecodeStrict(bytes.NewReader(doc), &p) != nil {
				return
			}
			roundTrip(t, &p, 2, &p)
			if adapter.CheckAccessPolicy(&p) == nil {
				if len(p.Allow) > adapter.MaxAccessRules {
					t.Fatalf("%d rules pass", len(p.Allow))
				}
				for _, r := range p.Allow {
					if len(r.Subject) == 0 || len(r.Permission) == 0 {
						t.Fatalf("rule %+v passes", r)
					}
					for _, s := range r.Subject {
						if strings.TrimSpace(s) == "" || strings.IndexFunc(s, adapter.IsControl) >= 0 {
							t.Fatalf("subject %q passes", s)
						}
					}
					for _, perm := range r.Permission {
						if perm.Level() == 0 {
							t.Fatalf("permission %q passes", perm)
						}
					}
				}
			}
		case 1:
			var p adapter.ReplicationPolicy
			if adapter.DecodeStrict(bytes.NewReader(doc), &p) != nil {
				return
			}
			roundTrip(t, &p, 2, &p)
			if adapter.CheckReplicationPolicy(&p) == nil {
				for _, n := range append(append([]string{}, p.PreferredMemberNode...), p.BlockedMemberNode...) {
					if strings.TrimSpace(n) == "" || strings.IndexFunc(n, adapter.IsControl) >= 0 {
						t.Fatalf("node %q passes", n)
					}
				}
				if p.NumberReplicas != nil && *p.NumberReplicas < 0 {
					t.Fatalf("numberReplicas %d passes", *p.NumberReplicas)
				}
			}
		case 2:
			var r adapter.Replica
			if adapter.DecodeStrict(bytes.NewReader(doc), &r) != nil {
				return
			}
			roundTrip(t, &r, 2, &r)
		case 3:
			var s adapter.SubjectInfo
			if adapter.DecodeStrict(bytes.NewReader(doc), &s) != nil {
				return
			}
			roundTrip(t, &s, 2, &s)
		}
	})
}
