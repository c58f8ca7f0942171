package adapter_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

// exampleDocs maps each sample document of testdata/examples to the type it
// decodes into and the root namespace each API version renders it in (none: the
// version cannot render the sample as it is).
var exampleDocs = map[string]struct {
	newDoc   func() any
	v1NS     string
	v2NS     string
	checkOne func(t *testing.T, doc any) // spot checks of the first decode
}{
	"objectList_v1.xml": {
		newDoc: func() any { return new(adapter.ObjectList) }, v1NS: adapter.NSv1, v2NS: adapter.NSv1,
		checkOne: func(t *testing.T, doc any) {
			l := doc.(*adapter.ObjectList)
			if l.Count != 2 || l.Total != 2 || len(l.ObjectInfo) != 2 || l.ObjectInfo[1].Identifier != "ABC456" ||
				l.ObjectInfo[0].Checksum != (adapter.Checksum{Algorithm: "SHA-1", Value: "SGVsbG8gV29ybGQh"}) ||
				l.ObjectInfo[0].Size != 922337203 ||
				l.ObjectInfo[0].DateSysMetadataModified.Format() != "2006-05-04T18:13:51.000Z" {
				t.Errorf("decoded %+v", l)
			}
		},
	},
	// The sample holds events outside the v1 enumeration, so only v2 renders it;
	// TestLogV1 covers the v1 rendering.
	"log_v2.xml": {
		newDoc: func() any { return new(adapter.Log) }, v2NS: adapter.NSv2,
		checkOne: func(t *testing.T, doc any) {
			l := doc.(*adapter.Log)
			if l.Count != 3 || l.Start != 3 || len(l.LogEntry) != 3 || l.LogEntry[1].Event != "unbound_v2_event_string_1" ||
				l.LogEntry[0].DateLogged.Format() != "2008-09-28T19:49:45.000Z" {
				t.Errorf("decoded %+v", l)
			}
		},
	},
	"node_v2_mn.xml": {
		newDoc: func() any { return new(adapter.Node) }, v1NS: adapter.NSv1, v2NS: adapter.NSv2,
		checkOne: func(t *testing.T, doc any) {
			n := doc.(*adapter.Node)
			if !n.Replicate || !n.Synchronize || n.Type != adapter.NodeTypeMN || n.State != adapter.NodeUp ||
				n.Services == nil || len(n.Services.Service) != 5 || *n.Services.Service[4].Available ||
				n.Synchronization == nil || n.Synchronization.Schedule.Min != "0,5,10,15,20,25,30,35,40,45,50,55" ||
				n.Synchronization.LastHarvested.Format() != "1900-01-01T00:00:00.000Z" ||
				!slices.Equal(n.ContactSubject, []string{"cn=test2,dc=dataone,dc=org"}) {
				t.Errorf("decoded %+v", n)
			}
		},
	},
	"nodeList_v2.xml": {
		newDoc: func() any { return new(adapter.NodeList) }, v1NS: adapter.NSv1, v2NS: adapter.NSv2,
		checkOne: func(t *testing.T, doc any) {
			l := doc.(*adapter.NodeList)
			if len(l.Node) != 2 || l.Node[0].Ping == nil || !*l.Node[0].Ping.Success ||
				l.Node[0].Ping.LastSuccess.Format() != "2010-08-23T11:11:11.123Z" ||
				l.Node[1].Identifier != "urn:node:knb_mn_id" {
				t.Errorf("decoded %+v", l)
			}
		},
	},
	"systemMetadata_v2_allfields.xml": {
		newDoc: func() any { return new(adapter.SystemMetadata) }, v1NS: adapter.NSv1, v2NS: adapter.NSv2,
		checkOne: func(t *testing.T, doc any) {
			sm := doc.(*adapter.SystemMetadata)
			if sm.SerialVersion != 11 || !sm.Archived || sm.SeriesID != "test_series_id" || sm.FileName != "string" ||
				sm.MediaType == nil || len(sm.MediaType.Property) != 3 || len(sm.Replica) != 3 ||
				sm.ReplicationPolicy == nil || *sm.ReplicationPolicy.NumberReplicas != 3 ||
				len(sm.AccessPolicy.Allow) != 2 || sm.AccessPolicy.Allow[1].Permission[0] != adapter.PermChangePermission ||
				sm.DateUploaded.Format() != "2014-09-18T17:18:33.000Z" ||
				sm.DateSysMetadataModified.Format() != "2006-08-19T17:27:14.000Z" ||
				sm.Replica[0].ReplicaVerified.Format() != "2013-05-22T01:02:49.000Z" {
				t.Errorf("decoded %+v", sm)
			}
		},
	},
	"systemMetadata_v2_metacat.xml": {
		newDoc: func() any { return new(adapter.SystemMetadata) }, v1NS: adapter.NSv1, v2NS: adapter.NSv2,
		checkOne: func(t *testing.T, doc any) {
			sm := doc.(*adapter.SystemMetadata)
			if sm.Checksum.Algorithm != "SHA-256" || sm.FileName != "eml.xml" || sm.Archived ||
				sm.ReplicationPolicy == nil || len(sm.ReplicationPolicy.PreferredMemberNode) != 0 ||
				sm.DateUploaded.Format() != "2022-01-26T01:27:20.741Z" {
				t.Errorf("decoded %+v", sm)
			}
		},
	},
}

