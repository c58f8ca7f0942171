package ocfl

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// inventoryTypes are the inventory type URIs of the OCFL versions read.
var inventoryTypes = map[string]bool{
	"https://ocfl.io/1.0/spec/#inventory": true,
	"https://ocfl.io/1.1/spec/#inventory": true,
}

// inventory is what Walk uses of a validated inventory.json.
type inventory struct {
	id              string
	digestAlgorithm string // sha512 or sha256, as the inventory names it
	algorithm       string // its DataONE label: SHA-512 or SHA-256
	// manifest maps a lowercased digest to the first content path holding
	// its bytes, relative to the object root.
	manifest map[string]string
	versions []version // v1..vN
}

type version struct {
	name    string // as in the inventory: "v3" or "v003"
	number  int
	created time.Time
	state   []entry // by logical path
}

// entry is one logical file of a version.
type entry struct {
	path   string
	digest string // lowercased
}

// rawInventory is inventory.json as written (https://ocfl.io/1.1/spec/#inventory-structure).
type rawInventory struct {
	ID               string                `json:"id"`
	Type             string                `json:"type"`
	DigestAlgorithm  string                `json:"digestAlgorithm"`
	Head             string                `json:"head"`
	ContentDirectory *string               `json:"contentDirectory"`
	Manifest         map[string][]string   `json:"manifest"`
	Versions         map[string]rawVersion `json:"versions"`
}

type rawVersion struct {
	Created string              `json:"created"`
	State   map[string][]string `json:"state"`
}

// idOf is the id of an inventory that did not pass, when its JSON gives one.
func idOf(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return v.ID
}

// parseInventory decodes and validates inventory.json: what Walk relies on
// must hold (every state digest in the manifest, content paths inside the
// object's version content directories, versions numbered 1..N with head the
// last), or the object is reported with a problem.
func parseInventory(body []byte) (*inventory, error) {
	var raw rawInventory
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", inventoryName, err)
	}
	bad := func(format string, a ...any) (*inventory, error) {
		return nil, fmt.Errorf(inventoryName+": "+format, a...)
	}
	if raw.ID == "" {
		return bad("no id")
	}
	if !inventoryTypes[raw.Type] {
		return bad("type %q is not an OCFL 1.0 or 1.1 inventory", raw.Type)
	}
	if raw.DigestAlgorithm != "sha512" && raw.DigestAlgorithm != "sha256" {
		return bad("digestAlgorithm %q is not sha512 or sha256", raw.DigestAlgorithm)
	}
	label, _ := adapter.CanonicalAlgorithm(raw.DigestAlgorithm)
	contentDir := "content"
	if raw.ContentDirectory != nil {
		contentDir = *raw.ContentDirectory
		if contentDir == "" || contentDir == "." || contentDir == ".." || strings.Contains(contentDir, "/") {
			return bad("contentDirectory %q", contentDir)
		}
	}
	inv := &inventory{id: raw.ID, digestAlgorithm: raw.DigestAlgorithm, algorithm: label}

	// Versions: v1..vN, or zero-padded names all of one width.
	if len(raw.Versions) == 0 {
		return bad("no versions")
	}
	inv.versions = make([]version, len(raw.Versions))
	padded := make([]bool, len(raw.Versions))
	for name, rv := range raw.Versions {
		n, pad, ok := versionNumber(name)
		if !ok || n > len(raw.Versions) {
			return bad("version %q out of the sequence v1..v%d", name, len(raw.Versions))
		}
		if inv.versions[n-1].name != "" {
			return bad("version %d named twice", n)
		}
		created, err := time.Parse(time.RFC3339Nano, rv.Created)
		if err != nil {
			return bad("version %s created %q is not an RFC 3339 date", name, rv.Created)
		}
		inv.versions[n-1] = version{name: name, number: n, created: created}
		padded[n-1] = pad
	}
	// Zero-padded names ("v001") all have v1's width; others have no padding.
	for i, v := range inv.versions {
		if padded[0] && len(v.name) != len(inv.versions[0].name) || !padded[0] && padded[i] {
			return bad("version names %s and %s mix zero-padding", inv.versions[0].name, v.name)
		}
	}
	if raw.Head != inv.versions[len(inv.versions)-1].name {
		return bad("head %q is not the last version %s", raw.Head, inv.versions[len(inv.versions)-1].name)
	}

	// Manifest: content paths in a version's content directory.
	inv.manifest = make(map[string]string, len(raw.Manifest))
	for digest, paths := range raw.Manifest {
		if len(paths) == 0 {
			return bad("manifest digest %s has no content path", digest)
		}
		for _, p := range paths {
			segs := strings.Split(p, "/")
			if _, ok := raw.Versions[segs[0]]; !ok || !cleanPath(p) || len(segs) < 3 || segs[1] != contentDir {
				return bad("content path %q is not in a version's %s directory", p, contentDir)
			}
		}
		d := strings.ToLower(digest)
		if _, dup := inv.manifest[d]; dup {
			return bad("manifest digest %s twice", d)
		}
		inv.manifest[d] = paths[0]
	}

	// States: logical paths of digests in the manifest.
	for i := range inv.versions {
		v := &inv.versions[i]
		rs := raw.Versions[v.name].State
		seen := map[string]bool{}
		for digest, paths := range rs {
			d := strings.ToLower(digest)
			if _, ok := inv.manifest[d]; !ok {
				return bad("version %s digest %s is not in the manifest", v.name, digest)
			}
			for _, p := range paths {
				if !cleanPath(p) || seen[p] {
					return bad("version %s logical path %q", v.name, p)
				}
				seen[p] = true
				v.state = append(v.state, entry{path: p, digest: d})
			}
		}
		sort.Slice(v.state, func(i, j int) bool { return v.state[i].path < v.state[j].path })
	}
	return inv, nil
}

// versionNumber parses a version directory name: "v3" or zero-padded "v003".
func versionNumber(name string) (n int, padded, ok bool) {
	digits, found := strings.CutPrefix(name, "v")
	if !found || digits == "" {
		return 0, false, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 {
		return 0, false, false
	}
	return n, digits[0] == '0', true
}

// cleanPath says whether p is a relative path without empty, "." or ".."
// segments: the only paths an inventory may give, and the only ones that
// cannot lead a key out of the object's folder.
func cleanPath(p string) bool {
	if p == "" {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
