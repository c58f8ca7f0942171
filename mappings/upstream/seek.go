package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// OpenFunc opens an object's bytes from off to the end (a ranged GET).
type OpenFunc func(ctx context.Context, off int64) (io.ReadCloser, error)

// Seekable is an object body that can also seek, so that ranges and
// conditional requests can be served from it (http.ServeContent). Seeking is
// lazy: it only moves the position, and the next Read, if the position is not
// where the open body is, closes that body and opens the rest of the object
// from the position with open. Seeking to the end to learn the size, then back
// to the start, costs nothing.
type Seekable struct {
	ctx     context.Context
	open    OpenFunc
	size    int64
	body    io.ReadCloser // nil, or open at bodyOff
	bodyOff int64
	off     int64
	closed  bool
}

var _ io.ReadSeekCloser = (*Seekable)(nil)

// NewSeekable wraps body, the object's bytes from offset 0, of size bytes;
// open reopens it elsewhere with ctx.
func NewSeekable(ctx context.Context, body io.ReadCloser, size int64, open OpenFunc) *Seekable {
	return &Seekable{ctx: ctx, open: open, size: size, body: body}
}

// Size is the object's size.
func (s *Seekable) Size() int64 { return s.size }

func (s *Seekable) Read(p []byte) (int, error) {
	if s.closed {
		return 0, errors.New("upstream: read of a closed body")
	}
	if s.off >= s.size {
		return 0, io.EOF
	}
	if s.body != nil && s.bodyOff != s.off {
		s.body.Close()
		s.body = nil
	}
	if s.body == nil {
		b, err := s.open(s.ctx, s.off)
		if err != nil {
			return 0, err
		}
		s.body, s.bodyOff = b, s.off
	}
	if rest := s.size - s.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := s.body.Read(p)
	s.off += int64(n)
	s.bodyOff += int64(n)
	if err == io.EOF && s.off < s.size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && s.off == s.size {
		err = io.EOF
	}
	return n, err
}

func (s *Seekable) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = s.off + offset
	case io.SeekEnd:
		abs = s.size + offset
	default:
		return 0, errors.New("upstream: invalid whence")
	}
	if abs < 0 {
		return 0, errors.New("upstream: negative position")
	}
	s.off = abs
	return abs, nil
}

// Close closes the open body, if any.
func (s *Seekable) Close() error {
	s.closed = true
	if s.body == nil {
		return nil
	}
	if s.bodyOff >= s.size {
		// Let the transport see the end, so that it reuses the connection.
		io.CopyN(io.Discard, s.body, 1)
	}
	err := s.body.Close()
	s.body = nil
	return err
}

// Seekable is the body of resp, a 200 answer to a GET of a whole resource:
// with a known length, a Seekable whose ranges reopen the resource with a
// ranged GET (newReq makes the GET) pinned by If-Match to the strong ETag
// first read, so that a change in between fails the read instead of mixing
// two versions; without one, the body as it is (it streams, but does not
// seek). what names the resource in errors.
func (c *Client) Seekable(ctx context.Context, resp *http.Response, what string, newReq func(context.Context) (*http.Request, error)) io.ReadCloser {
	if resp.ContentLength < 0 {
		return resp.Body
	}
	etag := resp.Header.Get("ETag")
	if strings.HasPrefix(etag, "W/") {
		etag = "" // a weak ETag never matches If-Match
	}
	open := func(ctx context.Context, off int64) (io.ReadCloser, error) {
		req, err := newReq(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
		if etag != "" {
			req.Header.Set("If-Match", etag)
		}
		resp, err := c.HTTP().Do(req)
		if err != nil {
			return nil, c.Error(err, what)
		}
		switch resp.StatusCode {
		case http.StatusPartialContent:
			return resp.Body, nil
		case http.StatusOK: // the server ignored the range
			if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
				resp.Body.Close()
				return nil, c.Error(err, what)
			}
			return resp.Body, nil
		case http.StatusPreconditionFailed:
			Discard(resp)
			return nil, adapter.Errorf(adapter.ServiceFailure, "%s changed in upstream %q while it was read", what, c.Name())
		}
		return nil, c.Exception(resp, what)
	}
	return NewSeekable(ctx, resp.Body, resp.ContentLength, open)
}

// Discard reads a little of an answer's body, so that its connection can be
// reused, and closes it.
func Discard(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
