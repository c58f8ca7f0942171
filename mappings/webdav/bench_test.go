package webdav

import (
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// BenchmarkGet reads a 1 KiB and a 256 MiB object through the store (the
// upstream client's chain and upstream.Seekable) and, in the same run,
// directly from nginx with a plain http.Client GET. The store's ratio is its
// time over direct's (mappingtest.BenchGet):
//
//	go test -run '^$' -bench Get -benchtime 3s -count 5 ./mappings/webdav/
func BenchmarkGet(b *testing.B) {
	d := servers.NginxDAV(b, servers.DAVOptions{})
	s := open(b, upstreamConfig(b, d.URL, "prefix: bench"), nil)
	mappingtest.BenchGet(b, s, s.object)
}
