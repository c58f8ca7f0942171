package oaipmh

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// Get opens the bytes of the file at key, a URL Walk listed: the upstream's
// answer, streamed. When its size is known the body also seeks (a seek
// reopens it with a Range from there, If-Match its ETag). A 404 or 410 is
// NotFound.
func (s *Source) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	u, err := url.Parse(key)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, adapter.Errorf(adapter.NotFound, "key %q is not a file of upstream %q: its keys are http(s) URLs", key, s.c.Name())
	}
	what := fmt.Sprintf("file %s", key)
	resp, err := s.c.HTTP().Do(s.getRequest(ctx, key))
	if err != nil {
		return nil, s.c.Error(err, what)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		upstream.Discard(resp)
		return nil, adapter.Errorf(adapter.NotFound, "file %s is no longer in upstream %q (HTTP %d)", key, s.c.Name(), resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, s.c.Exception(resp, what)
	}
	return s.c.Seekable(ctx, resp, what, func(ctx context.Context) (*http.Request, error) {
		return s.getRequest(ctx, key), nil
	}), nil
}

func (s *Source) getRequest(ctx context.Context, key string) *http.Request {
	req, _ := http.NewRequestWithContext(upstream.WithOperation(ctx, "GetFile"), http.MethodGet, key, nil)
	return req
}
