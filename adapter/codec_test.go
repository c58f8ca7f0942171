package adapter_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

var (
	when     = adapter.NewTime(time.Date(2024, 3, 5, 14, 7, 9, 250_000_000, time.UTC))
	orcid    = "http://orcid.org/0000-0002-1756-2128"
	ldapUser = "CN=Jane Doe A123,O=Google,C=US,DC=cilogon,DC=org"
	group    = "CN=knb-data-admins,DC=dataone,DC=org"
)

func samplePerson() adapter.Person {
	return adapter.Person{
		Subject: ldapUser, GivenName: []string{"Jane"}, FamilyName: "Doe",
		Email: []string{"jane@example.org"}, IsMemberOf: []string{group},
		EquivalentIdentity: []string{orcid}, Verified: ptr(true),
	}
}

func sampleGroup() adapter.Group {
	return adapter.Group{Subject: group, GroupName: "knb-data-admins", HasMember: []string{ldapUser}, RightsHolder: []string{ldapUser}}
}

func sampleSystemMetadata() *adapter.SystemMetadata {
	return &adapter.SystemMetadata{
		SerialVersion: 2, Identifier: "urn:uuid:0b2b3d6c-7a43-4a5e-9e0c-51f4c1c2a1b7", FormatID: "text/csv", Size: 4096,
		Checksum:  adapter.Checksum{Algorithm: "SHA-256", Value: "adf8660f8a4ed57b79f8b590aa4597716037f374dfe9eae1bfb2ab4373a8cdf5"},
		Submitter: orcid, RightsHolder: orcid,
		AccessPolicy: &adapter.AccessPolicy{Allow: []adapter.AccessRule{
			{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}},
		}},
		ReplicationPolicy: &adapter.ReplicationPolicy{ReplicationAllowed: ptr(false)},
		DateUploaded:      when, DateSysMetadataModified: when,
		OriginMemberNode: "urn:node:d1bridge", AuthoritativeMemberNode: "urn:node:d1bridge",
		SeriesID:  "urn:series:temperatures",
		MediaType: &adapter.MediaType{Name: "text/csv", Property: []adapter.MediaTypeProperty{{Name: "charset", Value: "utf-8"}}},
		FileName:  "temperatures.csv",
	}
}

