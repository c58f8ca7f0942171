package adapter_test

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// readExample reads a sample document of testdata/examples.
func readExample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encode renders v as a document of API version 1 or 2.
func encode(t testing.TB, v any, version int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := adapter.Encode(&b, v, version); err != nil {
		t.Fatalf("Encode(%T, v%d): %v", v, version, err)
	}
	return b.Bytes()
}

// decode reads doc into v, failing the test when it cannot.
func decode(t testing.TB, doc []byte, v any) {
	t.Helper()
	if err := adapter.Decode(bytes.NewReader(doc), v); err != nil {
		t.Fatalf("Decode(%T): %v\ndocument:\n%s", v, err, doc)
	}
}

// rootName is the root element of doc.
func rootName(t testing.TB, doc []byte) xml.Name {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := d.Token()
		if err != nil {
			t.Fatalf("no root element: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name
		}
	}
}

// assertEqual compares two decoded documents. Times compare field by field, which
// is right because every Time read goes through NewTime (UTC, milliseconds).
func assertEqual(t testing.TB, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("documents differ\n got: %+v\nwant: %+v", show(got), show(want))
	}
}

// show is what a pointer points to, so that %+v prints the fields of an
// *Exception rather than its Error().
func show(v any) any {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}

func ptr[T any](v T) *T { return &v }
