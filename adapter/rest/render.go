package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/d1bridge/d1bridge/adapter"
)

// statusClientClosed is recorded in the logs and metrics (never sent: it is not
// an HTTP status) when the client went away.
const statusClientClosed = 499

// writeException is the one place an error reaches a client. It turns err into an
// exception the operation may raise, fills in the node id and the detail code, and
// writes it as an <error> document, or as DataONE-Exception-* headers on HEAD.
// Once bytes are out it only logs; a client that went away gets nothing.
func (e *engine) writeException(r *request, err error) {
	ex := adapter.AsException(err)
	if r.Request.Context().Err() != nil && errors.Is(err, context.Canceled) {
		r.ex = ex     // wrap's line, at info with status 499, says the client went away
		r.gone = true // wrap records 499 and closes the connection; nothing is written
		r.Abort()
		return
	}
	if r.Writer.Written() {
		// The status is out; the request line (at the status's level) would not
		// say that the answer was cut short, so this one does.
		e.log.Error("error after the response started", "op", r.op, "err", err)
		r.Abort()
		return
	}
	ex = permitted(r.op, r.version, ex)
	e.renderException(r, ex, ex.HTTPStatus())
}

// renderException writes ex with the given HTTP status.
func (e *engine) renderException(r *request, ex *adapter.Exception, status int) {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if status != ex.Kind.Status() {
		ex.Status = status
	}
	if ex.PID == "" {
		ex.PID = r.id
	}
	ex.NodeID = e.opts.Node.ID
	// A failed request is one log line: wrap's request line carries the
	// exception. A request no route wraps (no route, no method, a panic) gets
	// its line here.
	r.ex = ex
	if !r.wrapped {
		e.log.LogAttrs(r, requestLevel(status), "request", append([]slog.Attr{slog.String("op", r.op),
			slog.String("method", r.Request.Method), slog.String("path", r.Request.URL.EscapedPath()),
			slog.Int("status", status)}, exceptionAttrs(ex)...)...)
	}
	if r.Request.Method == http.MethodHead {
		hd := r.Writer.Header()
		for k, v := range adapter.ExceptionHeaders(ex) {
			hd[k] = []string{v} // as spelled (hChecksum)
		}
		r.Header("Content-Type", "text/xml; charset=utf-8")
		r.Status(status)
		r.Writer.WriteHeaderNow()
		r.Abort()
		return
	}
	r.Header("Content-Type", "text/xml; charset=utf-8")
	r.Status(status)
	if err := adapter.EncodeException(r.Writer, ex); err != nil {
		e.log.Error("writing an exception", "err", err)
	}
	r.Abort()
}

// exceptionAttrs are what a request line says of the exception it answered.
func exceptionAttrs(ex *adapter.Exception) []slog.Attr {
	if ex == nil {
		return nil
	}
	attrs := []slog.Attr{slog.String("kind", ex.Kind.String()), slog.String("description", ex.Description)}
	if ex.Err != nil {
		attrs = append(attrs, slog.String("cause", ex.Err.Error()))
	}
	return attrs
}

// xml renders a DataONE document in the request's API version.
func (r *request) xml(doc any) error {
	r.Header("Content-Type", "text/xml; charset=utf-8")
	r.Status(http.StatusOK)
	return adapter.Encode(r.Writer, doc, r.version)
}

// ok answers a boolean operation: 200 with the body GMN sends.
func (r *request) ok() error {
	r.Data(http.StatusOK, "text/plain; charset=utf-8", []byte("OK"))
	return nil
}
