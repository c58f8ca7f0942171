//go:build linux

package main

// BenchmarkMNPackage: getPackage of a large OAI-ORE package from the real
// binary (see bench_test.go for the conventions of these benchmarks).
//
//	go test -run '^$' -bench MNPackage -benchtime 1x -timeout 20m ./cmd/d1bridge/
//	go test -run '^$' -bench MNPackage -benchtime 1x -short ./cmd/d1bridge/
//
// The package is 1,000 members of about 2 MiB (2 GiB in all; -short: 100
// members, 200 MiB) plus their resource map, created once through the node
// (Stage, then Create) and kept under $TMPDIR/d1bridge-bench-pkg/v<version>-
// <schema>-<members>; delete that directory to refill.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
)

// pkgBenchFillVersion keys the cached package: bump it when what
// pkgBenchFill stores changes.
const pkgBenchFillVersion = 1

const pkgBenchORE = "bench-pkg-ore"

// pkgBenchShape is the number of members and their total size.
func pkgBenchShape() (members int, total int64) {
	if testing.Short() {
		return 100, 200 << 20
	}
	return 1000, 2 << 30
}

// pkgBenchMemberPID and pkgBenchMemberSize: member i of n, sizes spreading
// total exactly (each within a byte of total/n).
func pkgBenchMemberPID(i int) string { return fmt.Sprintf("bench-pkg-member-%04d", i) }

func pkgBenchMemberSize(i, n int, total int64) int64 {
	return total*int64(i+1)/int64(n) - total*int64(i)/int64(n)
}

// BenchmarkMNPackage GETs the BagIt 0.97 zip of the package on a freshly
// started server each iteration and reads it to io.Discard, checking that it
// ends with a zip end-of-central-directory record that accounts for every
// byte and entry. MB/s is the zip's throughput; ttfb-ms the mean time from
// sending the request to the first byte of the answer (the server checks every
// member first); srv-peak-MiB the largest peak RSS (VmHWM, server start
// included) of the servers after their download.
func BenchmarkMNPackage(b *testing.B) {
	n, total := pkgBenchShape()
	dataDir := pkgBenchFilled(b, n, total)
	c := benchNewClient()
	defer c.CloseIdleConnections()
	var ttfb time.Duration
	var peak, size int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv, base := benchStart(b, dataDir)
		u := base + "/packages/" + url.PathEscape(adapter.PackageBagIt097) + "/" + url.PathEscape(pkgBenchORE)
		b.StartTimer()
		got, first, err := pkgBenchGet(c, u, n+1+4) // members, the map, 4 tag files
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ttfb += first
		if size != 0 && got != size {
			b.Fatalf("zip of %d bytes, an earlier one had %d", got, size)
		}
		size = got
		peak = max(peak, benchHWM(b, srv))
		srv.stop()
		b.StartTimer()
	}
	b.StopTimer()
	b.SetBytes(size)
	b.ReportMetric(float64(ttfb.Microseconds())/1e3/float64(b.N), "ttfb-ms")
	b.ReportMetric(float64(peak)/benchMiB, "srv-peak-MiB")
}

// pkgBenchGet GETs u, discards the body and checks it is a whole zip of
// entries entries. It returns the body's length and the time to first byte.
func pkgBenchGet(c *http.Client, u string, entries int) (int64, time.Duration, error) {
	var first time.Time
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { first = time.Now() },
	}))
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, 0, fmt.Errorf("GET %s: %s\n%s", u, resp.Status, msg)
	}
	tail := &pkgBenchTail{}
	n, err := benchCopy(io.MultiWriter(io.Discard, tail), resp.Body)
	if err != nil {
		return n, 0, fmt.Errorf("GET %s: after %d bytes: %w", u, n, err)
	}
	if err := pkgBenchCheckEOCD(tail.buf, n, entries); err != nil {
		return n, 0, fmt.Errorf("GET %s: %d bytes, not a whole zip: %w", u, n, err)
	}
	return n, first.Sub(start), nil
}

// pkgBenchTail keeps the last pkgBenchTailSize bytes written to it.
type pkgBenchTail struct{ buf []byte }

const pkgBenchTailSize = 64<<10 + 22 + 20 + 56 // EOCD with the longest comment, zip64 locator and record

