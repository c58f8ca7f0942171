package adapter_test

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// hasherAlgs are the algorithm sets the Hasher tests use: one (hashed inline),
// two and three (hashed in parallel).
var hasherAlgs = [][]string{
	{"MD5"},
	{"MD5", "SHA-1"},
	adapter.SpeculativeAlgorithms,
}

var cryptoHashes = map[string]func() hash.Hash{"MD5": md5.New, "SHA-1": sha1.New, "SHA-256": sha256.New}

// wantSums is what crypto's hashes give for data.
func wantSums(algs []string, data []byte) map[string]string {
	m := map[string]string{}
	for _, a := range algs {
		h := cryptoHashes[a]()
		h.Write(data)
		m[a] = hex.EncodeToString(h.Sum(nil))
	}
	return m
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	r.Read(b)
	return b
}

// writeIn writes data to w in pieces of size step (all at once when step is 0)
// and checks what each Write returns.
func writeIn(t *testing.T, w io.Writer, data []byte, step int) {
	t.Helper()
	if step == 0 {
		step = len(data) + 1
	}
	for len(data) > 0 {
		p := data[:min(step, len(data))]
		if n, err := w.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
		data = data[len(p):]
	}
}

func sameSums(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: Sums() = %v, want %v", what, got, want)
	}
}

// crewGoroutines counts the goroutines that hash for a Hasher.
func crewGoroutines() int {
	buf := make([]byte, 1<<20)
	return crewIn(buf)
}

func crewIn(buf []byte) int {
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte("adapter.startCrew.func"))
}

// noCrewLeft checks that no hashing goroutine is left and that the count is
// back to before. Sums and Close wait for the goroutines to be done; the
// wait here only covers their last instructions (a thread the machine
// preempted there may take a while: the loop ends as soon as they are gone),
// and nothing is allocated meanwhile, so that no collection runs the cleanup
// of a dropped Hasher.
func noCrewLeft(t *testing.T, before int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for (crewIn(buf) != 0 || runtime.NumGoroutine() > before) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := crewIn(buf); n != 0 {
		t.Errorf("%d hashing goroutines left", n)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before, %d after", before, n)
	}
}

func TestHasherDigests(t *testing.T) {
	t.Parallel()
	c := adapter.HashChunk
	sizes := map[string]int{
		"0": 0, "1": 1, "chunk-1": c - 1, "chunk": c, "chunk+1": c + 1,
		"3 chunks+7": 3*c + 7, "10MiB": 10 << 20,
	}
	// Writes: all at once, the multipart reader's 4 KiB, an odd size that
	// straddles every chunk edge, and a chunk and a half.
	steps := map[string]int{"whole": 0, "4KiB": 4096, "4093": 4093, "1.5chunk": c + c/2}
	for sizeName, size := range sizes {
		data := randomBytes(size, uint64(size))
		for _, algs := range hasherAlgs {
			want := wantSums(algs, data)
			for stepName, step := range steps {
				name := sizeName + "/" + strings.Join(algs, "+") + "/" + stepName
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					h := adapter.NewHasher(algs)
					writeIn(t, h, data, step)
					sameSums(t, name, h.Sums(), want)
				})
			}
		}
	}
}

func TestHasherNames(t *testing.T) {
	t.Parallel()
	data := randomBytes(3*adapter.HashChunk, 1)
	h := adapter.NewHasher([]string{"sha1", "MD5", "SHA-1", "bogus", "md5", "sha-256"})
	writeIn(t, h, data, 0)
	sameSums(t, "repeated and unknown names", h.Sums(), wantSums(adapter.SpeculativeAlgorithms, data))

	none := adapter.NewHasher([]string{"bogus"})
	writeIn(t, none, data, 4096)
	sameSums(t, "no known algorithm", none.Sums(), map[string]string{})
	if err := none.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}

// TestHasherRunningSums checks that Sums, like hash.Hash.Sum, gives the digests
// of what was written so far and that writing may go on after it and after
// Close.
func TestHasherRunningSums(t *testing.T) {
	c := adapter.HashChunk
	data := randomBytes(5*c+123, 2)
	cuts := []int{0, 1, c - 1, c, 2*c + 5, 5*c + 123}
	for _, algs := range hasherAlgs {
		t.Run(strings.Join(algs, "+"), func(t *testing.T) {
			before := runtime.NumGoroutine()
			h := adapter.NewHasher(algs)
			at := 0
			for i, cut := range cuts {
				writeIn(t, h, data[at:cut], 4093)
				at = cut
				if i%2 == 0 {
					if err := h.Close(); err != nil {
						t.Fatalf("Close() = %v", err)
					}
				}
				sameSums(t, fmt.Sprintf("after %d bytes", cut), h.Sums(), wantSums(algs, data[:cut]))
				sameSums(t, fmt.Sprintf("again after %d bytes", cut), h.Sums(), wantSums(algs, data[:cut]))
				noCrewLeft(t, before)
			}
			runtime.KeepAlive(h) // Sums and Close, not the cleanup, stopped them
		})
	}
}

