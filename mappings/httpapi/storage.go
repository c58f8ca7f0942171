package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// newRequest builds op's request with v's values, at target when it is set
// (a next page's URL) and at op's URL otherwise.
func (s *Store) newRequest(ctx context.Context, op *request, v vars, target string) (*http.Request, error) {
	if op.url.uses("key") && !oneSegment(v.key) {
		return nil, adapter.Errorf(adapter.InvalidRequest, "key %q cannot be one path segment of upstream %q's %s URL", v.key, s.c.Name(), op.op)
	}
	if target == "" {
		target = s.base.String() + op.url.expand(v.escaped)
	}
	req, err := http.NewRequestWithContext(upstream.WithOperation(ctx, op.op), op.method, target, nil)
	if err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "upstream %q: options.%s.url gives no valid URL", s.c.Name(), op.op)
	}
	req.Header = s.headers.Clone()
	for _, h := range op.headers {
		req.Header.Set(h.name, h.value.expand(v.escaped))
	}
	return req, nil
}

// oneSegment tells whether key stays one path segment wherever a server
// decodes it: not empty, and no part between slashes (or backslashes) that
// is . or ..: most servers decode %2F and then resolve dot segments, so
// "../private/f" would leave the collection the URL names.
func oneSegment(key string) bool {
	if key == "" {
		return false
	}
	for _, seg := range strings.FieldsFunc(key, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return key != "." && key != ".."
}

// Get opens the bytes under key: the upstream's answer, streamed.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	what := fmt.Sprintf("object %q", key)
	req, err := s.newRequest(ctx, s.get, vars{key: key}, "")
	if err != nil {
		return nil, err
	}
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return nil, s.c.Error(err, what)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		discard(resp)
		return nil, adapter.Errorf(adapter.NotFound, "no bytes are stored under key %q in upstream %q", key, s.c.Name())
	case resp.StatusCode/100 != 2:
		return nil, s.c.Exception(resp, what)
	}
	return resp.Body, nil
}

// Put streams r to the upstream under key. When the PUT got no answer (the
// transport failed, or ctx ended), the upstream may hold the object all the
// same: Put deletes key (see forget).
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if s.put == nil {
		return 0, adapter.Errorf(adapter.NotImplemented, "upstream %q is a legacy repository that accepts no uploads (its options have no put)", s.c.Name())
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	what := fmt.Sprintf("object %q", key)
	req, err := s.newRequest(ctx, s.put, vars{key: key}, "")
	if err != nil {
		return 0, err
	}
	body := &upstream.CountingReader{R: r}
	req.Body = io.NopCloser(body)
	req.ContentLength = -1 // streamed, chunked
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := s.c.HTTP().Do(req)
	switch {
	case body.Err != nil: // whether or not the upstream answered first
		if err == nil {
			discard(resp)
		}
		return 0, body.Err
	case err != nil:
		ferr := s.c.Error(err, what)
		if cerr := ctx.Err(); cerr != nil {
			ferr = cerr
		}
		if !upstream.Unanswered(err) {
			return 0, ferr
		}
		return 0, s.forget(ctx, key, ferr)
	case resp.StatusCode/100 != 2:
		return 0, s.c.Exception(resp, what)
	}
	discard(resp)
	return body.N, nil
}

// forget is err, the failure of a PUT that got no answer, after deleting key:
// node.Blobs promises nothing under key after an error, and the node's keys
// are fresh, so deleting is safe. Best effort, bounded by the upstream's
// timeout, even when ctx has ended; without delete in the options, the object
// may stay.
func (s *Store) forget(ctx context.Context, key string, err error) error {
	if s.del == nil {
		return err
	}
	if derr := s.Delete(context.WithoutCancel(ctx), key); derr != nil {
		return errors.Join(err, fmt.Errorf("httpapi: deleting %q, which the upstream may hold after all: %w", key, derr))
	}
	return err
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if s.del == nil {
		return adapter.Errorf(adapter.NotImplemented, "upstream %q is a legacy repository that deletes nothing (its options have no delete)", s.c.Name())
	}
	what := fmt.Sprintf("object %q", key)
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	req, err := s.newRequest(ctx, s.del, vars{key: key}, "")
	if err != nil {
		return err
	}
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return s.c.Error(err, what)
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return s.c.Exception(resp, what)
	}
	discard(resp)
	return nil
}

// discard reads a little of an answer's body, so that its connection can be
// reused, and closes it.
func discard(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
