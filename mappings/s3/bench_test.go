package s3

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// BenchmarkGet reads a 1 KiB and a 256 MiB object through the store (minio-go
// over the upstream client's chain) and, in the same run, directly from
// versitygw with a plain http.Client and a presigned GET URL, and with a bare
// minio-go client (its own transport, no d1bridge chain), which separates the
// chain's cost from minio-go's and from header-signed requests'. Compare the
// store's MB/s with direct's for the store layer's overhead:
//
//	go test -run '^$' -bench Get -benchtime 3s -count 5 ./mappings/s3/
func BenchmarkGet(b *testing.B) {
	srv := servers.VersityGW(b)
	s := open(b, upstreamConfig(b, srv.Endpoint, credOptions(srv)+"bucket: "+srv.Bucket), nil)
	plain := &http.Client{}
	mc, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.Secret, ""), Region: "us-east-1"})
	if err != nil {
		b.Fatal(err)
	}
	bare := minio.Core{Client: mc}
	for _, size := range []int64{1 << 10, 256 << 20} {
		key := fmt.Sprintf("bench-%d", size)
		if _, err := s.Put(b.Context(), key, io.LimitReader(zeros{}, size)); err != nil {
			b.Fatal(err)
		}
		url := presign(b, srv, s.name(key))
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
		b.Run(name+"/minio", func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, 32<<10)
			for b.Loop() {
				r, _, _, err := bare.GetObject(b.Context(), srv.Bucket, s.name(key), minio.GetObjectOptions{})
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
