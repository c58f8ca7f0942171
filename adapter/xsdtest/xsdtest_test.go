package xsdtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

func TestCheckExamplesValidate(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "examples", "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			xsdtest.Validate(t, doc)
		})
	}
}

func TestCheckRejects(t *testing.T) {
	t.Parallel()
	const (
		v1 = "http://ns.dataone.org/service/types/v1"
		v2 = "http://ns.dataone.org/service/types/v2.0"
	)
	cases := []struct {
		name, doc string
		want      string // a part of the error message
	}{
		{"error with pid attribute",
			`<error name="NotFound" errorCode="404" detailCode="0" pid="x"/>`, "'pid'"},
		{"error in the old errors namespace",
			`<e:error xmlns:e="http://ns.dataone.org/service/errors/v1" name="NotFound" errorCode="404" detailCode="0"/>`,
			"no DataONE schema"},
		{"objectList in the v2 namespace",
			`<d2:objectList xmlns:d2="` + v2 + `" count="0" start="0" total="0"/>`, "objectList"},
		{"bad permission",
			`<d1:accessPolicy xmlns:d1="` + v1 + `"><allow><subject>public</subject><permission>own</permission></allow></d1:accessPolicy>`,
			"permission"},
		{"qualified child",
			`<d1:identifier xmlns:d1="` + v1 + `"><d1:x/></d1:identifier>`, "does not validate"},
		{"unqualified root", `<identifier>x</identifier>`, "no namespace"},
		{"foreign namespace", `<x:identifier xmlns:x="urn:other">x</x:identifier>`, `"urn:other"`},
		{"malformed", `<d1:identifier xmlns:d1="` + v1 + `">x</d1:ident`, "well-formed"},
		{"empty", ``, "no root element"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := xsdtest.Check([]byte(c.doc))
			if err == nil {
				t.Fatalf("Check accepted %s", c.doc)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

// recorder is a testing.TB that keeps what Validate reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestValidateReportsMessageAndDocument(t *testing.T) {
	t.Parallel()
	doc := `<error name="NotFound" errorCode="404" detailCode="0" pid="the-pid"/>`
	r := &recorder{TB: t}
	xsdtest.Validate(r, []byte(doc))
	if len(r.errors) != 1 {
		t.Fatalf("Validate reported %d errors, want 1: %q", len(r.errors), r.errors)
	}
	for _, want := range []string{"dataoneErrors.xsd", "attribute 'pid'", doc} {
		if !strings.Contains(r.errors[0], want) {
			t.Errorf("report does not contain %q:\n%s", want, r.errors[0])
		}
	}

	r = &recorder{TB: t}
	xsdtest.Validate(r, []byte(`<error name="NotFound" errorCode="404" detailCode="0" identifier="the-pid"/>`))
	if len(r.errors) != 0 {
		t.Errorf("Validate reported a valid document: %q", r.errors)
	}
}
