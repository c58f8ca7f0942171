package rest

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/gin-gonic/gin"
)

// serveRanged serves a seekable object with http.ServeContent (conditional
// requests, If-Range, 206) after settling the Range header the way RFC 9110 §14
// says, where ServeContent alone does not:
//   - a malformed Range header, or one in another unit, is ignored: 200 whole;
//   - a range set none of whose ranges is satisfiable (bytes=-0, a first byte at
//     or beyond the end) is 416 with Content-Range: bytes */size, an empty object
//     included (ServeContent answers bytes=-0 with an impossible 206, and an
//     empty object with 200);
//   - of several ranges, the satisfiable one is served when there is only one;
//     when several are satisfiable the whole object is served with 200, as §14.2
//     allows (no multipart/byteranges: it costs more than it saves, and it lets a
//     client ask for the same bytes many times over);
//   - a suffix range of an empty object selects the whole (empty) object: 200.
//
// ServeContent's own refusals (412 for a failed precondition, 416) are not
// sent: they come back as an exception for the DataONE error writer.
func serveRanged(w http.ResponseWriter, req *http.Request, modtime time.Time, rs io.ReadSeeker) error {
	rng := req.Header.Get("Range")
	if rng != "" {
		size, err := rs.Seek(0, io.SeekEnd) // the size ServeContent will find, by the same means
		if err == nil {
			_, err = rs.Seek(0, io.SeekStart)
		}
		if err != nil {
			return adapter.Wrap(adapter.ServiceFailure, err, "the object's bytes could not be read")
		}
		switch first, last, err := settleRange(rng, size); {
		case err != nil:
			req.Header.Del("Range") // malformed, several satisfiable, or the whole of an empty object
		case first >= 0:
			req.Header.Set("Range", "bytes="+strconv.FormatInt(first, 10)+"-"+strconv.FormatInt(last, 10))
		case size > 0:
			// Nothing is satisfiable: a first byte at the end makes ServeContent answer
			// 416 with bytes */size, once the preconditions and If-Range allow ranges.
			req.Header.Set("Range", "bytes="+strconv.FormatInt(size, 10)+"-")
		case hasConditions(req):
			// An empty object, for which ServeContent never answers 416: let it judge
			// the preconditions, ignoring the range (RFC 9110 §14.2 allows that).
			req.Header.Del("Range")
		default:
			w.Header().Set("Content-Range", "bytes */0")
			return unsatisfiable(rng, 0)
		}
	}
	rw := &refusals{ResponseWriter: w}
	http.ServeContent(rw, req, "", modtime, rs)
	switch rw.status {
	case http.StatusPreconditionFailed:
		ex := adapter.Errorf(adapter.InvalidRequest, "the object does not meet the request's preconditions: its ETag is %s, last modified %s",
			w.Header().Get("ETag"), modtime.UTC().Format(http.TimeFormat))
		ex.Status = http.StatusPreconditionFailed
		return ex
	case http.StatusRequestedRangeNotSatisfiable:
		size, _ := strings.CutPrefix(w.Header().Get("Content-Range"), "bytes */")
		n, _ := strconv.ParseInt(size, 10, 64)
		return unsatisfiable(rng, n)
	}
	return nil
}

func unsatisfiable(rng string, size int64) error {
	ex := adapter.Errorf(adapter.InvalidRequest, "no byte of the range %q is in the object of %d bytes", rng, size)
	ex.Status = http.StatusRequestedRangeNotSatisfiable
	return ex
}

// refusals keeps ServeContent's 412 and 416 from the client (it sends them in
// text/plain, or, for 412, under the object's headers with no body) and
// passes everything else through, ReadFrom included (sendfile, the pooled
// buffer).
type refusals struct {
	http.ResponseWriter
	status int
}