// TestDocumentsValidate renders every document type of the codec with realistic
// content in each API version, validates it against the official schema, and reads
// it back.
func TestDocumentsValidate(t *testing.T) {
	t.Parallel()
	both := []int{1, 2}
	cases := []struct {
		name     string
		doc      any
		versions []int
		v1NS     string // root namespace of the v1 rendering
		v2NS     string
	}{
		{"identifier", &adapter.Identifier{Value: "doi:10.5063/F1QN64NZ"}, both, adapter.NSv1, adapter.NSv1},
		{"checksum", &adapter.Checksum{Algorithm: "MD5", Value: "0cc175b9c0f1b6a831c399e269772661"}, both, adapter.NSv1, adapter.NSv1},
		{"checksumAlgorithmList", &adapter.ChecksumAlgorithmList{Algorithm: []string{"MD5", "SHA-1", "SHA-256"}}, both, adapter.NSv1, adapter.NSv1},
		{"objectLocationList", &adapter.ObjectLocationList{
			Identifier: "doi:10.5063/F1QN64NZ",
			ObjectLocation: []adapter.ObjectLocation{
				{NodeIdentifier: "urn:node:KNB", BaseURL: "https://knb.ecoinformatics.org/knb/d1/mn", Version: []string{"v1", "v2"},
					URL: "https://knb.ecoinformatics.org/knb/d1/mn/v2/object/doi%3A10.5063%2FF1QN64NZ", Preference: ptr(1)},
				{NodeIdentifier: "urn:node:mnUCSB1", BaseURL: "https://mn-ucsb-1.dataone.org/knb/d1/mn", Version: []string{"v1"},
					URL: "https://mn-ucsb-1.dataone.org/knb/d1/mn/v1/object/doi%3A10.5063%2FF1QN64NZ"},
			},
		}, both, adapter.NSv1, adapter.NSv1},
		{"objectLocationList empty", &adapter.ObjectLocationList{Identifier: "doi:10.5063/F1QN64NZ"}, both, adapter.NSv1, adapter.NSv1},
		{"accessPolicy", &adapter.AccessPolicy{Allow: []adapter.AccessRule{
			{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}},
			{Subject: []string{ldapUser, group}, Permission: []adapter.Permission{adapter.PermWrite, adapter.PermChangePermission}},
		}}, both, adapter.NSv1, adapter.NSv1},
		{"replicationPolicy", &adapter.ReplicationPolicy{
			ReplicationAllowed: ptr(true), NumberReplicas: ptr(2),
			PreferredMemberNode: []string{"urn:node:mnUCSB1"}, BlockedMemberNode: []string{"urn:node:mnTestKNB"},
		}, both, adapter.NSv1, adapter.NSv1},
		{"replicationPolicy empty", &adapter.ReplicationPolicy{}, both, adapter.NSv1, adapter.NSv1},
		{"replica", &adapter.Replica{ReplicaMemberNode: "urn:node:mnUCSB1", ReplicationStatus: adapter.ReplicaCompleted, ReplicaVerified: when}, both, adapter.NSv1, adapter.NSv1},
		{"subjectInfo", &adapter.SubjectInfo{Person: []adapter.Person{samplePerson()}, Group: []adapter.Group{sampleGroup()}}, both, adapter.NSv1, adapter.NSv1},
		{"subjectInfo empty", &adapter.SubjectInfo{}, both, adapter.NSv1, adapter.NSv1},
		{"subjectList", &adapter.SubjectList{Subject: []string{ldapUser, orcid}}, both, adapter.NSv1, adapter.NSv1},
		{"subjectList empty", &adapter.SubjectList{}, both, adapter.NSv1, adapter.NSv1},
		{"session", &adapter.SessionDoc{Subject: ldapUser, SubjectInfo: &adapter.SubjectInfo{Person: []adapter.Person{samplePerson()}, Group: []adapter.Group{sampleGroup()}}}, both, adapter.NSv1, adapter.NSv1},
		{"session public", &adapter.SessionDoc{Subject: adapter.SubjectPublic}, both, adapter.NSv1, adapter.NSv1},
		{"person", ptr(samplePerson()), both, adapter.NSv1, adapter.NSv1},
		{"person minimal", &adapter.Person{Subject: orcid, GivenName: []string{"Jane"}, FamilyName: "Doe"}, both, adapter.NSv1, adapter.NSv1},
		{"group", ptr(sampleGroup()), both, adapter.NSv1, adapter.NSv1},
		{"optionList", &adapter.OptionList{Key: "default", Description: "Themes of MNView.view", Option: []string{"default", "metacatui"}}, both, adapter.NSv2, adapter.NSv2},
		{"queryEngineList", &adapter.QueryEngineList{QueryEngine: []string{"solr"}}, both, adapter.NSv11, adapter.NSv11},
		{"objectList empty", &adapter.ObjectList{}, both, adapter.NSv1, adapter.NSv1},
		{"objectFormat", &adapter.ObjectFormat{
			FormatID: "text/csv", FormatName: "Comma Separated Values Text", FormatType: "DATA",
			MediaType: &adapter.MediaType{Name: "text/csv", Property: []adapter.MediaTypeProperty{{Name: "header", Value: "present"}}},
			Extension: "csv",
		}, both, adapter.NSv1, adapter.NSv2},
		{"systemMetadata", sampleSystemMetadata(), both, adapter.NSv1, adapter.NSv2},
		{"node with properties", &adapter.Node{
			Replicate: false, Synchronize: true, Type: adapter.NodeTypeMN, State: adapter.NodeUp,
			Identifier: "urn:node:d1bridge", Name: "d1bridge", Description: "A DataONE bridge",
			BaseURL: "https://d1bridge.example.org/mn",
			Services: &adapter.Services{Service: []adapter.Service{
				{Name: "MNCore", Version: "v2", Available: ptr(true)},
				{Name: "MNRead", Version: "v2", Available: ptr(true)},
				{Name: "MNStorage", Version: "v2", Available: ptr(true), Restriction: []adapter.ServiceMethodRestriction{
					{MethodName: "create", Subject: []string{ldapUser}},
				}},
			}},
			Synchronization: &adapter.Synchronization{
				Schedule:      adapter.Schedule{Hour: "*", Mday: "*", Min: "0/3", Mon: "*", Sec: "10", Wday: "?", Year: "*"},
				LastHarvested: when, LastCompleteHarvest: when,
			},
			NodeReplicationPolicy: &adapter.NodeReplicationPolicy{MaxObjectSize: ptr(uint64(1 << 30)), SpaceAllocated: ptr(uint64(1 << 40)),
				AllowedNode: []string{"urn:node:KNB"}, AllowedObjectFormat: []string{"text/csv"}},
			Ping:           &adapter.Ping{Success: ptr(true), LastSuccess: when},
			Subject:        []string{"CN=urn:node:d1bridge,DC=dataone,DC=org"},
			ContactSubject: []string{ldapUser},
			Property:       []adapter.Property{{Key: "upstream", Type: "string", Value: "webdav"}},
		}, both, adapter.NSv1, adapter.NSv2},
		{"log v1 events", &adapter.Log{Slice: adapter.Slice{Count: 1, Start: 0, Total: 1}, LogEntry: []adapter.LogEntry{{
			EntryID: "1", Identifier: "doi:10.5063/F1QN64NZ", IPAddress: "192.0.2.7", UserAgent: "curl/8.5.0",
			Subject: adapter.SubjectPublic, Event: adapter.EventRead, DateLogged: when, NodeIdentifier: "urn:node:d1bridge",
		}}}, both, adapter.NSv1, adapter.NSv2},
		{"log non-v1 event", &adapter.Log{Slice: adapter.Slice{Count: 1, Start: 10, Total: 11}, LogEntry: []adapter.LogEntry{{
			EntryID: "11", Identifier: "doi:10.5063/F1QN64NZ", IPAddress: "2001:db8::1", UserAgent: "",
			Subject: ldapUser, Event: "archive", DateLogged: when, NodeIdentifier: "urn:node:d1bridge",
		}}}, []int{2}, "", adapter.NSv2},
		{"log empty", &adapter.Log{}, both, adapter.NSv1, adapter.NSv2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, version := range c.versions {
				out := encode(t, c.doc, version)
				xsdtest.Validate(t, out)
				ns := c.v2NS
				if version == 1 {
					ns = c.v1NS
				}
				if got := rootName(t, out).Space; got != ns {
					t.Errorf("v%d root namespace %q, want %q", version, got, ns)
				}
				back := newLike(c.doc)
				decode(t, out, back)
				want := c.doc
				if version == 1 {
					want = adapter.ViewV1(c.doc)
				}
				assertEqual(t, back, want)
			}
		})
	}
}