// TestExamplesRoundTrip reads every sample, renders it in each API version that can
// carry it, validates the rendering against the official schema and reads it back.
func TestExamplesRoundTrip(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "examples", "*.xml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "error_invalid_request.xml" {
			continue // TestExampleError
		}
		ex, ok := exampleDocs[name]
		if !ok {
			t.Errorf("example %s has no round-trip case", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := readExample(t, name)
			first := ex.newDoc()
			decode(t, raw, first)
			ex.checkOne(t, first)
			for _, c := range []struct {
				version int
				ns      string
			}{{1, ex.v1NS}, {2, ex.v2NS}} {
				if c.ns == "" {
					continue
				}
				t.Run(fmt.Sprintf("v%d", c.version), func(t *testing.T) {
					out := encode(t, first, c.version)
					xsdtest.Validate(t, out)
					if got := rootName(t, out); got.Space != c.ns {
						t.Errorf("root %s is in namespace %q, want %q", got.Local, got.Space, c.ns)
					}
					second := ex.newDoc()
					decode(t, out, second)
					want := first
					if c.version == 1 {
						want = adapter.ViewV1(first)
					}
					assertEqual(t, second, want)
				})
			}
		})
	}
}

// TestExampleError reads the error document as GMN sends it, with its stylesheet
// processing instruction, and writes it back.
func TestExampleError(t *testing.T) {
	t.Parallel()
	e, err := adapter.DecodeException(bytes.NewReader(readExample(t, "error_invalid_request.xml")))
	if err != nil {
		t.Fatal(err)
	}
	want := &adapter.Exception{
		Kind: adapter.InvalidRequest, DetailCode: "0", NodeID: "urn:node:KNB",
		Description: "Requested a non-existing slice. start=100000 count=100\n    total=1826\n  ",
	}
	assertEqual(t, e, want)

	var b bytes.Buffer
	if err := adapter.EncodeException(&b, e); err != nil {
		t.Fatal(err)
	}
	xsdtest.Validate(t, b.Bytes())
	again, err := adapter.DecodeException(&b)
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, again, want)
}

// TestLogV1 renders a log of v1 events in the v1 namespace. A v2-only event cannot
// be rendered for v1: Encode does not filter entries, so the v1 schema rejects it
// (the v1 handler has to leave such records out).
func TestLogV1(t *testing.T) {
	t.Parallel()
	var sample adapter.Log
	decode(t, readExample(t, "log_v2.xml"), &sample)

	t.Run("v1 events", func(t *testing.T) {
		t.Parallel()
		l := adapter.Log{Slice: adapter.Slice{Count: len(adapter.V1Events), Total: len(adapter.V1Events)}}
		for i, ev := range adapter.V1Events {
			e := sample.LogEntry[0]
			e.EntryID, e.Event = string(rune('1'+i)), ev
			l.LogEntry = append(l.LogEntry, e)
		}
		for _, version := range []int{1, 2} {
			out := encode(t, &l, version)
			xsdtest.Validate(t, out)
			var back adapter.Log
			decode(t, out, &back)
			assertEqual(t, &back, &l)
		}
		if got := rootName(t, encode(t, &l, 1)).Space; got != adapter.NSv1 {
			t.Errorf("v1 log in namespace %q", got)
		}
	})
	t.Run("v2 event on v1", func(t *testing.T) {
		t.Parallel()
		err := xsdtest.Check(encode(t, &sample, 1))
		if err == nil {
			t.Fatal("the v1 schema accepted the event " + sample.LogEntry[1].Event)
		}
		if !strings.Contains(err.Error(), "does not validate") || !strings.Contains(err.Error(), "event") {
			t.Errorf("unexpected error: %v", err)
		}
	})
}
