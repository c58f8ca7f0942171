package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

var benchDatasets = flag.Int("datasets", 2000, "datasets in BenchmarkHarvestDatasets (3 files each)")

// synthetic is a local source of n datasets of three files each, which gives
// every file's size and SHA-256: nothing is read to register them.
type synthetic struct{ n int }

func (s synthetic) Walk(ctx context.Context, since time.Time, fn func(*node.Dataset) error) error {
	for i := range s.n {
		d := &node.Dataset{ID: fmt.Sprintf("ds%07d", i), Modified: t0}
		for j := range 3 {
			sum := sha256.Sum256([]byte(fmt.Sprint(i, j)))
			d.Files = append(d.Files, node.Found{Key: fmt.Sprintf("/ds%07d/f%d.csv", i, j), FileName: fmt.Sprintf("f%d.csv", j),
				Size: 1000 + int64(j), Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(sum[:])}, Modified: t0})
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkHarvestDatasets harvests -datasets datasets (three files each, with
// checksums) into a SQLite catalog and the file store, then harvests them again
// unchanged. It reports files registered per second by the first pass, the
// catalog lookups per dataset of the unchanged pass, and the heap in use after
// each (flat memory: it does not grow with the number of datasets).
//
//	go test -run '^$' -bench HarvestDatasets -benchtime 1x ./mappings/node/ -args -datasets 100000
func BenchmarkHarvestDatasets(b *testing.B) {
	for range b.N {
		t := &testing.T{}
		e := newHarvestEnv(t, b.TempDir())
		var lookups atomic.Int64
		e.hooked.lookup = func(string) { lookups.Add(1) }
		e.n.StartDatasets(synthetic{*benchDatasets}, node.DatasetOptions{Name: "bench", Readers: []string{adapter.SubjectPublic}})
		start := time.Now()
		rep, err := e.n.HarvestDatasets(context.Background(), "bench")
		if err != nil || rep.Registered != *benchDatasets {
			b.Fatalf("first pass: %v %+v", err, rep)
		}
		first := time.Since(start)
		heap1 := heapInUse()
		lookups.Store(0)
		start = time.Now()
		rep, err = e.n.HarvestDatasets(context.Background(), "bench")
		if err != nil || rep.Unchanged != *benchDatasets || rep.Objects != 0 {
			b.Fatalf("unchanged pass: %v %+v", err, rep)
		}
		again := time.Since(start)
		b.ReportMetric(float64(3**benchDatasets)/first.Seconds(), "files/s")
		b.ReportMetric(float64(5**benchDatasets)/first.Seconds(), "objects/s")
		b.ReportMetric(float64(*benchDatasets)/again.Seconds(), "unchanged-datasets/s")
		b.ReportMetric(float64(lookups.Load())/float64(*benchDatasets), "lookups/dataset")
		b.ReportMetric(float64(heap1)/(1<<20), "heap-MiB")
		e.close()
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
