package s3

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// BenchmarkGet reads a 1 KiB and a 256 MiB object through the store (minio-go
// over the upstream client's chain) and, in the same run, directly from
// versitygw with a plain http.Client and a presigned GET URL, and with a bare
// minio-go client (its own transport, no d1bridge chain), which separates the
// chain's cost from minio-go's and from header-signed requests'. The store's
// ratio is its time over direct's (mappingtest.BenchGet):
//
//	go test -run '^$' -bench Get -benchtime 3s -count 5 ./mappings/s3/
func BenchmarkGet(b *testing.B) {
	srv := servers.VersityGW(b)
	s := open(b, upstreamConfig(b, srv.Endpoint, credOptions(srv)+"bucket: "+srv.Bucket), nil)
	mc, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.Secret, ""), Region: "us-east-1"})
	if err != nil {
		b.Fatal(err)
	}
	bare := minio.Core{Client: mc}
	mappingtest.BenchGet(b, s, func(key string) string { return presign(b, srv, s.name(key)) },
		mappingtest.Reader{Name: "minio", Get: func(ctx context.Context, key string) (io.ReadCloser, error) {
			r, _, _, err := bare.GetObject(ctx, srv.Bucket, s.name(key), minio.GetObjectOptions{})
			return r, err
		}})
}
