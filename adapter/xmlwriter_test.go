package adapter

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"strconv"
	"testing"
	"time"
)

// reflected is what encoding/xml writes for v, as Encode wrote it before the
// direct writers.
func reflected(t testing.TB, v any, version int) []byte {
	t.Helper()
	r, err := rootOf(v)
	if err != nil {
		t.Fatal(err)
	}
	ns := r.ns
	if r.v2Only {
		ns = NSv2
		if version == 1 {
			ns, v = NSv1, ViewV1(v)
		}
	}
	p := prefixes[ns]
	start := xml.StartElement{Name: xml.Name{Local: p + ":" + r.local}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns:" + p}, Value: ns}}}
	var buf bytes.Buffer
	if err := writeDoc(&buf, encodeXML(func(enc *xml.Encoder) error { return enc.EncodeElement(v, start) })); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func written(t testing.TB, v any, version int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, v, version); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sameAsReflected(t testing.TB, v any) {
	t.Helper()
	for _, version := range []int{1, 2} {
		if got, want := written(t, v, version), reflected(t, v, version); !bytes.Equal(got, want) {
			t.Fatalf("%T v%d differs from encoding/xml:\n got %s\nwant %s", v, version, got, want)
		}
	}
}

// TestWritersMatchEncodingXML: every field, each optional one absent and
// present, and text XML must escape or cannot hold.
func TestWritersMatchEncodingXML(t *testing.T) {
	yes, two := true, 2
	at := NewTime(time.Date(2024, 1, 31, 12, 0, 0, 123e6, time.UTC))
	full := &SystemMetadata{
		SerialVersion: 3, Identifier: `a&b<c>"d'e`, FormatID: "text/csv", Size: 1 << 40,
		Checksum:  Checksum{Algorithm: "SHA-256", Value: "ab12"},
		Submitter: "CN=a,DC=org", RightsHolder: "CN=b\tc\nd\re",
		AccessPolicy: &AccessPolicy{Allow: []AccessRule{
			{Subject: []string{"public", "CN=x"}, Permission: []Permission{PermRead}},
			{Subject: []string{"CN=y"}, Permission: []Permission{PermWrite, PermChangePermission}},
		}},
		ReplicationPolicy: &ReplicationPolicy{ReplicationAllowed: &yes, NumberReplicas: &two,
			PreferredMemberNode: []string{"urn:node:A"}, BlockedMemberNode: []string{"urn:node:B", "urn:node:C"}},
		Obsoletes: "p0", ObsoletedBy: "p2", Archived: true, DateUploaded: at, DateSysMetadataModified: at,
		OriginMemberNode: "urn:node:A", AuthoritativeMemberNode: "urn:node:A",
		Replica: []Replica{
			{ReplicaMemberNode: "urn:node:A", ReplicationStatus: ReplicaCompleted, ReplicaVerified: at},
			{ReplicaMemberNode: "urn:node:B", ReplicationStatus: ReplicaQueued},
		},
		SeriesID:  "s1",
		MediaType: &MediaType{Name: "text/csv", Property: []MediaTypeProperty{{Name: "header", Value: "a<b"}}},
		FileName:  "ünïcode \x00\x7f\xff\uFFFD\uFFFE\U0001F600.csv",
	}
	sameAsReflected(t, full)
	sameAsReflected(t, &SystemMetadata{})
	sameAsReflected(t, &SystemMetadata{AccessPolicy: &AccessPolicy{}, ReplicationPolicy: &ReplicationPolicy{},
		MediaType: &MediaType{}, Replica: []Replica{{}}})
	no, zero := false, 0
	sameAsReflected(t, &SystemMetadata{ReplicationPolicy: &ReplicationPolicy{ReplicationAllowed: &no, NumberReplicas: &zero}})
	neg := -1
	sameAsReflected(t, &SystemMetadata{ReplicationPolicy: &ReplicationPolicy{NumberReplicas: &neg}})
	east := Time{time.Date(2024, 1, 31, 23, 0, 0, 0, time.FixedZone("east", 5*3600))}
	sameAsReflected(t, &SystemMetadata{DateUploaded: east})

	sameAsReflected(t, &ObjectList{})
	sameAsReflected(t, &ObjectList{Slice: Slice{Count: 2, Start: -1, Total: 1 << 40}, ObjectInfo: []ObjectInfo{
		{Identifier: full.Identifier, FormatID: "text/csv", Checksum: full.Checksum, DateSysMetadataModified: at, Size: 7},
		{},
	}})
	sameAsReflected(t, &Log{})
	sameAsReflected(t, &Log{Slice: Slice{Count: 2, Total: 9}, LogEntry: []LogEntry{
		{EntryID: "1", Identifier: full.Identifier, IPAddress: "::1", UserAgent: full.FileName, Subject: full.RightsHolder,
			Event: EventRead, DateLogged: east, NodeIdentifier: "urn:node:A"},
		{},
	}})
}

// FuzzWriters: whatever the strings and numbers, the writers and
// encoding/xml write the same bytes.
func FuzzWriters(f *testing.F) {
	f.Add("p1", "text/csv", "CN=a", "s1", "a.csv", "public", "urn:node:A", uint64(5), int64(1706702400123), 2, true)
	f.Add("a&b", "<", "\x00\xff", "\uFFFE", "\t\r\n", "'\"", "]]>", uint64(0), int64(0), -1, false)
	f.Fuzz(func(t *testing.T, id, format, who, sid, name, subject, node string, size uint64, ms int64, n int, flag bool) {
		at := NewTime(time.UnixMilli(ms % (1 << 45)))
		sm := &SystemMetadata{
			SerialVersion: size / 3, Identifier: id, FormatID: format, Size: size,
			Checksum: Checksum{Algorithm: name, Value: id}, Submitter: who, RightsHolder: who,
			AccessPolicy:      &AccessPolicy{Allow: []AccessRule{{Subject: []string{subject, who}, Permission: []Permission{Permission(format)}}}},
			ReplicationPolicy: &ReplicationPolicy{ReplicationAllowed: &flag, NumberReplicas: &n, PreferredMemberNode: []string{node}},
			Obsoletes:         sid, Archived: flag, DateUploaded: at, DateSysMetadataModified: at,
			OriginMemberNode: node, Replica: []Replica{{ReplicaMemberNode: node, ReplicationStatus: subject, ReplicaVerified: at}},
			SeriesID: sid, MediaType: &MediaType{Name: format, Property: []MediaTypeProperty{{Name: name, Value: subject}}}, FileName: name,
		}
		sameAsReflected(t, sm)
		sameAsReflected(t, &ObjectList{Slice: Slice{Count: n, Start: int(ms), Total: int(size)}, ObjectInfo: []ObjectInfo{
			{Identifier: id, FormatID: format, Checksum: sm.Checksum, DateSysMetadataModified: at, Size: size}}})
		sameAsReflected(t, &Log{Slice: Slice{Count: n}, LogEntry: []LogEntry{
			{EntryID: sid, Identifier: id, IPAddress: node, UserAgent: name, Subject: who, Event: subject, DateLogged: at, NodeIdentifier: format}}})
	})
}

func BenchmarkEncodeSystemMetadata(b *testing.B) {
	at := Now()
	sm := &SystemMetadata{SerialVersion: 1, Identifier: "d1load/20261128T070250-273011/14", FormatID: "application/octet-stream",
		Size: 1000, Checksum: Checksum{Algorithm: "SHA-256", Value: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		Submitter: "CN=d1load bench,DC=dataone,DC=org", RightsHolder: "CN=d1load bench,DC=dataone,DC=org",
		AccessPolicy: &AccessPolicy{Allow: []AccessRule{{Subject: []string{"public"}, Permission: []Permission{PermRead}}}},
		DateUploaded: at, DateSysMetadataModified: at, OriginMemberNode: "urn:node:BENCH", AuthoritativeMemberNode: "urn:node:BENCH"}
	w := bufio.NewWriter(nil)
	b.Run("encoding-xml", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Reset(discard{})
			start := xml.StartElement{Name: xml.Name{Local: "d2:systemMetadata"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns:d2"}, Value: NSv2}}}
			encodeXML(func(enc *xml.Encoder) error { return enc.EncodeElement(sm, start) })(w)
		}
	})
	b.Run("writer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Reset(discard{})
			writeSystemMetadata(w, sm, "d2", NSv2, true)
			w.Flush()
		}
	})
}

func BenchmarkEncodeObjectList(b *testing.B) {
	l := &ObjectList{Slice: Slice{Count: 1000, Total: 1_000_000}}
	for i := range 1000 {
		l.ObjectInfo = append(l.ObjectInfo, ObjectInfo{Identifier: "d1load/20261128T070250-273011/" + strconv.Itoa(i), FormatID: "application/octet-stream",
			Checksum: Checksum{Algorithm: "SHA-256", Value: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}, DateSysMetadataModified: Now(), Size: 1000})
	}
	w := bufio.NewWriter(nil)
	b.Run("encoding-xml", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Reset(discard{})
			start := xml.StartElement{Name: xml.Name{Local: "d1:objectList"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns:d1"}, Value: NSv1}}}
			encodeXML(func(enc *xml.Encoder) error { return enc.EncodeElement(l, start) })(w)
		}
	})
	b.Run("writer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Reset(discard{})
			writeObjectList(w, l, "d1", NSv1)
			w.Flush()
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
