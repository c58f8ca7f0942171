package webdav

import (
	"context"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestPutWhoseMoveAnswerIsLostLeavesNothing: a Put whose caller gives up
// after the server has moved the temporary resource onto the key, but before
// the MOVE's answer arrives, fails and leaves nothing under key. The object
// used to stay, though node.Blobs promises nothing is left after an error
// (real nginx).
func TestPutWhoseMoveAnswerIsLostLeavesNothing(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	proxy := servers.LoseAnswer(t, d.URL, func(r *http.Request) bool { return r.Method == "MOVE" }, cancel)
	s := open(t, upstreamConfig(t, proxy, "prefix: p\n"), nil)
	const key = "8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b"
	if _, err := s.Put(ctx, key, strings.NewReader("the whole object")); err == nil {
		t.Fatal("Put succeeded")
	}
	mappingtest.WantNothingAt(t, s, key)
	filepath.WalkDir(filepath.Join(d.Root, "p"), func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			t.Errorf("%s is left", path)
		}
		return nil
	})
}
