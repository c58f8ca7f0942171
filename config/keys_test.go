package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSuggest: an unknown key is named with the closest known key path,
// case ignored and list indexes kept; nothing when no key is close.
func TestSuggest(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"node.baseurl":                   "node.baseURL",
		"node.sbmitters":                 "node.submitters",
		"listn":                          "listen",
		"upstreams[1].breker":            "upstreams[1].breaker",
		"upstreams[2].harvest.intervall": "upstreams[2].harvest.interval",
		"colour":                         "",
		"tls.certificate":                "",
	} {
		if got := Suggest(key); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestLoadUnknownKeyInList: an unknown key in an upstream is named by its
// path, with the known key it resembles.
func TestLoadUnknownKeyInList(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.yaml")
	text := "upstreams:\n  - name: a\n    type: s3\n    baseURL: http://127.0.0.1:1\n    breker: {failures: 3}\n"
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, noEnv)
	checkErrors(t, err, []string{p + ":5: unknown key upstreams[0].breker; did you mean upstreams[0].breaker?"})
}

// TestChanged: the changed keys of two configurations, by path; options are
// compared by content, not by where they sit in the file.
func TestChanged(t *testing.T) {
	t.Parallel()
	load := func(text string) *Config {
		t.Helper()
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const up = "upstreams:\n  - name: a\n    type: s3\n    baseURL: http://127.0.0.1:1\n    timeout: 1m\n    options: {bucket: b}\n"
	base := load(up)
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{name: "same", text: up},
		{name: "same options elsewhere in the file", text: "# a comment\n\n" + up},
		{name: "scalars", text: "node: {name: x}\ntls: {cert: c, key: k}\n" + up,
			want: []string{"node.name", "tls.cert", "tls.key"}},
		{name: "an upstream's keys", text: "upstreams:\n  - name: a\n    type: s3\n    baseURL: http://127.0.0.1:1\n    timeout: 2m\n    breaker: {failures: 9}\n    options: {bucket: c}\n",
			want: []string{"upstreams[0].timeout", "upstreams[0].breaker.failures", "upstreams[0].options"}},
		{name: "another upstream", text: up + "  - {name: b, type: webdav, baseURL: http://127.0.0.1:2}\nstore: b\n",
			want: []string{"upstreams", "store"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Changed(base, load(tc.text))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Changed = %q, want %q", got, tc.want)
			}
		})
	}
}
