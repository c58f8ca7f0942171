package mappingtest

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"go.yaml.in/yaml/v3"
)

// Remote is a store that reaches its upstream over HTTP, as Faults and
// NoGoroutineLeaks see it: the adapter each such store's tests fill in.
type Remote[S node.Blobs] struct {
	// Upstream is the store's upstream at a running server (the origin) that
	// accepts Put. The suites copy it, and change its base URL (to a fault
	// proxy's in front of the origin, a closed port's, or a server that cuts
	// every answer), timeouts, retries and breaker.
	Upstream config.Upstream
	// New is the store package's New.
	New func(config.Upstream, *upstream.Client) (S, error)
	// PutMethods are the methods of the requests a Put may send first (so
	// the one that meets a failing upstream); PUT when empty.
	PutMethods []string
	// ListWhat is how the store's errors name the first page of a listing,
	// as in `upstream "x" is unreachable (ListWhat)`. Only for a store that is
	// also a node.Lister, whose origin's first page must be longer than
	// servers.CutAfter.
	ListWhat string
	// Backoff is how long the store itself may wait after a failed request
	// before it gives up (minio-go sleeps up to 200ms even with MaxRetries
	// 1); it adds to the time an open breaker's refusals may take.
	Backoff time.Duration
}

// UpstreamConfig is an upstream of type typ named name at baseURL with the
// given options (YAML), with short timeouts, two quick retries, and a breaker
// that opens after 3 failures for 300ms.
func UpstreamConfig(t testing.TB, typ, name, baseURL, options string) config.Upstream {
	t.Helper()
	u := config.Upstream{Name: name, Type: typ, BaseURL: baseURL,
		DialTimeout: time.Second, HeaderTimeout: 5 * time.Second, Timeout: 10 * time.Second,
		Retry:   config.Retry{Max: 2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		Breaker: config.Breaker{Failures: 3, OpenFor: 300 * time.Millisecond}}
	if options != "" {
		if err := yaml.Unmarshal([]byte(options), &u.Options); err != nil {
			t.Fatal(err)
		}
		u.Options = *u.Options.Content[0]
	}
	return u
}

// Open builds a store with newStore over the client of u (m may be nil); the
// client is closed when t ends.
func Open[S any](t testing.TB, u config.Upstream, m *metrics.Metrics, newStore func(config.Upstream, *upstream.Client) (S, error)) S {
	t.Helper()
	c := upstream.New(u, m)
	t.Cleanup(c.Close)
	s, err := newStore(u, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CheckNew builds a store of u with newStore, as a store's option tests do:
// New must fail with an error that holds wantErr, or succeed when wantErr is
// "". It returns the store, and whether New succeeded.
func CheckNew[S any](t *testing.T, u config.Upstream, newStore func(config.Upstream, *upstream.Client) (S, error), wantErr string) (S, bool) {
	t.Helper()
	c := upstream.New(u, nil)
	t.Cleanup(c.Close)
	s, err := newStore(u, c)
	switch {
	case wantErr == "" && err != nil:
		t.Fatal(err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Fatalf("error %v\nwant %q", err, wantErr)
	}
	return s, err == nil
}

// FilesIn is s with an Inspector that lists the files under dir (a store's
// directory on the server's disk), relative to dir, temporary ones included.
func FilesIn(s node.Blobs, dir string) node.Blobs { return filesIn{s, dir} }

type filesIn struct {
	node.Blobs
	dir string
}

func (s filesIn) Stored(t *testing.T) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == s.dir {
			return fs.SkipAll // nothing stored yet
		}
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(s.dir, p)
			names = append(names, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
