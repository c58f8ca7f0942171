package mappingtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/node"
)

// Reader is another way to read a key's bytes, benchmarked beside the store.
type Reader struct {
	Name string
	Get  func(ctx context.Context, key string) (io.ReadCloser, error)
}

// BenchGet puts a 1 KiB and a 256 MiB object in s and reads each, in the same
// run, directly from the upstream with a plain http.Client GET of direct(key)
// (the sub-benchmark direct), through each of others, and through the store
// (store). The store's ratio metric is its time per read over the mean of
// direct's runs before it in this process (-count runs each sub-benchmark
// that many times in a row); 1.00 is no overhead. Every path copies through
// the same buffer into a sink without io.Discard's ReaderFrom.
func BenchGet(b *testing.B, s node.Blobs, direct func(key string) string, others ...Reader) {
	plain := &http.Client{}
	for _, size := range []int64{1 << 10, 256 << 20} {
		key := fmt.Sprintf("bench-%d", size)
		if _, err := s.Put(b.Context(), key, io.LimitReader(zeros{}, size)); err != nil {
			b.Fatal(err)
		}
		url := direct(key)
		name := fmt.Sprintf("%dKiB", size>>10)
		var times []time.Duration // direct's, per read, one for each run
		b.Run(name+"/direct", func(b *testing.B) {
			benchRead(b, size, func(context.Context) (io.ReadCloser, error) {
				resp, err := plain.Get(url)
				if err == nil && resp.StatusCode != http.StatusOK {
					resp.Body.Close()
					return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
				}
				return resp.Body, err
			})
			times = append(times, b.Elapsed()/time.Duration(b.N))
		})
		for _, o := range others {
			b.Run(name+"/"+o.Name, func(b *testing.B) {
				benchRead(b, size, func(ctx context.Context) (io.ReadCloser, error) { return o.Get(ctx, key) })
			})
		}
		b.Run(name+"/store", func(b *testing.B) {
			benchRead(b, size, func(ctx context.Context) (io.ReadCloser, error) { return s.Get(ctx, key) })
			if len(times) > 0 {
				var sum time.Duration
				for _, d := range times {
					sum += d
				}
				mean := sum / time.Duration(len(times))
				b.ReportMetric(float64(b.Elapsed()/time.Duration(b.N))/float64(mean), "ratio")
			}
		})
	}
}

// benchRead reads the size bytes open gives, b.N times.
func benchRead(b *testing.B, size int64, open func(context.Context) (io.ReadCloser, error)) {
	b.SetBytes(size)
	buf := make([]byte, 32<<10)
	for b.Loop() {
		r, err := open(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(sink{}, r, buf)
		r.Close()
		if err != nil || n != size {
			b.Fatalf("%d bytes, %v", n, err)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// sink discards, without io.Discard's ReaderFrom, so that every path copies
// through the same buffer.
type sink struct{}

func (sink) Write(p []byte) (int, error) { return len(p), nil }
