package webdav

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// peekSize is how much of the body Put reads before it sends anything: a
// reader that fails at once costs no request.
const peekSize = 32 << 10

// Put streams r to a temporary resource, then moves it onto key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.refuseHolding(key); err != nil {
		return 0, err
	}
	what := fmt.Sprintf("object %q", key)
	head := make([]byte, peekSize)
	n, err := node.ReadChunk(r, head)
	switch err {
	case nil:
	case io.EOF:
		r = eofReader{}
	default:
		return 0, err
	}
	if err := s.ensureTmp(ctx); err != nil {
		return 0, err
	}
	tmp := s.tmpName()
	body := &upstream.CountingReader{R: io.MultiReader(bytes.NewReader(head[:n]), r)}
	req := s.request(ctx, http.MethodPut, tmp)
	req.Body = io.NopCloser(body)
	req.ContentLength = -1 // streamed, chunked
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		s.remove(ctx, tmp)
		if body.Err != nil {
			return 0, body.Err
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, cerr
		}
		return 0, s.c.Error(err, what)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		s.remove(ctx, tmp)
		s.setTmpReady(false) // the collection may be gone: make it again next time
		return 0, s.c.Exception(resp, what)
	}
	upstream.Discard(resp)
	if body.Err != nil { // the server answered before the body failed
		s.remove(ctx, tmp)
		return 0, body.Err
	}
	if err := ctx.Err(); err != nil {
		s.remove(ctx, tmp)
		return 0, err
	}
	if err := s.move(ctx, tmp, key); err != nil {
		s.remove(ctx, tmp)
		return 0, err
	}
	return body.N, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// maxMoves bounds the MOVEs of one Put: a 409 (the target's collection is
// missing) makes the collections and tries again; concurrent Puts may race
// to make the same one.
const maxMoves = 3

// move renames the temporary resource onto key, making the fan-out
// collections when the server says they are missing.
func (s *Store) move(ctx context.Context, tmp, key string) error {
	what := fmt.Sprintf("object %q", key)
	dest := s.object(key)
	ctx, cancel := s.c.WithTimeout(ctx) // no object bytes: bounded like metadata
	defer cancel()
	var mkErr error
	for attempt := 1; ; attempt++ {
		req := s.request(ctx, "MOVE", tmp)
		req.Header.Set("Destination", dest)
		req.Header.Set("Overwrite", "T")
		resp, err := s.c.HTTP().Do(req)
		if err != nil {
			if upstream.Unanswered(err) {
				// The server may have moved it all the same: node.Blobs
				// promises nothing under key after an error, and keys are
				// fresh, so deleting is safe.
				s.remove(ctx, dest)
			}
			return s.c.Error(err, what)
		}
		switch {
		case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK:
			upstream.Discard(resp)
			return nil
		case resp.StatusCode == http.StatusConflict && attempt < maxMoves:
			upstream.Discard(resp)
			// What a MKCOL says matters less than whether the MOVE works next.
			fan := strings.Split(upstream.BlobName(key), "/")
			all := append(s.prefix[:len(s.prefix):len(s.prefix)], fan[:len(fan)-1]...)
			mkErr = s.mkcols(ctx, all, len(s.prefix))
		default:
			if mkErr != nil {
				return errors.Join(s.c.Exception(resp, what), mkErr)
			}
			return s.c.Exception(resp, what)
		}
	}
}

// mkcols makes the collections segs[:from+1], segs[:from+2]... segs under the
// base URL, top down; one that exists already (405) is fine.
func (s *Store) mkcols(ctx context.Context, segs []string, from int) error {
	for i := from; i < len(segs); i++ {
		what := fmt.Sprintf("collection %q", strings.Join(segs[:i+1], "/"))
		resp, err := s.c.HTTP().Do(s.request(ctx, "MKCOL", s.at(true, segs[:i+1]...)))
		if err != nil {
			return s.c.Error(err, what)
		}
		switch resp.StatusCode {
		case http.StatusCreated, http.StatusOK, http.StatusNoContent, http.StatusMethodNotAllowed:
			upstream.Discard(resp)
		default:
			return s.c.Exception(resp, what)
		}
	}
	return nil
}

// ensureTmp makes the prefix's collections and tmp, once; the first time, it
// also sweeps temporary resources that a crash left behind.
func (s *Store) ensureTmp(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tmpReady {
		return nil
	}
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	if err := s.mkcols(ctx, append(s.prefix[:len(s.prefix):len(s.prefix)], tmpCollection), 0); err != nil {
		return err
	}
	if !s.swept {
		s.swept = true
		s.Sweep(ctx, StaleAfter) // best effort: a failure leaves garbage, not an error
	}
	s.tmpReady = true
	return nil
}

func (s *Store) setTmpReady(ok bool) {
	s.mu.Lock()
	s.tmpReady = ok
	s.mu.Unlock()
}

// remove deletes a temporary resource, or a key whose MOVE got no answer,
// even when ctx has ended. A server may still be writing the aborted PUT and
// hold a lock on it (423), so a refusal is tried again for about a second;
// after that, a temporary resource stays in the tmp collection for the next
// sweep.
func (s *Store) remove(ctx context.Context, target string) {
	ctx, cancel := s.c.WithTimeout(context.WithoutCancel(ctx))
	defer cancel()
	wait := 20 * time.Millisecond
	for attempt := range 6 {
		resp, err := s.c.HTTP().Do(s.request(ctx, http.MethodDelete, target))
		if err != nil {
			return
		}
		upstream.Discard(resp)
		// A first 404 is asked again: a server still handling the cut upload
		// may create the file just after it.
		if resp.StatusCode/100 == 2 || (resp.StatusCode == http.StatusNotFound && attempt > 0) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// Get opens the bytes under key; a "/"-key names a holding (see List). A GET
// that the server redirects to another path (a collection's, with a "/") is
// NotFound, as Stat says.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	what := fmt.Sprintf("object %q", key)
	target, err := s.target(key)
	if err != nil {
		return nil, err
	}
	req := s.request(ctx, http.MethodGet, target)
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return nil, s.c.Error(err, what)
	}
	switch {
	case resp.Request.URL.Path != req.URL.Path:
		// Redirected, as servers redirect a collection to its path with a
		// "/" (nginx answers its listing there, or 403 without autoindex):
		// whatever is there, it is not the file under key.
		upstream.Discard(resp)
		return nil, adapter.Errorf(adapter.NotFound, "no file is stored under key %q: upstream %q redirected its GET to %s, a collection or another resource",
			key, s.c.Name(), resp.Request.URL.Path)
	case resp.StatusCode == http.StatusNotFound:
		upstream.Discard(resp)
		return nil, adapter.Errorf(adapter.NotFound, "no bytes are stored under key %q", key)
	case resp.StatusCode != http.StatusOK:
		return nil, s.c.Exception(resp, what)
	}
	return s.c.Seekable(ctx, resp, what, func(ctx context.Context) (*http.Request, error) {
		return s.request(ctx, http.MethodGet, target), nil
	}), nil
}

// Delete removes key; a missing key is not an error. Holdings ("/"-keys)
// are refused.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.refuseHolding(key); err != nil {
		return err
	}
	what := fmt.Sprintf("object %q", key)
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	resp, err := s.c.HTTP().Do(s.request(ctx, http.MethodDelete, s.object(key)))
	if err != nil {
		return s.c.Error(err, what)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent, http.StatusAccepted, http.StatusNotFound:
		upstream.Discard(resp)
		return nil
	}
	return s.c.Exception(resp, what)
}
