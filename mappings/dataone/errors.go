package dataone

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// maxErrorDoc bounds how much of a failing answer is read.
const maxErrorDoc = 256 << 10

// statusCause is the cause of an exception made from a failing answer: logged,
// never rendered, and looked at by the operations that treat some statuses
// specially (setAccessPolicy).
type statusCause struct {
	method, url string
	status      int
	dataone     bool   // the answer was a DataONE error
	snippet     string // the start of a body that was not
}

func (c *statusCause) Error() string {
	s := fmt.Sprintf("%s %s: HTTP %d", c.method, c.url, c.status)
	if c.snippet != "" {
		s += ": " + c.snippet
	}
	return s
}

// fail turns a failing answer of the upstream into an exception and closes
// its body: a DataONE error (an <error> document, or DataONE-Exception-*
// headers) keeps its kind and identifier, and its description is prefixed
// with the upstream's name; any other answer is a ServiceFailure that names
// the upstream and the status.
func (n *Node) fail(resp *http.Response, r request) error {
	defer resp.Body.Close()
	cause := &statusCause{method: r.method, url: redact(resp.Request), status: resp.StatusCode}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorDoc))
	ex, err := adapter.DecodeException(bytes.NewReader(b))
	if err != nil {
		ex = exceptionFromHeaders(resp.Header)
	}
	if ex == nil {
		cause.snippet = snippet(b)
		var what error = cause
		if rerr != nil {
			what = fmt.Errorf("%w (reading the answer: %v)", cause, rerr)
		}
		return adapter.Wrap(adapter.ServiceFailure, what, "upstream %q answered HTTP %d to %s, not a DataONE error",
			n.c.Name(), resp.StatusCode, r.what)
	}
	cause.dataone = true
	desc := strings.TrimSpace(ex.Description)
	if desc == "" {
		desc = fmt.Sprintf("%s (HTTP %d) to %s", ex.Kind, resp.StatusCode, r.what)
	}
	// The upstream's trace, and the description of its own failure (GMN's
	// is a Python traceback: paths, source lines, a database's address),
	// go to this node's log, not to the client. The detail code is left to
	// the client's operation, which is not the upstream's (a get looks the
	// object up with getSystemMetadata).
	if ex.Kind == adapter.ServiceFailure {
		cause.snippet = snippet([]byte(desc + " " + ex.TraceInformation))
		desc = fmt.Sprintf("the upstream failed (HTTP %d) to answer %s; this node's log has its answer", resp.StatusCode, r.what)
	} else if ex.TraceInformation != "" {
		cause.snippet = snippet([]byte(ex.TraceInformation))
	}
	return &adapter.Exception{
		Kind: ex.Kind, PID: ex.PID,
		Description: n.c.Name() + ": " + desc,
		Err:         cause,
	}
}

// exceptionFromHeaders reads the DataONE-Exception-* headers some nodes send
// with an empty body; Metacat names the kind by its Java class.
func exceptionFromHeaders(h http.Header) *adapter.Exception {
	name := h.Get("DataONE-Exception-Name")
	if name == "" {
		return nil
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	k, _ := adapter.KindByName(name)
	unescape := func(s string) string {
		if u, err := url.PathUnescape(s); err == nil {
			return u
		}
		return s
	}
	pid := h.Get("DataONE-Exception-Identifier")
	if pid == "" {
		pid = h.Get("DataONE-Exception-PID")
	}
	return &adapter.Exception{
		Kind: k, DetailCode: h.Get("DataONE-Exception-DetailCode"), PID: unescape(pid),
		Description: unescape(h.Get("DataONE-Exception-Description")),
	}
}

// snippet is the start of a body, on one line, for the log.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// redact is the request's URL without credentials or query.
func redact(r *http.Request) string {
	if r == nil || r.URL == nil {
		return ""
	}
	u := *r.URL
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// answered reports the status of the failing answer err was made from, if any,
// and whether that answer was a DataONE error.
func answered(err error) (status int, dataone bool) {
	var c *statusCause
	if errors.As(err, &c) {
		return c.status, c.dataone
	}
	return 0, false
}

// missingOperation reports whether err says the upstream has no such
// operation: 405 or 501, a 404 that is no DataONE answer (an unknown path), or
// Metacat's "No resource matched" for a path it does not route. A DataONE
// NotFound may be either an unknown path (GMN) or an unknown object: the
// caller tells them apart.
func missingOperation(err error) (missing, ambiguous bool) {
	status, dataone := answered(err)
	switch {
	case status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		return true, false
	case status == http.StatusNotFound && !dataone:
		return true, false
	case status == http.StatusNotFound:
		return false, true
	case status == http.StatusBadRequest && strings.Contains(adapter.AsException(err).Description, "No resource matched"):
		return true, false
	}
	return false, false
}

// notImplemented is the exception for an operation the upstream lacks.
func (n *Node) notImplemented(op string, cause error) error {
	return adapter.Wrap(adapter.NotImplemented, cause, "%s is not offered by upstream %q", op, n.c.Name())
}

// itoa is strconv.FormatUint for the multipart values.
func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
