package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// repeated reads as an endless run of one byte.
type repeated byte

func (r repeated) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// BenchmarkGet reads a 1 KiB and a 256 MiB file from nginx through the store
// (the upstream client's chain) and, in the same run, directly with a plain
// http.Client GET of the same URL. The store's ratio metric is its time per
// read over the mean of direct's runs before it in this process (-count runs
// each sub-benchmark that many times in a row); 1.00 is no overhead:
//
//	go test -run '^$' -bench Get -benchtime 3s -count 5 ./mappings/httpapi/
func BenchmarkGet(b *testing.B) {
	d := servers.NginxDAV(b, servers.DAVOptions{})
	s := open(b, upstreamConfig(b, d.URL, nginxOptions("bench", "{key}")), nil)
	if err := os.Mkdir(filepath.Join(d.Root, "bench"), 0o755); err != nil {
		b.Fatal(err)
	}
	plain := &http.Client{}
	for _, size := range []int64{1 << 10, 256 << 20} {
		key := fmt.Sprintf("bench-%d", size)
		if err := os.Truncate(writeEmpty(b, filepath.Join(d.Root, "bench", key)), size); err != nil {
			b.Fatal(err)
		}
		url := d.URL + "bench/" + key
		name := fmt.Sprintf("%dKiB", size>>10)
		var direct []time.Duration // per read, one for each run
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
			direct = append(direct, b.Elapsed()/time.Duration(b.N))
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
			if len(direct) > 0 {
				var sum time.Duration
				for _, d := range direct {
					sum += d
				}
				mean := sum / time.Duration(len(direct))
				b.ReportMetric(float64(b.Elapsed()/time.Duration(b.N))/float64(mean), "ratio")
			}
		})
	}
}

// writeEmpty creates an empty file at path and returns path.
func writeEmpty(b *testing.B, path string) string {
	b.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// sink discards, without io.Discard's ReaderFrom, so that both paths copy
// through the same buffer.
type sink struct{}

func (sink) Write(p []byte) (int, error) { return len(p), nil }
