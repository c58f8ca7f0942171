package s3

import (
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestHoldingsWithoutTrailingSlash: "holdings: repo" (the WebDAV store's
// form) is the folder repo/: its objects were all listed with a Problem (keys
// "//a.csv", an empty segment), and a sibling "repository/" was listed as if
// it were in the collection (real versitygw).
func TestHoldingsWithoutTrailingSlash(t *testing.T) {
	t.Parallel()
	srv := servers.VersityGW(t)
	mc, _ := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.Secret, ""), Region: "us-east-1"})
	for _, name := range []string{"repo/a.csv", "repository/other.csv"} {
		if _, err := mc.PutObject(t.Context(), srv.Bucket, name, strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, upstreamConfig(t, srv.Endpoint, credOptions(srv)+"bucket: "+srv.Bucket+"\nholdings: repo\n"), nil)
	page, _, err := s.List(t.Context(), time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range page {
		if f.Problem != nil || f.Key != "/a.csv" {
			t.Errorf("listed %q (problem: %v); want only /a.csv", f.Key, f.Problem)
		}
	}
}
