package config

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite REFERENCE.md from the config types and their comments")

// TestReference: REFERENCE.md is what the config types, their defaults and
// their doc comments (and the mappings' options) say today.
func TestReference(t *testing.T) {
	sections, err := reference()
	if err != nil {
		t.Fatal(err)
	}
	got := renderReference(sections)
	if *update {
		if err := os.WriteFile("REFERENCE.md", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("REFERENCE.md")
	if err != nil {
		t.Fatalf("%v; generate it with `%s`", err, regenerate)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Fatalf("REFERENCE.md is stale; regenerate it with `%s`\nfirst difference, line %d:\n  file:      %s\n  generated: %s",
			regenerate, i+1, line(wl), line(gl))
	}
}

// TestReferenceKeys: the reference lists exactly the keys KeyPaths knows,
// each with its type and, but for sections and lists of mappings, a
// variable exactly when the environment can set it.
func TestReferenceKeys(t *testing.T) {
	sections, err := reference()
	if err != nil {
		t.Fatal(err)
	}
	want := KeyPaths()
	slices.Sort(want)
	if got := refKeyPaths(sections); !slices.Equal(got, want) {
		t.Errorf("reference keys differ from KeyPaths:\n got %q\nwant %q", got, want)
	}
	for _, s := range sections {
		for _, k := range s.keys {
			if k.typ == "" {
				t.Errorf("%s: no type", k.path)
			}
			inList := strings.Contains(k.path, "[]") || s.options != ""
			switch {
			case inList && k.env != "":
				t.Errorf("%s: variable %s, but keys in a list of mappings cannot be set from the environment", k.path, k.env)
			case !inList && !k.section && k.typ != "mapping" && k.env == "":
				t.Errorf("%s: no variable", k.path)
			}
		}
	}
	// The variables the reference names are the ones Load reads.
	for _, tc := range []struct{ env, path string }{
		{"D1BRIDGE_NODE_BASEURL", "node.baseURL"},
		{"D1BRIDGE_AUTH_PROXY_SECRET", "auth.proxy.secret"},
		{"D1BRIDGE_LIMITS_MAXUPLOADSPERCLIENT", "limits.maxUploadsPerClient"},
	} {
		found := false
		for _, s := range sections {
			for _, k := range s.keys {
				if k.path == tc.path {
					found = true
					if k.env != tc.env {
						t.Errorf("%s: variable %q, want %q", k.path, k.env, tc.env)
					}
				}
			}
		}
		if !found {
			t.Errorf("%s: not in the reference", tc.path)
		}
	}
	c, err := Load("", func(name string) string {
		if name == "D1BRIDGE_LIMITS_MAXUPLOADSPERCLIENT" {
			return "3"
		}
		return ""
	})
	if err != nil || c.Limits.MaxUploadsPerClient != 3 {
		t.Errorf("Load with D1BRIDGE_LIMITS_MAXUPLOADSPERCLIENT=3: %v, %d", err, c.Limits.MaxUploadsPerClient)
	}
}

// TestReferenceOptionSources: every upstream type has its options in the
// reference.
func TestReferenceOptionSources(t *testing.T) {
	d, err := readDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range d.consts {
		if !strings.HasPrefix(name, "Upstream") {
			continue
		}
		if !slices.ContainsFunc(optionSources, func(o optionSource) bool { return o.upstreamType == value }) {
			t.Errorf("upstream type %q (%s) has no entry in optionSources (config/refgen_options_test.go): name the struct its mapping decodes its options into", value, name)
		}
	}
}

// undocumentedOptions are the mappings' options whose fields have no doc
// comment yet (their packages belong to the mappings). The list only
// shrinks: documenting an option fails this test until it is taken off.
var undocumentedOptions = []string{}

// TestReferenceDocumented: every key of Config has a doc comment of its own
// on its field, and so does every mapping option but those listed in
// undocumentedOptions.
func TestReferenceDocumented(t *testing.T) {
	sections, err := reference()
	if err != nil {
		t.Fatal(err)
	}
	var options []string
	for _, s := range sections {
		for _, k := range s.keys {
			if s.options != "" {
				if k.doc == "" || strings.HasPrefix(k.doc, "The keys of `") {
					options = append(options, s.options+" "+k.path)
				}
				continue
			}
			if k.doc == "" {
				t.Errorf("%s has no doc comment: write one above %s in config/ saying what it means (and its unit)", k.path, k.goField)
			}
		}
	}
	for _, o := range options {
		if !slices.Contains(undocumentedOptions, o) {
			t.Errorf("option %s has no doc comment: write one on its field saying what it means", o)
		}
	}
	for _, o := range undocumentedOptions {
		if !slices.Contains(options, o) {
			t.Errorf("option %s is documented now: take it off undocumentedOptions in config/reference_test.go", o)
		}
	}
}
