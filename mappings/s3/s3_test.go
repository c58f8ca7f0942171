package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus"
)

// upstreamConfig is an S3 upstream named bucket at endpoint with the given
// options (YAML).
func upstreamConfig(t testing.TB, endpoint, options string) config.Upstream {
	t.Helper()
	return mappingtest.UpstreamConfig(t, config.UpstreamS3, "bucket", endpoint, options)
}

func credOptions(s servers.S3) string {
	return fmt.Sprintf("accessKey: %s\nsecretKey: %s\n", s.AccessKey, s.Secret)
}

// open builds a store and its client, closed when t ends.
func open(t testing.TB, u config.Upstream, m *metrics.Metrics) *Store {
	t.Helper()
	return mappingtest.Open(t, u, m, New)
}

// inspected lets the suite see the bucket: objects, incomplete uploads and the
// files of the posix directory behind versitygw.
type inspected struct {
	*Store
	srv servers.S3
}

func (s inspected) Stored(t *testing.T) []string {
	t.Helper()
	var names []string
	ctx := t.Context()
	for o := range s.core.Client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		names = append(names, "object "+o.Key)
	}
	res, err := s.core.ListMultipartUploads(ctx, s.bucket, "", "", "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range res.Uploads {
		names = append(names, "upload "+up.Key+" "+up.UploadID)
	}
	root := filepath.Join(s.srv.Root, s.bucket)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			names = append(names, "file "+rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var buckets atomic.Int64

func TestAcceptance(t *testing.T) {
	t.Parallel()
	srv := servers.VersityGW(t)
	mappingtest.Blobs(t, func(t *testing.T) node.Blobs {
		// Each store has its own bucket, created by the store, and a prefix.
		bucket := fmt.Sprintf("accept-%d", buckets.Add(1))
		u := upstreamConfig(t, srv.Endpoint, credOptions(srv)+fmt.Sprintf(
			"bucket: %s\nprefix: d1/\ncreateBucket: true\npartSize: %d\n", bucket, MinPartSize))
		return inspected{open(t, u, nil), srv}
	})
}

func TestLayout(t *testing.T) {
	t.Parallel()
	srv := servers.VersityGW(t)
	s := open(t, upstreamConfig(t, srv.Endpoint, credOptions(srv)+"bucket: "+srv.Bucket+"\nprefix: objects/\n"), nil)
	key := "8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b"
	if _, err := s.Put(t.Context(), key, strings.NewReader("bytes")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(srv.Root, srv.Bucket, "objects", filepath.FromSlash(upstream.BlobName(key)))
	if b, err := os.ReadFile(path); err != nil || string(b) != "bytes" {
		t.Errorf("%s: %q %v", path, b, err)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secretFile, []byte("s3cr3t\n"), 0o600)
	for _, tc := range []struct {
		name, baseURL, options, wantErr string
	}{
		{"minimal", "http://127.0.0.1:1", "bucket: bkt", ""},
		{"secretKeyFile", "http://127.0.0.1:1", "bucket: bkt\naccessKey: k\nsecretKeyFile: " + secretFile, ""},
		{"no bucket", "http://127.0.0.1:1", "prefix: x/", "options.bucket is required"},
		{"bad bucket", "http://127.0.0.1:1", "bucket: b", "Bucket name cannot be shorter than 3 characters"},
		{"unknown option", "http://127.0.0.1:1", "bucket: bkt\nbukket: c", "field bukket not found"},
		{"both secrets", "http://127.0.0.1:1", "bucket: bkt\naccessKey: k\nsecretKey: s\nsecretKeyFile: " + secretFile, "both set"},
		{"missing secret file", "http://127.0.0.1:1", "bucket: bkt\naccessKey: k\nsecretKeyFile: /nonexistent", "secretKeyFile"},
		{"secret without key", "http://127.0.0.1:1", "bucket: bkt\nsecretKey: s", "without options.accessKey"},
		{"small parts", "http://127.0.0.1:1", "bucket: bkt\npartSize: 1000", "options.partSize 1000 is outside"},
		{"slash prefix", "http://127.0.0.1:1", "bucket: bkt\nprefix: /x", "must not start with /"},
		{"path in URL", "http://127.0.0.1:1/bucket", "bucket: bkt", "has a path"},
		{"not http", "ftp://127.0.0.1:1", "bucket: bkt", "not an http(s) endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := mappingtest.CheckNew(t, upstreamConfig(t, tc.baseURL, tc.options), New, tc.wantErr)
			if ok && s.partLen != DefaultPartSize {
				t.Errorf("part size %d", s.partLen)
			}
		})
	}
}

func TestExceptions(t *testing.T) {
	t.Parallel()
	srv := servers.VersityGW(t)
	ctx := t.Context()
	t.Run("missing bucket", func(t *testing.T) {
		s := open(t, upstreamConfig(t, srv.Endpoint, credOptions(srv)+"bucket: nosuchbucket"), nil)
		_, err := s.Get(ctx, "k")
		e := adapter.AsException(err)
		if e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, `bucket "nosuchbucket" does not exist on upstream "bucket"`) {
			t.Errorf("Get: %v", err)
		}
		if _, err := s.Put(ctx, "k", strings.NewReader("x")); !adapter.IsKind(err, adapter.ServiceFailure) {
			t.Errorf("Put: %v", err)
		}
		if err := s.Ping(ctx); err == nil {
			t.Error("Ping of a missing bucket succeeded")
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		s := open(t, upstreamConfig(t, srv.Endpoint, "accessKey: testkey\nsecretKey: wrong\nbucket: "+srv.Bucket), nil)
		_, err := s.Get(ctx, "k")
		if e := adapter.AsException(err); e.Kind != adapter.NotAuthorized || !strings.Contains(e.Description, `upstream "bucket" refused access`) {
			t.Errorf("Get: %v", err)
		}
	})
	t.Run("ping", func(t *testing.T) {
		s := open(t, upstreamConfig(t, srv.Endpoint, credOptions(srv)+"bucket: "+srv.Bucket), nil)
		if err := s.Ping(ctx); err != nil {
			t.Error(err)
		}
	})
	t.Run("ping of no server", func(t *testing.T) {
		// The reason names the bucket once: it read (object "bucket \"bkt\"").
		s := open(t, upstreamConfig(t, "http://127.0.0.1:1", credOptions(srv)+"bucket: bkt"), nil)
		err := s.Ping(ctx)
		if d := adapter.AsException(err).Description; err == nil || !strings.HasSuffix(d, `is unreachable (bucket "bkt")`) {
			t.Errorf("Ping: %v", err)
		}
	})
}

// remote is the bucket of versitygw srv, for the shared fault suite. After a
// failed request, minio-go waits up to DefaultRetryUnit before it gives up,
// even with MaxRetries 1.
func remote(t testing.TB, srv servers.S3) mappingtest.Remote[*Store] {
	return mappingtest.Remote[*Store]{Upstream: upstreamConfig(t, srv.Endpoint, credOptions(srv)+"bucket: "+srv.Bucket),
		New: New, Backoff: minio.DefaultRetryUnit}
}

// blobsOnly is the store without its node.Lister methods, for the shared
// fault suite, whose Lister reads are an http store's (GETs, a first page
// longer than servers.CutAfter): Stat here is a HEAD. TestListFaults covers
// List and Stat.
type blobsOnly struct{ node.Blobs }

func TestFaults(t *testing.T) {
	t.Parallel()
	r := remote(t, servers.VersityGW(t))
	mappingtest.Faults(t, mappingtest.Remote[blobsOnly]{Upstream: r.Upstream, Backoff: r.Backoff,
		New: func(u config.Upstream, c *upstream.Client) (blobsOnly, error) {
			s, err := New(u, c)
			return blobsOnly{s}, err
		}})
}

// TestNoGoroutineLeaks is not parallel: it counts goroutines.
func TestNoGoroutineLeaks(t *testing.T) {
	mappingtest.NoGoroutineLeaks(t, remote(t, servers.VersityGW(t)))
}

// TestMultipartFailureAborts checks that the failing Put of the suite did take
// the multipart path, and that the abort happened.
func TestMultipartFailureAborts(t *testing.T) {
	t.Parallel()
	srv := servers.VersityGW(t)
	reg := prometheus.NewRegistry()
	s := open(t, upstreamConfig(t, srv.Endpoint, credOptions(srv)+fmt.Sprintf("bucket: %s\npartSize: %d", srv.Bucket, MinPartSize)),
		metrics.New(reg, "test"))
	in := inspected{s, srv}
	_, err := s.Put(t.Context(), "k", io.MultiReader(io.LimitReader(zeros{}, 12<<20), errReader{}))
	if !errors.Is(err, errBroken) {
		t.Fatalf("Put: %v", err)
	}
	count := func(op string) float64 {
		mfs, _ := reg.Gather()
		var n float64
		for _, mf := range mfs {
			if mf.GetName() != "d1bridge_upstream_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "operation" && l.GetValue() == op {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	if count("UploadPart") != 2 || count("AbortMultipartUpload") != 1 || count("CompleteMultipartUpload") != 0 {
		t.Errorf("parts %v, aborts %v, completes %v; want 2, 1, 0",
			count("UploadPart"), count("AbortMultipartUpload"), count("CompleteMultipartUpload"))
	}
	if left := in.Stored(t); len(left) != 0 {
		t.Errorf("left behind: %q", left)
	}
	// The check sees what an upload that is not aborted leaves.
	id, err := s.core.NewMultipartUpload(t.Context(), srv.Bucket, "control", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.core.PutObjectPart(t.Context(), srv.Bucket, "control", id, 1, strings.NewReader("abc"), 3, minio.PutObjectPartOptions{}); err != nil {
		t.Fatal(err)
	}
	if left := in.Stored(t); len(left) != 2 {
		t.Errorf("an unfinished upload shows as %q; want its upload and its part file", left)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

var errBroken = errors.New("broken")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBroken }

// TestPutMemoryIsBounded: a 64 MiB Put allocates about one part, not the object.
func TestPutMemoryIsBounded(t *testing.T) {
	srv := servers.VersityGW(t)
	s := open(t, upstreamConfig(t, srv.Endpoint, credOptions(srv)+fmt.Sprintf("bucket: %s\npartSize: %d", srv.Bucket, MinPartSize)), nil)
	put := func() uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := s.Put(t.Context(), "big", io.LimitReader(zeros{}, 64<<20)); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	first, second := put(), put()
	t.Logf("allocated %d MiB on the first 64 MiB Put, %d MiB on the second", first>>20, second>>20)
	if first > 3*MinPartSize || second > 2*MinPartSize {
		t.Errorf("a 64 MiB Put allocated %d then %d bytes; want about one %d-byte part", first, second, MinPartSize)
	}
}

// TestPresignedDirect checks the direct path the benchmark compares with.
func TestPresignedDirect(t *testing.T) {
	t.Parallel()
	srv := servers.VersityGW(t)
	s := open(t, upstreamConfig(t, srv.Endpoint, credOptions(srv)+"bucket: "+srv.Bucket), nil)
	if _, err := s.Put(t.Context(), "k", strings.NewReader("direct")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(presign(t, srv, s.name("k")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "direct" {
		t.Errorf("%s %q", resp.Status, b)
	}
}

func presign(t testing.TB, srv servers.S3, name string) string {
	t.Helper()
	mc, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.Secret, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := mc.PresignedGetObject(context.Background(), srv.Bucket, name, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u.String()
}