// newLike returns a new zero document of the same type as v.
func newLike(v any) any {
	switch v.(type) {
	case *adapter.Identifier:
		return new(adapter.Identifier)
	case *adapter.Checksum:
		return new(adapter.Checksum)
	case *adapter.ChecksumAlgorithmList:
		return new(adapter.ChecksumAlgorithmList)
	case *adapter.ObjectLocationList:
		return new(adapter.ObjectLocationList)
	case *adapter.AccessPolicy:
		return new(adapter.AccessPolicy)
	case *adapter.ReplicationPolicy:
		return new(adapter.ReplicationPolicy)
	case *adapter.Replica:
		return new(adapter.Replica)
	case *adapter.SubjectInfo:
		return new(adapter.SubjectInfo)
	case *adapter.SubjectList:
		return new(adapter.SubjectList)
	case *adapter.SessionDoc:
		return new(adapter.SessionDoc)
	case *adapter.Person:
		return new(adapter.Person)
	case *adapter.Group:
		return new(adapter.Group)
	case *adapter.OptionList:
		return new(adapter.OptionList)
	case *adapter.QueryEngineList:
		return new(adapter.QueryEngineList)
	case *adapter.ObjectList:
		return new(adapter.ObjectList)
	case *adapter.ObjectFormat:
		return new(adapter.ObjectFormat)
	case *adapter.SystemMetadata:
		return new(adapter.SystemMetadata)
	case *adapter.Node:
		return new(adapter.Node)
	case *adapter.Log:
		return new(adapter.Log)
	}
	panic("newLike: add the type")
}

