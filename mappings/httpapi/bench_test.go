package httpapi

import (
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// BenchmarkGet reads a 1 KiB and a 256 MiB file from nginx through the store
// (the upstream client's chain) and, in the same run, directly with a plain
// http.Client GET of the same URL. The store's ratio is its time over
// direct's (mappingtest.BenchGet):
//
//	go test -run '^$' -bench Get -benchtime 3s -count 5 ./mappings/httpapi/
func BenchmarkGet(b *testing.B) {
	d := servers.NginxDAV(b, servers.DAVOptions{})
	s := open(b, upstreamConfig(b, d.URL, nginxOptions("bench", "{key}")), nil)
	mappingtest.BenchGet(b, s, func(key string) string { return d.URL + "bench/" + key })
}
