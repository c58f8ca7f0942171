package ocfl

// Fuzz target of the OCFL inventory reader (inventory.json of an object in the
// storage root). Run it with
//
//	go test -run '^$' -fuzz '^FuzzParseInventory$' -fuzztime 60s ./mappings/ocfl/

import (
	"strings"
	"testing"
)

// FuzzParseInventory: any bytes give an inventory or an error, never a panic;
// what passes is what Walk relies on: versions v1..vN in order, every state
// digest in the manifest, every manifest path a clean path inside a version's
// content directory, every logical path clean and listed once per version,
// and states sorted by path.
func FuzzParseInventory(f *testing.F) {
	f.Add([]byte(inv("v1", "v2", "content")))
	f.Add([]byte(inv("v001", "v002", "content")))
	f.Add([]byte(inv("v1", "v2", "bits")))
	f.Add([]byte(inv("v1", "v2", "content", `"contentDirectory": "content",`, "")))
	f.Add([]byte(inv("v1", "v2", "content", `v2/content/sub/y.csv`, `v2/content/../../y.csv`)))
	f.Add([]byte(inv("v1", "v2", "content", `"sha512"`, `"sha256"`)))
	f.Add([]byte(`{"id": "x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := parseInventory(body)
		if err != nil {
			if got != nil {
				t.Fatal("an inventory and an error")
			}
			return
		}
		if got.id == "" || (got.algorithm != "SHA-512" && got.algorithm != "SHA-256") || len(got.versions) == 0 {
			t.Fatalf("inventory %+v", got)
		}
		for d, p := range got.manifest {
			segs := strings.Split(p, "/")
			if d != strings.ToLower(d) || !cleanPath(p) || len(segs) < 3 {
				t.Fatalf("manifest %q: %q", d, p)
			}
			if n, _, ok := versionNumber(segs[0]); !ok || n > len(got.versions) || got.versions[n-1].name != segs[0] {
				t.Fatalf("manifest path %q is not in a version", p)
			}
		}
		for i, v := range got.versions {
			if v.number != i+1 {
				t.Fatalf("version %d is numbered %d", i+1, v.number)
			}
			seen := map[string]bool{}
			for j, e := range v.state {
				if _, ok := got.manifest[e.digest]; !ok || !cleanPath(e.path) || seen[e.path] {
					t.Fatalf("version %s entry %+v", v.name, e)
				}
				seen[e.path] = true
				if j > 0 && v.state[j-1].path >= e.path {
					t.Fatalf("version %s state out of order", v.name)
				}
			}
		}
	})
}
