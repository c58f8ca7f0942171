package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

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
// with a known length and a validator (PinOf), a Seekable whose ranges reopen
// the resource with a ranged GET (newReq makes the GET) pinned to the version
// first read, so that a change in between fails the read instead of mixing two
// versions; otherwise the body as it is (it streams, but does not seek). what
// names the resource in errors.
func (c *Client) Seekable(ctx context.Context, resp *http.Response, what string, newReq func(context.Context) (*http.Request, error)) io.ReadCloser {
	if resp.ContentLength < 0 {
		return resp.Body
	}
	pin, ok := PinOf(resp.Header, resp.ContentLength)
	if !ok {
		return resp.Body
	}
	open := func(ctx context.Context, off int64) (io.ReadCloser, error) {
		req, err := newReq(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
		if pin.ETag != "" {
			req.Header.Set("If-Match", pin.ETag)
		} else {
			req.Header.Set("If-Unmodified-Since", pin.LastModified.Format(http.TimeFormat))
		}
		resp, err := c.HTTP().Do(req)
		if err != nil {
			return nil, c.Error(err, what)
		}
		switch resp.StatusCode {
		case http.StatusPartialContent, http.StatusOK: // 200: the server ignored the range
			from, err := pin.Check(resp.Header, off)
			if err != nil {
				Discard(resp)
				return nil, c.Changed(err, what)
			}
			if _, err := io.CopyN(io.Discard, resp.Body, off-from); err != nil {
				resp.Body.Close()
				return nil, c.Error(err, what)
			}
			return resp.Body, nil
		case http.StatusPreconditionFailed:
			Discard(resp)
			return nil, c.Changed(errors.New("the precondition failed"), what)
		}
		return nil, c.Exception(resp, what)
	}
	return NewSeekable(ctx, resp.Body, resp.ContentLength, open)
}

// Changed is the error of a read whose object changed under it: err says
// how that showed.
func (c *Client) Changed(err error, what string) error {
	return adapter.Wrap(adapter.ServiceFailure, err, "%s changed in upstream %q while it was read", what, c.Name())
}

// Pin is what a ranged reopen of an object is checked against, so that a
// change since the first read fails the read instead of mixing two versions:
// the object's size and one validator of the first answer.
type Pin struct {
	Size int64
	// ETag is the first answer's strong ETag, as sent, or "".
	ETag string
	// LastModified is the first answer's Last-Modified when ETag is "".
	LastModified time.Time
}

// PinOf is the pin of a first answer of size bytes with headers h; ok is
// false when h has no validator that tells every later version from this one:
// no strong ETag (a weak one never matches If-Match), and no Last-Modified in
// a second before the answer's Date. Last-Modified counts whole seconds, so a
// version written later in the second the first one was read carries the same
// value, and If-Unmodified-Since lets it through; a Date in a later second
// shows that any change after the read has a later Last-Modified (RFC 9110
// 8.8.2.2). A change of size is also caught, by Check.
func PinOf(h http.Header, size int64) (p Pin, ok bool) {
	if etag := h.Get("ETag"); etag != "" && !strings.HasPrefix(etag, "W/") {
		return Pin{Size: size, ETag: etag}, true
	}
	lm, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		return Pin{}, false
	}
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil || !date.After(lm) {
		return Pin{}, false
	}
	return Pin{Size: size, LastModified: lm}, true
}

// Check looks at h, the headers of the answer to a ranged GET from off, and
// returns where its body starts: off for a range, 0 for the whole object. It
// fails when the answer is not of the pinned version, whatever the server
// made of the preconditions: the pinned validator missing or different, a
// range that does not start at off, or a total size that is not p.Size.
func (p Pin) Check(h http.Header, off int64) (from int64, err error) {
	if p.ETag != "" {
		if got := h.Get("ETag"); got != p.ETag {
			return 0, fmt.Errorf("ETag %q, first %q", got, p.ETag)
		}
	} else if lm, err := http.ParseTime(h.Get("Last-Modified")); err != nil || !lm.Equal(p.LastModified) {
		return 0, fmt.Errorf("Last-Modified %q, first %q", h.Get("Last-Modified"), p.LastModified.Format(http.TimeFormat))
	}
	total := h.Get("Content-Length")
	if cr := h.Get("Content-Range"); cr != "" {
		first, rest, _ := strings.Cut(strings.TrimPrefix(cr, "bytes "), "-")
		if first != strconv.FormatInt(off, 10) {
			return 0, fmt.Errorf("Content-Range %q for the range from %d", cr, off)
		}
		_, total, _ = strings.Cut(rest, "/")
		from = off
	}
	if total != strconv.FormatInt(p.Size, 10) {
		return 0, fmt.Errorf("%d bytes, now %q", p.Size, total)
	}
	return from, nil
}

// Discard reads a little of an answer's body, so that its connection can be
// reused, and closes it.
func Discard(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