// TestSystemMetadataV1View checks that the v1 rendering drops the v2 fields and
// leaves the v2 document as it was.
func TestSystemMetadataV1View(t *testing.T) {
	t.Parallel()
	sm := sampleSystemMetadata()
	orig := sm.Clone()

	v1 := encode(t, sm, 1)
	xsdtest.Validate(t, v1)
	for _, tag := range []string{"<seriesId>", "<mediaType", "<fileName>"} {
		if bytes.Contains(v1, []byte(tag)) {
			t.Errorf("the v1 rendering carries %s:\n%s", tag, v1)
		}
	}
	var back adapter.SystemMetadata
	decode(t, v1, &back)
	if back.SeriesID != "" || back.MediaType != nil || back.FileName != "" {
		t.Errorf("v1 read back with v2 fields: %+v", back)
	}
	want := orig.Clone()
	want.SeriesID, want.MediaType, want.FileName = "", nil, ""
	assertEqual(t, &back, want)
	assertEqual(t, sm, orig) // ViewV1 copies

	v2 := encode(t, sm, 2)
	xsdtest.Validate(t, v2)
	for _, tag := range []string{"<seriesId>urn:series:temperatures</seriesId>", `<mediaType name="text/csv">`, "<fileName>temperatures.csv</fileName>"} {
		if !bytes.Contains(v2, []byte(tag)) {
			t.Errorf("the v2 rendering lacks %s:\n%s", tag, v2)
		}
	}
}

// v1SystemMetadata is a system metadata document as a v1 node writes it.
const v1SystemMetadata = `<?xml version="1.0" encoding="UTF-8"?>
<d1:systemMetadata xmlns:d1="http://ns.dataone.org/service/types/v1">
  <serialVersion>1</serialVersion>
  <identifier>knb.123.1</identifier>
  <formatId>eml://ecoinformatics.org/eml-2.1.1</formatId>
  <size>2990</size>
  <checksum algorithm="MD5">0cc175b9c0f1b6a831c399e269772661</checksum>
  <submitter>uid=jones,o=NCEAS,dc=ecoinformatics,dc=org</submitter>
  <rightsHolder>uid=jones,o=NCEAS,dc=ecoinformatics,dc=org</rightsHolder>
  <accessPolicy><allow><subject>public</subject><permission>read</permission></allow></accessPolicy>
  <dateUploaded>2012-06-01T12:00:00.000+00:00</dateUploaded>
  <dateSysMetadataModified>2012-06-02T12:00:00Z</dateSysMetadataModified>
  <originMemberNode>urn:node:KNB</originMemberNode>
  <authoritativeMemberNode>urn:node:KNB</authoritativeMemberNode>
</d1:systemMetadata>
`

