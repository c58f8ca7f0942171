package ocfl

import (
	"strings"
	"testing"
)

// inv is an inventory with two versions named a and b, content in dir, whose
// v2 keeps v1's file; edit rewrites it before parsing.
func inv(a, b, dir string, edit ...string) string {
	s := `{
  "id": "obj", "type": "https://ocfl.io/1.0/spec/#inventory", "digestAlgorithm": "sha512",
  "head": "VERB", "contentDirectory": "DIR",
  "manifest": {"AB12": ["VERA/DIR/x.csv"], "cd34": ["VERB/DIR/sub/y.csv"]},
  "versions": {
    "VERA": {"created": "2020-01-01T00:00:00Z", "state": {"ab12": ["x.csv"]}},
    "VERB": {"created": "2020-02-01T00:00:00.5+01:00", "state": {"AB12": ["x.csv", "copy/x.csv"], "cd34": ["y.csv"]}}
  }
}`
	s = strings.NewReplacer("VERA", a, "VERB", b, "DIR", dir).Replace(s)
	for i := 0; i+1 < len(edit); i += 2 {
		s = strings.Replace(s, edit[i], edit[i+1], 1)
	}
	return s
}

func TestParseInventory(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		json string
		want string // the versions parsed, or the error
	}{
		{"plain", inv("v1", "v2", "content"), "v1 1 [x.csv=ab12] | v2 2 [copy/x.csv=ab12 x.csv=ab12 y.csv=cd34]"},
		{"zero-padded", inv("v001", "v002", "content"), "v001 1 [x.csv=ab12] | v002 2 [copy/x.csv=ab12 x.csv=ab12 y.csv=cd34]"},
		{"another content directory", inv("v1", "v2", "bits"), "v1 1 [x.csv=ab12] | v2 2 [copy/x.csv=ab12 x.csv=ab12 y.csv=cd34]"},
		{"no contentDirectory", inv("v1", "v2", "content", `"contentDirectory": "content",`, ""), "v1 1 [x.csv=ab12] | v2 2 [copy/x.csv=ab12 x.csv=ab12 y.csv=cd34]"},
		{"mixed padding", inv("v1", "v02", "content"), "zero-padding"},
		{"padding of other widths", inv("v01", "v002", "content"), "zero-padding"},
		{"a gap", inv("v1", "v3", "content"), "out of the sequence"},
		{"v0", inv("v0", "v1", "content"), "out of the sequence"},
		{"head not last", inv("v1", "v2", "content", `"head": "v2"`, `"head": "v1"`), "head"},
		{"digest not in manifest", inv("v1", "v2", "content", `"cd34": ["y.csv"]`, `"ef56": ["y.csv"]`), "not in the manifest"},
		{"content path escaping", inv("v1", "v2", "content", `v2/content/sub/y.csv`, `v2/content/../../y.csv`), "content path"},
		{"content path outside a version", inv("v1", "v2", "content", `v2/content/sub/y.csv`, `v9/content/y.csv`), "content path"},
		{"content path outside the content directory", inv("v1", "v2", "content", `v2/content/sub/y.csv`, `v2/other/y.csv`), "content path"},
		{"logical path with ..", inv("v1", "v2", "content", `["y.csv"]`, `["../y.csv"]`), "logical path"},
		{"logical path twice", inv("v1", "v2", "content", `"copy/x.csv"`, `"y.csv"`), "logical path"},
		{"bad date", inv("v1", "v2", "content", `2020-01-01T00:00:00Z`, `2020-01-01`), "RFC 3339"},
		{"md5", inv("v1", "v2", "content", `"sha512"`, `"md5"`), "digestAlgorithm"},
		{"not OCFL", inv("v1", "v2", "content", `1.0/spec/#inventory`, `2.0/spec/#inventory`), "type"},
		{"no id", inv("v1", "v2", "content", `"id": "obj"`, `"id": ""`), "no id"},
		{"contentDirectory with a slash", inv("v1", "v2", "a/b"), "contentDirectory"},
		{"no versions", `{"id": "obj", "type": "https://ocfl.io/1.1/spec/#inventory", "digestAlgorithm": "sha512", "head": "v1", "manifest": {}, "versions": {}}`, "no versions"},
		{"not JSON", `{"id": "obj",`, "unexpected end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv, err := parseInventory([]byte(c.json))
			var got string
			if err != nil {
				got = err.Error()
			} else {
				var vs []string
				for _, v := range inv.versions {
					var es []string
					for _, e := range v.state {
						es = append(es, e.path+"="+e.digest)
					}
					vs = append(vs, v.name+" "+string(rune('0'+v.number))+" ["+strings.Join(es, " ")+"]")
				}
				got = strings.Join(vs, " | ")
				if inv.algorithm != "SHA-512" || inv.id != "obj" {
					t.Errorf("algorithm %q id %q", inv.algorithm, inv.id)
				}
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
