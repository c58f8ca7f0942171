package adapter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

// catalog is the exception table of the DataONE specification (API.md §6.2).
var catalog = map[adapter.Kind]struct {
	name   string
	status int
}{
	adapter.ServiceFailure:        {"ServiceFailure", 500},
	adapter.InvalidToken:          {"InvalidToken", 401},
	adapter.NotAuthorized:         {"NotAuthorized", 401},
	adapter.NotFound:              {"NotFound", 404},
	adapter.InvalidRequest:        {"InvalidRequest", 400},
	adapter.NotImplemented:        {"NotImplemented", 501},
	adapter.IdentifierNotUnique:   {"IdentifierNotUnique", 409},
	adapter.UnsupportedType:       {"UnsupportedType", 400},
	adapter.InsufficientResources: {"InsufficientResources", 413},
	adapter.InvalidSystemMetadata: {"InvalidSystemMetadata", 400},
	adapter.VersionMismatch:       {"VersionMismatch", 409},
	adapter.SynchronizationFailed: {"SynchronizationFailed", 0},
}

func TestExceptionCatalog(t *testing.T) {
	t.Parallel()
	if n := len(adapter.Kinds()); n != len(catalog) {
		t.Errorf("Kinds() lists %d kinds, the spec %d", n, len(catalog))
	}
	if adapter.Kind(0) != adapter.ServiceFailure {
		t.Error("the zero Kind is not ServiceFailure")
	}
	for _, k := range adapter.Kinds() {
		want, ok := catalog[k]
		if !ok {
			t.Errorf("kind %d (%s) is not in the spec table", k, k)
			continue
		}
		t.Run(want.name, func(t *testing.T) {
			t.Parallel()
			if got := k.String(); got != want.name {
				t.Errorf("name %q, want %q", got, want.name)
			}
			if got := k.Status(); got != want.status {
				t.Errorf("status %d, want %d", got, want.status)
			}
			if got, ok := adapter.KindByName(want.name); !ok || got != k {
				t.Errorf("KindByName(%q) = %v, %v", want.name, got, ok)
			}
		})
	}
	for _, name := range []string{"", "notfound", "NotFound ", "AuthenticationTimeout"} {
		if k, ok := adapter.KindByName(name); ok || k != adapter.ServiceFailure {
			t.Errorf("KindByName(%q) = %v, %v; want ServiceFailure, false", name, k, ok)
		}
	}
}

func TestAsException(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 10.0.0.5:5432: connection refused")
	notFound := adapter.Errorf(adapter.NotFound, "no object %q", "x").WithPID("x")
	cases := []struct {
		name     string
		err      error
		kind     adapter.Kind
		desc     string
		same     *adapter.Exception // when set, the exception passed through
		hasCause bool
	}{
		{"plain error", cause, adapter.ServiceFailure, "internal error", nil, true},
		{"deadline", context.DeadlineExceeded, adapter.ServiceFailure, "the operation timed out", nil, true},
		{"wrapped deadline", fmt.Errorf("upstream: %w", context.DeadlineExceeded), adapter.ServiceFailure, "the operation timed out", nil, true},
		{"canceled", context.Canceled, adapter.ServiceFailure, "the request was canceled", nil, true},
		{"exception", notFound, adapter.NotFound, `no object "x"`, notFound, false},
		{"wrapped exception", fmt.Errorf("reading: %w", notFound), adapter.NotFound, `no object "x"`, notFound, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := adapter.AsException(c.err)
			if e.Kind != c.kind || e.Description != c.desc {
				t.Errorf("AsException = %s %q, want %s %q", e.Kind, e.Description, c.kind, c.desc)
			}
			if c.same != nil && e != c.same {
				t.Errorf("AsException did not pass the exception through: %#v", e)
			}
			if c.hasCause && !errors.Is(e, c.err) {
				t.Errorf("the cause %v is lost: %#v", c.err, e)
			}
			if strings.Contains(e.Description, "10.0.0.5") {
				t.Errorf("description leaks the cause: %q", e.Description)
			}
		})
	}
	if !adapter.IsKind(fmt.Errorf("x: %w", notFound), adapter.NotFound) || adapter.IsKind(cause, adapter.ServiceFailure) {
		t.Error("IsKind")
	}
}

func encodeException(t testing.TB, e *adapter.Exception) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := adapter.EncodeException(&b, e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestEncodeExceptionEveryKind(t *testing.T) {
	t.Parallel()
	for _, k := range adapter.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			e := &adapter.Exception{Kind: k, DetailCode: "1020", PID: "doi:10.5063/F1QN64NZ", NodeID: "urn:node:d1bridge",
				Description: "something about " + k.String(), TraceInformation: "method: MNRead.get"}
			out := encodeException(t, e)
			xsdtest.Validate(t, out)
			s := string(out)
			for _, want := range []string{
				`name="` + k.String() + `"`, `errorCode="` + strconv.Itoa(k.Status()) + `"`, `detailCode="1020"`,
				`identifier="doi:10.5063/F1QN64NZ"`, `nodeId="urn:node:d1bridge"`,
			} {
				if !strings.Contains(s, want) {
					t.Errorf("missing %s in\n%s", want, s)
				}
			}
			if strings.Contains(s, "pid=") {
				t.Errorf("the error carries a pid attribute:\n%s", s)
			}
			back, err := adapter.DecodeException(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			assertEqual(t, back, e)

			// The least an exception can carry: no detail code, no identifier.
			bare := encodeException(t, &adapter.Exception{Kind: k})
			xsdtest.Validate(t, bare)
			if !strings.Contains(string(bare), `detailCode="0"`) || strings.Contains(string(bare), "identifier=") {
				t.Errorf("bare exception rendered as\n%s", bare)
			}
		})
	}
}

