package oaipmh

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
		discard(resp)
		return nil, adapter.Errorf(adapter.NotFound, "file %s is no longer in upstream %q (HTTP %d)", key, s.c.Name(), resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, s.c.Exception(resp, what)
	case resp.ContentLength < 0:
		return resp.Body, nil // no size given: it streams, but does not seek
	}
	etag := resp.Header.Get("ETag")
	if strings.HasPrefix(etag, "W/") {
		etag = "" // a weak ETag never matches If-Match
	}
	open := func(ctx context.Context, off int64) (io.ReadCloser, error) {
		req := s.getRequest(ctx, key)
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
		if etag != "" {
			req.Header.Set("If-Match", etag)
		}
		resp, err := s.c.HTTP().Do(req)
		if err != nil {
			return nil, s.c.Error(err, what)
		}
		switch resp.StatusCode {
		case http.StatusPartialContent:
			return resp.Body, nil
		case http.StatusOK: // the server ignored the range
			if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
				resp.Body.Close()
				return nil, s.c.Error(err, what)
			}
			return resp.Body, nil
		case http.StatusPreconditionFailed:
			discard(resp)
			return nil, adapter.Errorf(adapter.ServiceFailure, "file %s of upstream %q changed while it was read", key, s.c.Name())
		}
		return nil, s.c.Exception(resp, what)
	}
	return upstream.NewSeekable(ctx, resp.Body, resp.ContentLength, open), nil
}

func (s *Source) getRequest(ctx context.Context, key string) *http.Request {
	req, _ := http.NewRequestWithContext(upstream.WithOperation(ctx, "GetFile"), http.MethodGet, key, nil)
	return req
}
