package rest

import (
	"errors"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// Paging limits of listObjects and getLogRecords.
const (
	defaultCount = 1000
	maxCount     = 10000
)

func invalid(format string, a ...any) error {
	return adapter.Errorf(adapter.InvalidRequest, format, a...)
}

// queryTime reads an optional date-time parameter.
func (r *request) queryTime(name string) (adapter.Time, error) {
	v := strings.TrimSpace(r.Query(name))
	if v == "" {
		return adapter.Time{}, nil
	}
	// The query decoder reads a '+' the client left unescaped as a space:
	// fromDate=2024-01-31T12:00:00+01:00 arrives as "…12:00:00 01:00". An
	// RFC 1123 date's spaces are spaces.
	t, err := adapter.ParseBound(v)
	if err != nil {
		t, err = adapter.ParseBound(strings.ReplaceAll(v, " ", "+"))
	}
	if err != nil {
		return t, invalid("parameter %s: %v", name, err)
	}
	return t, nil
}

// dateRange reads fromDate and toDate, the filters every listing shares.
func (r *request) dateRange() (from, to adapter.Time, err error) {
	if from, err = r.queryTime("fromDate"); err != nil {
		return
	}
	to, err = r.queryTime("toDate")
	return
}

// queryInt reads an optional non-negative integer parameter, at most the
// schemas' xs:int, as the answers that echo it (a Slice's start) hold.
func (r *request) queryInt(name string, def int) (int, error) {
	v := r.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, invalid("parameter %s must be an integer from 0 to %d, got %q", name, math.MaxInt32, v)
	}
	return int(n), nil
}

// queryBool reads an optional boolean parameter (true/false, also 1/0, any case).
func (r *request) queryBool(name string, def bool) (bool, error) {
	switch v := strings.ToLower(r.Query(name)); v {
	case "":
		return def, nil
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	default:
		return false, invalid("parameter %s must be true or false, got %q", name, r.Query(name))
	}
}

// paging reads start and count; count is clipped to maxCount.
func (r *request) paging() (start, count int, err error) {
	if start, err = r.queryInt("start", 0); err != nil {
		return
	}
	if count, err = r.queryInt("count", defaultCount); err != nil {
		return
	}
	return start, min(count, maxCount), nil
}

// Limits of the parts that are not the object, and of the parts of a body:
// DataONE's forms have a handful; parts beyond them are read and kept as
// text, so their number bounds what a body can make the node hold.
const (
	maxTextPart = 64 << 10
	maxDocPart  = 16 << 20
	maxParts    = 32
)

// eachPart streams the multipart body (form-data or mixed, parts in any order),
// handing each part to fn by its name; fn must read what it needs before returning.
func (r *request) eachPart(fn func(name string, p *multipart.Part) error) error {
	mr, release, err := r.multipartReader()
	if err != nil {
		return invalid("the body must be multipart/form-data or multipart/mixed: %v", err)
	}
	defer release()
	for n := 1; ; n++ {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return invalid("the multipart body is malformed: %v", err)
		}
		if n > maxParts {
			p.Close()
			return invalid("the multipart body has more than %d parts", maxParts)
		}
		err = fn(partName(p), p)
		p.Close()
		if err != nil {
			return err
		}
	}
}

// partName is the part's name parameter, whatever its disposition (multipart/mixed
// senders use attachment as well as form-data).
func partName(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["name"]
}

// readText reads a small text part.
func readText(name string, p io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(p, maxTextPart+1))
	if err != nil {
		return "", invalid("reading part %s: %v", name, err)
	}
	if len(b) > maxTextPart {
		return "", invalid("part %s is larger than %d bytes", name, maxTextPart)
	}
	return strings.TrimSpace(string(b)), nil
}

// readDoc decodes a DataONE document part strictly (an element the schema does
// not define is refused, not dropped); a bad document is an exception of kind k.
func readDoc(name string, p io.Reader, v any, k adapter.Kind) error {
	body := &adapter.ReadFailure{R: p}
	lr := &io.LimitedReader{R: body, N: maxDocPart + 1}
	if err := adapter.DecodeStrict(lr, v); err != nil {
		var ex *adapter.Exception
		if errors.As(body.Err, &ex) {
			return ex // the body's failure (a stall), not the document's
		}
		return adapter.Errorf(k, "part %s: %v", name, err)
	}
	if lr.N <= 0 {
		return adapter.Errorf(k, "part %s is larger than %d bytes", name, maxDocPart)
	}
	return nil
}

// uploadLimit stops an object stream at the node's maximum upload size, with the
// exception the seed names for it.
type uploadLimit struct {
	r    io.Reader
	left int64
	max  int64
}

func (l *uploadLimit) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, adapter.Errorf(adapter.InsufficientResources, "the object is larger than this node's maximum upload size of %d bytes", l.max)
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, adapter.Errorf(adapter.InsufficientResources, "the object is larger than this node's maximum upload size of %d bytes", l.max)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// The client's body ended inside the part: its fault, not the store's.
		return n, invalid("the multipart body is malformed: it ends inside the object part (the upload was cut short)")
	}
	return n, err
}