func (w *refusals) WriteHeader(code int) {
	if code == http.StatusPreconditionFailed || code == http.StatusRequestedRangeNotSatisfiable {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusals) Write(p []byte) (int, error) {
	if w.status != 0 {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *refusals) ReadFrom(src io.Reader) (int64, error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok && w.status == 0 {
		return rf.ReadFrom(src)
	}
	return io.Copy(writerOnly{w}, src)
}

var errIgnoreRange = errors.New("range ignored")

// settleRange reads a Range header (RFC 9110 §14.1.1) for an object of size bytes:
// the one satisfiable range [first, last]; first < 0 when no range is
// satisfiable; errIgnoreRange when the header is to be ignored (malformed, another
// unit, several satisfiable ranges, a suffix of an empty object).
func settleRange(h string, size int64) (first, last int64, err error) {
	unit, set, ok := strings.Cut(h, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return 0, 0, errIgnoreRange
	}
	first, last = -1, -1
	n, satisfiable := 0, 0
	for _, spec := range strings.Split(set, ",") {
		spec = strings.Trim(spec, " \t")
		if spec == "" {
			continue // empty list elements are allowed (RFC 9110 §5.6.1)
		}
		n++
		a, b, ok := strings.Cut(spec, "-")
		if !ok {
			return 0, 0, errIgnoreRange
		}
		var start, end int64
		if a == "" { // a suffix: the last b bytes
			length, ok := digits(b)
			if !ok {
				return 0, 0, errIgnoreRange
			}
			if length == 0 {
				continue
			}
			if size == 0 {
				return 0, 0, errIgnoreRange // the whole of an empty object
			}
			start, end = max(size-length, 0), size-1
		} else {
			var ok bool
			if start, ok = digits(a); !ok {
				return 0, 0, errIgnoreRange
			}
			end = math.MaxInt64
			if b != "" {
				if end, ok = digits(b); !ok || end < start {
					return 0, 0, errIgnoreRange
				}
			}
			if start >= size {
				continue
			}
			end = min(end, size-1)
		}
		satisfiable++
		first, last = start, end
	}
	if n == 0 || satisfiable > 1 {
		return 0, 0, errIgnoreRange
	}
	return first, last, nil
}

// digits reads 1*DIGIT; a number too large for int64 reads as the largest.
func digits(s string) (int64, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return math.MaxInt64, true
	}
	return v, true
}

// hasConditions reports a conditional request (RFC 9110 §13.1).
func hasConditions(req *http.Request) bool {
	for _, h := range []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range"} {
		if req.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// sendfileFrom is the size from which an object's bytes go from its file to
// the connection by sendfile(2) (fileWriter); below it, headers and bytes
// leave in one write, which costs less than a write and a sendfile.
const sendfileFrom = 64 << 10

// fileWriter lets ServeContent hand a file to net/http's own writer, which
// copies it to a TCP connection with sendfile(2) instead of through a
// buffer; gin's writer has no ReadFrom. Size counts the bytes sent so.
type fileWriter struct {
	gin.ResponseWriter
	sent int64
}

func (w *fileWriter) ReadFrom(src io.Reader) (int64, error) {
	u, ok := w.ResponseWriter.(interface{ Unwrap() http.ResponseWriter })
	if !ok {
		return io.Copy(writerOnly{w.ResponseWriter}, src)
	}
	rf, ok := u.Unwrap().(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{w.ResponseWriter}, src)
	}
	w.WriteHeaderNow()
	n, err := rf.ReadFrom(src)
	w.sent += n
	return n, err
}

func (w *fileWriter) Size() int { return w.ResponseWriter.Size() + int(w.sent) }

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// readerOnly hides a reader's WriteTo from io.Copy: *os.File's, towards
// anything but a socket, copies through a buffer of its own.
type readerOnly struct{ io.Reader }

// copyBuffers are what object bytes are copied through when they do not go by
// sendfile: io.Copy would make a buffer per response (32 KiB, or the object's
// size when smaller: as much garbage as the object, up to 32 KiB, per get).
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// bufferedWriter copies a body into gin's writer through a pooled buffer.
type bufferedWriter struct{ gin.ResponseWriter }

func (w bufferedWriter) ReadFrom(src io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(writerOnly{w.ResponseWriter}, readerOnly{src}, *buf)
}
