package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// snippetLimit bounds how much of an error body is kept as the cause.
const snippetLimit = 512

// Exception turns an answer that is not a success into an adapter.Exception,
// reading a little of its body into the cause (logged, never rendered) and
// closing it. what names what was asked for, as in `object "k"`.
func (c *Client) Exception(resp *http.Response, what string) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, snippetLimit))
	method := ""
	if resp.Request != nil {
		method = resp.Request.Method
	}
	cause := fmt.Errorf("%s %s: %s: %s", method, redact(resp.Request), resp.Status, strings.TrimSpace(string(b)))
	return c.StatusError(resp.StatusCode, what, cause)
}

// StatusError is the exception for an upstream's HTTP status (for libraries
// that parse the answer themselves):
//
//	404, 410            NotFound
//	401, 403            NotAuthorized (the upstream refuses d1bridge's credentials)
//	413, 507            InsufficientResources
//	429, 5xx and others ServiceFailure naming the upstream
func (c *Client) StatusError(status int, what string, cause error) error {
	switch {
	case status == http.StatusNotFound || status == http.StatusGone:
		return adapter.Wrap(adapter.NotFound, cause, "%s is not in upstream %q", what, c.Name())
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return adapter.Wrap(adapter.NotAuthorized, cause, "upstream %q refused access to %s (HTTP %d)", c.Name(), what, status)
	case status == http.StatusRequestEntityTooLarge:
		return adapter.Wrap(adapter.InsufficientResources, cause, "upstream %q refused %s as too large", c.Name(), what)
	case status == http.StatusInsufficientStorage:
		return adapter.Wrap(adapter.InsufficientResources, cause, "upstream %q has no room for %s", c.Name(), what)
	case status == http.StatusTooManyRequests:
		return adapter.Wrap(adapter.ServiceFailure, cause, "upstream %q is overloaded (HTTP 429) and refused %s", c.Name(), what)
	case status >= 500:
		return adapter.Wrap(adapter.ServiceFailure, cause, "upstream %q failed (HTTP %d) on %s", c.Name(), status, what)
	}
	return adapter.Wrap(adapter.ServiceFailure, cause, "upstream %q answered HTTP %d to %s", c.Name(), status, what)
}

// Error turns a transport error into an adapter.Exception: exceptions (an open
// breaker) pass through, and the rest become ServiceFailures that name the
// upstream and say whether it timed out, was unreachable, or the caller gave up.
func (c *Client) Error(err error, what string) error {
	if err == nil {
		return nil
	}
	var e *adapter.Exception
	if errors.As(err, &e) {
		return e
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return adapter.Wrap(adapter.ServiceFailure, err, "%s on upstream %q was canceled", what, c.Name())
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q did not answer in time (%s)", c.Name(), what)
	}
	return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q is unreachable (%s)", c.Name(), what)
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
