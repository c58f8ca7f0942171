package webdav

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// BenchmarkGet reads a 1 KiB and a 256 MiB object through the store (the
// upstream client's chain and upstream.Seekable) and, in the same run,
// directly from nginx with a plain http.Client GET. Compare the store's MB/s
// with direct's for the store layer's overhead:
//
//	go test -run '^$' -bench Get -benchtime 3s -count 5 ./mappings/webdav/
func BenchmarkGet(b *testing.B) {
	d := servers.NginxDAV(b, servers.DAVOptions{})
	s := open(b, upstreamConfig(b, d.URL, "prefix: bench"), nil)
	plain := &http.Client{}
	for _, size := range []int64{1 << 10, 256 << 20} {
		key := fmt.Sprintf("bench-%d", size)
		if _, err := s.Put(b.Context(), key, io.LimitReader(zeros{}, size)); err != nil {
			b.Fatal(err)
		}
		url := s.object(key)
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run(name+"/direct", func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, 32<<10)
			for b.Loop() {
				resp, err := plain.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(sink{}, resp.Body, buf)
				resp.Body.Close()
				if err != nil || n != size || resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d bytes, %v", resp.Status, n, err)
				}
			}
		})
		b.Run(name+"/store", func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, 32<<10)
			for b.Loop() {
				r, err := s.Get(b.Context(), key)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(sink{}, r, buf)
				r.Close()
				if err != nil || n != size {
					b.Fatalf("%d bytes, %v", n, err)
				}
			}
		})
	}
}

// sink discards, without io.Discard's ReaderFrom, so that both paths copy
// through the same buffer.
type sink struct{}

func (sink) Write(p []byte) (int, error) { return len(p), nil }