func (t *pkgBenchTail) Write(p []byte) (int, error) {
	if len(p) >= pkgBenchTailSize {
		t.buf = append(t.buf[:0], p[len(p)-pkgBenchTailSize:]...)
		return len(p), nil
	}
	if drop := len(t.buf) + len(p) - pkgBenchTailSize; drop > 0 {
		t.buf = append(t.buf[:0], t.buf[drop:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// pkgBenchCheckEOCD checks that tail, the last bytes of a body of total bytes,
// ends with an end-of-central-directory record (PK\x05\x06, its comment
// reaching the end) whose central directory ends where the record starts and
// holds entries entries; when the record defers to zip64 (0xFFFF... fields),
// the zip64 locator and record (PK\x06\x07, PK\x06\x06) must precede it.
func pkgBenchCheckEOCD(tail []byte, total int64, entries int) error {
	le := binary.LittleEndian
	for i := len(tail) - 22; i >= 0; i-- {
		if !bytes.Equal(tail[i:i+4], []byte("PK\x05\x06")) || i+22+int(le.Uint16(tail[i+20:])) != len(tail) {
			continue
		}
		at := total - int64(len(tail)-i) // the record's offset in the body
		count, cdSize, cdOff := uint64(le.Uint16(tail[i+10:])), uint64(le.Uint32(tail[i+12:])), uint64(le.Uint32(tail[i+16:]))
		end := at
		if count == 0xFFFF || cdSize == 0xFFFFFFFF || cdOff == 0xFFFFFFFF {
			j := i - 20 - 56
			if j < 0 || !bytes.Equal(tail[i-20:i-16], []byte("PK\x06\x07")) || !bytes.Equal(tail[j:j+4], []byte("PK\x06\x06")) {
				return errors.New("end record defers to zip64, but no zip64 locator and record precede it")
			}
			count, cdSize, cdOff = le.Uint64(tail[j+32:]), le.Uint64(tail[j+40:]), le.Uint64(tail[j+48:])
			end = at - 20 - 56
		}
		if count != uint64(entries) {
			return fmt.Errorf("central directory of %d entries, want %d", count, entries)
		}
		if cdOff+cdSize != uint64(end) {
			return fmt.Errorf("central directory at %d+%d, want it to end at %d", cdOff, cdSize, end)
		}
		return nil
	}
	return errors.New("no end-of-central-directory record at the end")
}

// pkgBenchFilled returns a data directory holding the package, filling it
// the first time. Only reads are served from it, so runs share it.
func pkgBenchFilled(tb testing.TB, members int, total int64) string {
	// Other versions go; the other size of this version stays.
	prefix := fmt.Sprintf("v%d-%s-", pkgBenchFillVersion, benchSchemaKey())
	keep := func(name string) bool { return strings.HasPrefix(name, prefix) }
	return benchCached(tb, "d1bridge-bench-pkg", fmt.Sprintf("%s%d", prefix, members), keep,
		func(dir string) (string, error) {
			start := time.Now()
			if err := pkgBenchFill(dir, members, total); err != nil {
				return "", err
			}
			return fmt.Sprintf("a package of %d members, %d MiB, filled in %s", members, total>>20, time.Since(start).Round(time.Millisecond)), nil
		})
}

// pkgBenchFill creates the members (newGenReader(i, size): distinct bytes)
// and the resource map in the embedded store of dataDir through the node,
// from parallel goroutines.
func pkgBenchFill(dataDir string, members int, total int64) error {
	cfg := config.Default()
	cfg.DataDir = dataDir
	ns, err := mappings.New(cfg, nil, nil)
	if err != nil {
		return err
	}
	node := ns.Catalog
	ctx := context.Background()
	session := &adapter.Session{Subject: adapter.SubjectPublic, Subjects: []string{adapter.SubjectPublic},
		Address: "127.0.0.1", UserAgent: "d1bridge-bench-pkg"}
	create := func(pid, formatID string, body io.Reader) error {
		u, err := node.Stage(ctx, body, []string{"SHA-1"})
		if err != nil {
			return err
		}
		sm := benchSysmeta(pid, u.Size, u.Checksums["SHA-1"])
		sm.FormatID = formatID
		_, err = node.Create(ctx, session, sm, u)
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range cap(errs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= members {
					return
				}
				size := pkgBenchMemberSize(i, members, total)
				if err := create(pkgBenchMemberPID(i), "application/octet-stream", newGenReader(uint64(i)+1, size)); err != nil {
					next.Store(int64(members)) // stop the others
					errs <- fmt.Errorf("member %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return errors.Join(err, node.Close())
	}
	pids := make([]string, members)
	for i := range pids {
		pids[i] = pkgBenchMemberPID(i)
	}
	err = create(pkgBenchORE, "http://www.openarchives.org/ore/terms", bytes.NewReader(resourceMap(pkgBenchORE, pids...)))
	return errors.Join(err, node.Close())
}