func TestDecodeAcceptsV1SystemMetadata(t *testing.T) {
	t.Parallel()
	xsdtest.Validate(t, []byte(v1SystemMetadata))
	var sm adapter.SystemMetadata
	decode(t, []byte(v1SystemMetadata), &sm)
	if sm.Identifier != "knb.123.1" || sm.Size != 2990 || sm.Checksum.Algorithm != "MD5" || sm.Archived ||
		sm.DateSysMetadataModified.Format() != "2012-06-02T12:00:00.000Z" || sm.SeriesID != "" {
		t.Errorf("decoded %+v", sm)
	}
	xsdtest.Validate(t, encode(t, &sm, 2))
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	const v2 = `xmlns:d2="` + adapter.NSv2 + `"`
	cases := []struct {
		name string
		doc  string
		into any
		want []string // parts of the error message
	}{
		{"wrong root", `<d1:identifier xmlns:d1="` + adapter.NSv1 + `">x</d1:identifier>`, new(adapter.SystemMetadata),
			[]string{"expected a systemMetadata document", "got <identifier>"}},
		{"foreign namespace", `<x:systemMetadata xmlns:x="urn:example:other"><identifier>x</identifier></x:systemMetadata>`, new(adapter.SystemMetadata),
			[]string{"systemMetadata", `"urn:example:other"`, "not a DataONE types namespace"}},
		{"no namespace", `<systemMetadata><identifier>x</identifier></systemMetadata>`, new(adapter.SystemMetadata),
			[]string{`namespace ""`, "not a DataONE types namespace"}},
		{"v1.1 namespace for a v1 type", `<d:systemMetadata xmlns:d="` + adapter.NSv11 + `"/>`, new(adapter.SystemMetadata),
			[]string{adapter.NSv11}},
		{"v1 namespace for a v1.1 type", `<d:queryEngineList xmlns:d="` + adapter.NSv1 + `"/>`, new(adapter.QueryEngineList),
			[]string{"queryEngineList", adapter.NSv1}},
		{"malformed before the root", `<<d2:systemMetadata ` + v2 + `/>`, new(adapter.SystemMetadata),
			[]string{"systemMetadata document is not well-formed XML"}},
		{"malformed inside the root", `<d2:systemMetadata ` + v2 + `><identifier>x</serialVersion></d2:systemMetadata>`, new(adapter.SystemMetadata),
			[]string{"systemMetadata document is invalid", "syntax error"}},
		{"truncated", `<d2:systemMetadata ` + v2 + `><identifier>x</identifier>`, new(adapter.SystemMetadata),
			[]string{"systemMetadata document is invalid"}},
		{"empty body", ``, new(adapter.SystemMetadata), []string{"expected a systemMetadata document, got an empty body"}},
		{"blank body", " \r\n\t", new(adapter.AccessPolicy), []string{"expected a accessPolicy document, got an empty body"}},
		{"bad number", `<d2:systemMetadata ` + v2 + `><size>big</size></d2:systemMetadata>`, new(adapter.SystemMetadata),
			[]string{"systemMetadata document is invalid"}},
		{"bad date", `<d2:systemMetadata ` + v2 + `><dateUploaded>yesterday</dateUploaded></d2:systemMetadata>`, new(adapter.SystemMetadata),
			[]string{"systemMetadata document is invalid", `"yesterday" is not a date-time`}},
		{"not a document type", `<d2:x ` + v2 + `/>`, new(struct{}), []string{"is not a DataONE document"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := adapter.Decode(strings.NewReader(c.doc), c.into)
			if err == nil {
				t.Fatalf("Decode(%T) accepted %q", c.into, c.doc)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestEncodeRefusesUnknownType(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := adapter.Encode(&b, &struct{ A string }{"x"}, 2); err == nil || !strings.Contains(err.Error(), "not a DataONE document") {
		t.Errorf("Encode of a foreign type: %v", err)
	}
	if b.Len() != 0 {
		t.Errorf("Encode wrote %q before failing", b.String())
	}
}

// TestEncodeBuffersArePooled: documents are written through pooled buffers,
// not a 4 KiB buffer of their own each (half of what a getSystemMetadata
// allocated), and a document that failed leaves nothing in the buffer for the
// next one.
func TestEncodeBuffersArePooled(t *testing.T) {
	doc := &adapter.Identifier{Value: "x"}
	var want bytes.Buffer
	if err := adapter.Encode(&want, doc, 2); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 100
	for range n {
		if err := adapter.Encode(io.Discard, doc, 2); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per >= 4096 {
		t.Errorf("%d bytes allocated per document: a buffer of its own each time", per)
	}

	sm := &adapter.SystemMetadata{Identifier: strings.Repeat("x", 10_000)} // over one buffer
	if err := adapter.Encode(failingWriter{}, sm, 2); err == nil {
		t.Fatal("a document written to a failing writer reported no error")
	}
	for range 2 { // whichever pooled buffer comes next
		var got bytes.Buffer
		if err := adapter.Encode(&got, doc, 2); err != nil || got.String() != want.String() {
			t.Errorf("after a failed document: %v\n%s\nwant\n%s", err, got.String(), want.String())
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("the client went away") }