// errAfter reads n bytes of data, then fails.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

// TestHasherAbort abandons streams midway, the way a failed or cancelled
// upload does: Close must stop every hashing goroutine before it returns.
func TestHasherAbort(t *testing.T) {
	c := adapter.HashChunk
	boom := errors.New("connection reset")
	for _, algs := range hasherAlgs {
		for _, size := range []int{0, c / 2, c, 3*c + 1, 40 * c} {
			t.Run(fmt.Sprintf("%s/%d", strings.Join(algs, "+"), size), func(t *testing.T) {
				before := runtime.NumGoroutine()
				h := adapter.NewHasher(algs)
				body := &errAfter{r: bytes.NewReader(randomBytes(size, 3)), err: boom}
				n, err := io.Copy(h, body)
				if n != int64(size) || !errors.Is(err, boom) {
					t.Fatalf("io.Copy = %d, %v; want %d, %v", n, err, size, boom)
				}
				if size > c && len(algs) > 1 && crewGoroutines() != len(algs) {
					t.Errorf("%d hashing goroutines while streaming, want %d", crewGoroutines(), len(algs))
				}
				for range 2 {
					if err := h.Close(); err != nil {
						t.Errorf("Close() = %v", err)
					}
					noCrewLeft(t, before)
				}
				runtime.KeepAlive(h) // Close, not the cleanup, stopped them
			})
		}
	}
}

// TestHasherDropped checks the safety net: a Hasher dropped without Sums or
// Close stops its goroutines once collected.
func TestHasherDropped(t *testing.T) {
	func() {
		h := adapter.NewHasher(adapter.SpeculativeAlgorithms)
		writeIn(t, h, randomBytes(3*adapter.HashChunk, 4), 4096)
	}()
	if n := crewGoroutines(); n != len(adapter.SpeculativeAlgorithms) {
		t.Fatalf("%d hashing goroutines before collection, want %d", n, len(adapter.SpeculativeAlgorithms))
	}
	deadline := time.Now().Add(5 * time.Second)
	for crewGoroutines() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := crewGoroutines(); n != 0 {
		t.Errorf("%d hashing goroutines left after the Hasher was collected", n)
	}
}

// BenchmarkHasher hashes 256 MiB with the Hasher and, in the same loop, with
// crypto's hashes one after another behind an io.MultiWriter (the Hasher before
// it hashed in parallel). ns/op and MB/s are the Hasher's; seq-MB/s the
// baseline's; x-seq the ratio Hasher/sequential (1 is parity). Writes are of
// 4 KiB (what a multipart part gives a TeeReader) or 256 KiB.
//
//	go test -run '^$' -bench Hasher -benchtime 3x -count 3 ./adapter/
func BenchmarkHasher(b *testing.B) {
	const size = 256 << 20
	src := randomBytes(1<<20, 5)
	feed := func(w io.Writer, step int) {
		for off := 0; off < size; off += step {
			p := src[off%len(src):]
			w.Write(p[:step])
		}
	}
	for _, algs := range hasherAlgs {
		for _, step := range []int{4 << 10, 256 << 10} {
			b.Run(fmt.Sprintf("256MiB/%s/write-%dKiB", strings.Join(algs, "+"), step>>10), func(b *testing.B) {
				b.SetBytes(size)
				var par, seq time.Duration
				parallel := func() {
					start := time.Now()
					h := adapter.NewHasher(algs)
					feed(h, step)
					h.Sums()
					par += time.Since(start)
				}
				sequential := func() {
					start := time.Now()
					var ws []io.Writer
					var hs []hash.Hash
					for _, a := range algs {
						h := cryptoHashes[a]()
						ws, hs = append(ws, h), append(hs, h)
					}
					feed(io.MultiWriter(ws...), step)
					for _, h := range hs {
						h.Sum(nil)
					}
					seq += time.Since(start)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if i%2 == 0 {
						parallel()
						sequential()
					} else {
						sequential()
						parallel()
					}
				}
				b.StopTimer()
				mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / 1e6 / d.Seconds() }
				b.ReportMetric(float64(par.Nanoseconds())/float64(b.N), "ns/op")
				b.ReportMetric(mbps(par), "MB/s")
				b.ReportMetric(mbps(seq), "seq-MB/s")
				b.ReportMetric(mbps(par)/mbps(seq), "x-seq")
			})
		}
	}
}
