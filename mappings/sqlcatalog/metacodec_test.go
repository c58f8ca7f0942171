package sqlcatalog

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// filled returns system metadata with every field set, each to a value of
// its own, found by reflection: a field added to adapter.SystemMetadata that
// the compact form leaves out fails the round trip.
func filled() *adapter.SystemMetadata {
	n := 0
	next := func() int { n++; return n }
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		if v.Type() == reflect.TypeFor[adapter.Time]() {
			v.Set(reflect.ValueOf(adapter.NewTime(time.UnixMilli(1_700_000_000_000 + int64(next())*1001))))
			return
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString("v" + strings.Repeat(":9", next()%3) + "é" + string(rune('a'+next()%26)))
		case reflect.Uint64, reflect.Uint:
			v.SetUint(uint64(next()) << 40)
		case reflect.Int:
			v.SetInt(-int64(next()))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := range 2 {
				fill(v.Index(i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		default:
			panic("filled: no value for a field of kind " + v.Kind().String())
		}
	}
	sm := new(adapter.SystemMetadata)
	fill(reflect.ValueOf(sm).Elem())
	return sm
}

func TestCompactMetaRoundTrip(t *testing.T) {
	full := filled()
	partial := filled()
	partial.AccessPolicy.Allow[1].Subject = nil
	partial.ReplicationPolicy.ReplicationAllowed = nil
	partial.ReplicationPolicy.BlockedMemberNode = nil
	partial.MediaType.Property = nil
	partial.Replica[0].ReplicaVerified = adapter.Time{}
	allowedOnly := false
	partial.ReplicationPolicy.ReplicationAllowed = &allowedOnly
	for name, sm := range map[string]*adapter.SystemMetadata{
		"every field": full,
		"some unset":  partial,
		"none":        {},
		"strings":     {Identifier: "12:34:", FormatID: "", Submitter: "CN=Ünïcode, DC=org", RightsHolder: "0:"},
	} {
		t.Run(name, func(t *testing.T) {
			doc := encodeMeta(sm)
			if !strings.HasPrefix(doc, compactPrefix) {
				t.Fatalf("no prefix: %q", doc)
			}
			got, err := decodeMeta(doc[len(compactPrefix):])
			if err != nil {
				t.Fatalf("decoding %q: %v", doc, err)
			}
			if !reflect.DeepEqual(got, sm) {
				t.Fatalf("round trip changed it:\n got %+v\nwant %+v\n doc %q", got, sm, doc)
			}
		})
	}
}

func TestCompactSumsRoundTrip(t *testing.T) {
	sums := map[string]string{"MD5": "05997c4fa5215a740568dc5343e7d6b2", "SHA-1": "fac8479744940a5f44b3c7c403df7cb3d5bc1f78", "": ""}
	doc := encodeSums(sums)
	if doc != encodeSums(map[string]string{"SHA-1": sums["SHA-1"], "": "", "MD5": sums["MD5"]}) {
		t.Fatalf("the same checksums encode differently: %q", doc)
	}
	got, err := decodeSums(doc[len(compactPrefix):])
	if err != nil || !reflect.DeepEqual(got, sums) {
		t.Fatalf("decodeSums(%q) = %v, %v; want %v", doc, got, err, sums)
	}
}

// A damaged document is an error, never a panic or a partial record.
func TestCompactMetaDamaged(t *testing.T) {
	doc := encodeMeta(filled())[len(compactPrefix):]
	for i := range len(doc) {
		if _, err := decodeMeta(doc[:i]); err == nil {
			t.Fatalf("decodeMeta of the first %d bytes of %d: no error", i, len(doc))
		}
	}
	for _, bad := range []string{doc + "0:", "x" + doc, strings.Replace(doc, "1:1", "1:2", 1), "99999999999999999999:", "-1:"} {
		if _, err := decodeMeta(bad); err == nil {
			t.Errorf("decodeMeta(%.40q…): no error", bad)
		}
	}
}

// A record goes through the record cache's compact tier unchanged, its
// checksums absent or not; a damaged one is an error.
func TestCompactRecordRoundTrip(t *testing.T) {
	for name, rec := range map[string]*node.Record{
		"every field":     {Meta: filled(), BlobKey: "ab/cd:1", Checksums: map[string]string{"MD5": "m", "SHA-1": "s"}},
		"no checksums":    {Meta: &adapter.SystemMetadata{Identifier: "p"}, BlobKey: ""},
		"empty checksums": {Meta: filled(), BlobKey: "k", Checksums: map[string]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			doc := string(encodeRecord(rec.BlobKey, encodeMeta(rec.Meta), rec.Checksums))
			got, err := decodeRecord(doc)
			if err != nil || !reflect.DeepEqual(got, rec) {
				t.Fatalf("round trip changed it: %v\n got %+v\nwant %+v", err, got, rec)
			}
			for i := range len(doc) {
				if _, err := decodeRecord(doc[:i]); err == nil {
					t.Fatalf("decodeRecord of the first %d bytes of %d: no error", i, len(doc))
				}
			}
		})
	}
}

// The rows of the catalog decode whichever form they were written in: XML
// (before schema 6), JSON (6 to 11), compact.
func TestStoredDecodesEveryForm(t *testing.T) {
	sm := filled()
	sums := map[string]string{"MD5": "m", "SHA-1": "s"}
	js, err := json.Marshal(sm)
	if err != nil {
		t.Fatal(err)
	}
	jsums, _ := json.Marshal(sums)
	var xml strings.Builder
	if err := adapter.Encode(&xml, sm, 2); err != nil {
		t.Fatal(err)
	}
	var fromXML adapter.SystemMetadata
	if err := adapter.Decode(strings.NewReader(xml.String()), &fromXML); err != nil {
		t.Fatal(err)
	}
	for form, doc := range map[string][2]string{
		"compact": {encodeMeta(&fromXML), encodeSums(sums)},
		"json":    {string(js), string(jsums)},
		"xml":     {xml.String(), string(jsums)},
	} {
		var s stored
		if err := s.decode(doc[0], sql.NullString{String: doc[1], Valid: true}); err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		want := sm
		if form != "json" {
			want = &fromXML
		}
		if !reflect.DeepEqual(s.meta, want) || !reflect.DeepEqual(s.sums, sums) {
			t.Errorf("%s: decoded %+v %v, want %+v %v", form, s.meta, s.sums, want, sums)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(filled())[len(compactPrefix):])
	f.Add(encodeMeta(&adapter.SystemMetadata{})[len(compactPrefix):])
	f.Fuzz(func(t *testing.T, doc string) {
		sm, err := decodeMeta(doc)
		if err != nil {
			return
		}
		again, err := decodeMeta(encodeMeta(sm)[len(compactPrefix):])
		if err != nil || !reflect.DeepEqual(again, sm) {
			t.Fatalf("what decoded from %q does not round-trip: %+v, %v", doc, again, err)
		}
	})
}

// BenchmarkDecodeMeta: decoding a row's system metadata and checksums as a
// lookup does, compact against JSON (the form before), alternating in one
// loop. ns/op is compact's; x-json the speed ratio compact/JSON.
//
//	go test -run '^$' -bench BenchmarkDecodeMeta ./mappings/sqlcatalog/
func BenchmarkDecodeMeta(b *testing.B) {
	sm := &adapter.SystemMetadata{SerialVersion: 1, Identifier: "d1load/20261126T064730-889838/1", FormatID: "application/octet-stream",
		Size: 1024, Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: "292f9fbd3aba0e9c15c8706133ccb606ffc2a513e8188b7a33145e99750e0e77"},
		Submitter: "CN=d1load bench,DC=dataone,DC=org", RightsHolder: "CN=d1load bench,DC=dataone,DC=org",
		AccessPolicy:     &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}},
		DateUploaded:     adapter.NewTime(time.UnixMilli(1_764_139_650_586)),
		OriginMemberNode: "urn:node:BENCH", AuthoritativeMemberNode: "urn:node:BENCH"}
	sm.DateSysMetadataModified = sm.DateUploaded
	sums := map[string]string{"MD5": "05997c4fa5215a740568dc5343e7d6b2", "SHA-1": "fac8479744940a5f44b3c7c403df7cb3d5bc1f78"}
	js, _ := json.Marshal(sm)
	jsums, _ := json.Marshal(sums)
	forms := [2][2]string{{encodeMeta(sm), encodeSums(sums)}, {string(js), string(jsums)}}
	var spent [2]time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			k := (i + j) % 2
			start := time.Now()
			var s stored
			if err := s.decode(forms[k][0], sql.NullString{String: forms[k][1], Valid: true}); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(start)
		}
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "json-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-json")
	b.ReportMetric(float64(len(forms[0][0])+len(forms[0][1])), "B/row")
	b.ReportMetric(float64(len(forms[1][0])+len(forms[1][1])), "json-B/row")
}