func TestEncodeExceptionEscapes(t *testing.T) {
	t.Parallel()
	e := &adapter.Exception{
		Kind: adapter.InvalidRequest, DetailCode: "1102", PID: `a&b<c>"d"`, NodeID: "urn:node:d1bridge",
		Description:      `size must be < 2^63 & "numeric"; got <big> ]]> 'x'`,
		TraceInformation: "at org.dataone.Foo.<init>(Foo.java:12) & more",
	}
	out := encodeException(t, e)
	xsdtest.Validate(t, out)
	for _, raw := range []string{"<big>", "<init>", " & "} {
		if bytes.Contains(out, []byte(raw)) {
			t.Errorf("%q is not escaped in\n%s", raw, out)
		}
	}
	back, err := adapter.DecodeException(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, back, e)
}

func TestDecodeException(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  string
		want *adapter.Exception
	}{
		{"unknown name reads as ServiceFailure",
			`<error name="AuthenticationTimeout" errorCode="408" detailCode="12"><description>late</description></error>`,
			&adapter.Exception{Kind: adapter.ServiceFailure, DetailCode: "12", Description: "late"}},
		{"synchronization failed report",
			`<?xml version="1.0"?><error name="SynchronizationFailed" errorCode="0" detailCode="6001" identifier="knb.1.1">` +
				`<description>checksum mismatch</description><traceInformation>  cn-ucsb-1  </traceInformation></error>`,
			&adapter.Exception{Kind: adapter.SynchronizationFailed, DetailCode: "6001", PID: "knb.1.1",
				Description: "checksum mismatch", TraceInformation: "cn-ucsb-1"}},
		{"trace information in CDATA",
			`<error name="ServiceFailure" errorCode="500" detailCode="0"><traceInformation><![CDATA[a < b]]></traceInformation></error>`,
			&adapter.Exception{Kind: adapter.ServiceFailure, DetailCode: "0", TraceInformation: "a < b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			xsdtest.Validate(t, []byte(c.doc))
			e, err := adapter.DecodeException(strings.NewReader(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			assertEqual(t, e, c.want)
		})
	}
	for name, doc := range map[string]string{
		"empty":     "",
		"malformed": "<error name=",
		"not error": `<d1:identifier xmlns:d1="` + adapter.NSv1 + `">x</d1:identifier>`,
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			t.Parallel()
			if _, err := adapter.DecodeException(strings.NewReader(doc)); err == nil || !strings.Contains(err.Error(), "not a DataONE error document") {
				t.Errorf("DecodeException(%q): %v", doc, err)
			}
		})
	}
}

func TestExceptionHeaders(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, h map[string]string) {
		t.Helper()
		for k, v := range h {
			if len(v) > 1024 {
				t.Errorf("%s is %d bytes long", k, len(v))
			}
			for i := 0; i < len(v); i++ {
				if v[i] < 0x20 || v[i] > 0x7e {
					t.Errorf("%s has byte %#x at %d: %q", k, v[i], i, v)
					break
				}
			}
		}
	}

	t.Run("fields", func(t *testing.T) {
		t.Parallel()
		h := adapter.ExceptionHeaders(&adapter.Exception{Kind: adapter.NotFound, DetailCode: "1380", PID: "knb.1.1",
			NodeID: "urn:node:d1bridge", Description: "no such object", TraceInformation: "lookup"})
		check(t, h)
		want := map[string]string{
			"DataONE-Exception-Name": "NotFound", "DataONE-Exception-ErrorCode": "404", "DataONE-Exception-DetailCode": "1380",
			"DataONE-Exception-Description": "no such object", "DataONE-Exception-Identifier": "knb.1.1",
			"DataONE-Exception-PID": "knb.1.1", "DataONE-Exception-NodeID": "urn:node:d1bridge",
			"DataONE-Exception-TraceInformation": "lookup",
		}
		assertEqual(t, h, want)
	})
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		h := adapter.ExceptionHeaders(&adapter.Exception{Kind: adapter.ServiceFailure})
		check(t, h)
		want := map[string]string{
			"DataONE-Exception-Name": "ServiceFailure", "DataONE-Exception-ErrorCode": "500",
			"DataONE-Exception-DetailCode": "0", "DataONE-Exception-Description": "",
		}
		assertEqual(t, h, want)
	})
	t.Run("newlines", func(t *testing.T) {
		t.Parallel()
		h := adapter.ExceptionHeaders(&adapter.Exception{Kind: adapter.InvalidRequest,
			Description: "line one\nline two\r\nline three\tend", TraceInformation: "a\rb"})
		check(t, h)
		if got := h["DataONE-Exception-Description"]; strings.ContainsAny(got, "\r\n\t") || !strings.Contains(got, "line one") || !strings.Contains(got, "line three") {
			t.Errorf("description %q", got)
		}
	})
	t.Run("long", func(t *testing.T) {
		t.Parallel()
		h := adapter.ExceptionHeaders(&adapter.Exception{Kind: adapter.InvalidRequest, Description: strings.Repeat("x", 5000),
			PID: strings.Repeat("é", 800)})
		check(t, h)
		if got := len(h["DataONE-Exception-Description"]); got != 1024 {
			t.Errorf("description is %d bytes, want the first 1024", got)
		}
	})
	t.Run("non-ASCII", func(t *testing.T) {
		t.Parallel()
		h := adapter.ExceptionHeaders(&adapter.Exception{Kind: adapter.NotFound, PID: "données/ü", Description: "objet «x» introuvable\u2028"})
		check(t, h)
		if got := h["DataONE-Exception-PID"]; got != "donn%C3%A9es/%C3%BC" {
			t.Errorf("PID header %q", got)
		}
	})
}
