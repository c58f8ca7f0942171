package httpapi

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestKeyPlaceholderStaysInCollection: no key reaches a file outside the
// directory the URL template puts {key} in. url.PathEscape leaves dots alone
// and sends "/" as %2F, which nginx (like most servers) decodes and then
// resolves "..": keys with ".." segments read and deleted files outside
// /flat/ (real nginx).
func TestKeyPlaceholderStaysInCollection(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	for dir, body := range map[string]string{"flat": "inside", "private": "SECRET"} {
		os.MkdirAll(filepath.Join(d.Root, dir), 0o755)
		os.WriteFile(filepath.Join(d.Root, dir, "f.txt"), []byte(body), 0o644)
	}
	s := open(t, upstreamConfig(t, d.URL, nginxOptions("flat", "{key}")), nil)
	for _, key := range []string{"../private/f.txt", "x/../../private/f.txt"} {
		if r, err := s.Get(t.Context(), key); err == nil {
			b, _ := io.ReadAll(r)
			r.Close()
			t.Errorf("Get(%q) with get.url /flat/{key} read %q, a file outside /flat/", key, b)
		}
	}
	if err := s.Delete(t.Context(), "../private/f.txt"); err == nil {
		if _, err := os.Stat(filepath.Join(d.Root, "private", "f.txt")); err != nil {
			t.Errorf(`Delete("../private/f.txt") removed private/f.txt, outside /flat/`)
		}
	}
}
