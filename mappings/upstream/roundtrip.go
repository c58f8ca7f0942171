package upstream

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/sony/gobreaker/v2"
)

// Outcomes of an upstream call, the metrics' outcome label.
const (
	OutcomeOK          = "ok"
	OutcomeNotFound    = "not_found"
	OutcomeClientError = "client_error"
	OutcomeServerError = "server_error"
	OutcomeError       = "error"
	OutcomeBreakerOpen = "breaker_open"
)

// observe records each call's outcome and the time to its answer's headers.
type observe struct {
	next http.RoundTripper
	m    *metrics.Metrics
	name string
}

func (t *observe) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	if r.Body != nil && r.Body != http.NoBody {
		// Track the caller's body, so that its failure is not the upstream's.
		r2 := *r
		r2.Body = &trackedBody{ReadCloser: r.Body}
		r = &r2
	}
	resp, err := t.next.RoundTrip(r)
	t.m.ObserveUpstream(t.name, operation(r), outcome(resp, err, callerFailed(r, err)), time.Since(start))
	return resp, err
}

// trackedBody notes whether reading the caller's request body failed (a client
// that went away mid-upload, a body over the size limit).
type trackedBody struct {
	io.ReadCloser
	failed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.failed.Store(true)
	}
	return n, err
}

// callerFailed reports whether a call failed because of its caller: it was
// canceled, or its request body could not be read. Such a call says nothing
// about the upstream.
func callerFailed(r *http.Request, err error) bool {
	if err == nil {
		return false
	}
	if canceled(err) {
		return true
	}
	tb, ok := r.Body.(*trackedBody)
	return ok && tb.failed.Load()
}

func outcome(resp *http.Response, err error, byCaller bool) string {
	switch {
	case IsUnavailable(err):
		return OutcomeBreakerOpen
	case byCaller:
		return OutcomeClientError
	case err != nil:
		return OutcomeError
	case resp.StatusCode == http.StatusNotFound:
		return OutcomeNotFound
	case failed(resp.StatusCode): // 5xx, and 429: the upstream could not serve
		return OutcomeServerError
	case resp.StatusCode >= 400:
		return OutcomeClientError
	}
	return OutcomeOK
}

// failed reports whether a status counts as the upstream failing: 5xx, 429.
func failed(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests
}

// canceled reports whether the caller gave up.
func canceled(err error) bool { return errors.Is(err, context.Canceled) }

// callerFault carries, through gobreaker, an error the caller caused; the
// breaker leaves such calls out.
type callerFault struct{ err error }

func (e callerFault) Error() string { return e.err.Error() }

func isCallerFault(err error) bool { return errors.As(err, new(callerFault)) }

// statusFailure carries a failing answer through gobreaker as an error.
type statusFailure struct{ status int }

func (e statusFailure) Error() string { return "HTTP " + strconv.Itoa(e.status) }

// breaker counts each call's result and refuses calls while it is open.
type breaker struct {
	next     http.RoundTripper
	cb       *gobreaker.CircuitBreaker[*http.Response]
	name     string
	failures uint32
}

func (t *breaker) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.cb.Execute(func() (*http.Response, error) {
		resp, err := t.next.RoundTrip(r)
		switch {
		case callerFailed(r, err):
			return resp, callerFault{err}
		case err == nil && failed(resp.StatusCode):
			return resp, statusFailure{resp.StatusCode}
		}
		return resp, err
	})
	var sf statusFailure
	var cf callerFault
	switch {
	case errors.As(err, &sf):
		return resp, nil
	case errors.As(err, &cf):
		return resp, cf.err
	case errors.Is(err, gobreaker.ErrOpenState):
		return nil, adapter.Wrap(adapter.ServiceFailure, err,
			"upstream %q is unavailable (circuit open after %d failures)", t.name, t.failures)
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return nil, adapter.Wrap(adapter.ServiceFailure, err,
			"upstream %q is unavailable (circuit half-open, a trial call is under way)", t.name)
	}
	return resp, err
}

// IsUnavailable reports whether err is an open (or half-open and busy)
// breaker's refusal.
func IsUnavailable(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

// Unanswered reports whether err, the failure of a call through the client,
// leaves its outcome unknown: the request may have reached the upstream, and
// no answer came back (the transport failed, or the context ended). The
// client's own refusals (an open breaker, TLS files that did not load) sent
// nothing.
func Unanswered(err error) bool {
	var ex *adapter.Exception
	return err != nil && !errors.As(err, &ex)
}

// retry repeats idempotent calls that failed before any body byte was read.
type retry struct {
	next http.RoundTripper
	cfg  config.Retry
}

// drainLimit is how much of a failed answer's body is read so that its
// connection can be reused; a longer body closes the connection instead.
const drainLimit = 64 << 10

func (t *retry) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.cfg.Max <= 0 || !replayable(r) {
		return t.next.RoundTrip(r)
	}
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		resp, err := t.next.RoundTrip(r)
		if attempt >= t.cfg.Max || ctx.Err() != nil || !retryable(resp, err) {
			return resp, err
		}
		timer := time.NewTimer(t.backoff(attempt, resp))
		select {
		case <-ctx.Done():
			// Hand back the last answer, unread: the caller decides.
			timer.Stop()
			return resp, err
		case <-timer.C:
		}
		if resp != nil {
			io.CopyN(io.Discard, resp.Body, drainLimit)
			resp.Body.Close()
		}
	}
}

// replayable: GET and HEAD without a body.
func replayable(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.Body == nil || r.Body == http.NoBody)
}

func retryable(resp *http.Response, err error) bool {
	if err != nil {
		// The caller's own deadline has been checked; a DeadlineExceeded here
		// is the transport's header timeout.
		return !canceled(err) && !IsUnavailable(err)
	}
	return failed(resp.StatusCode)
}

// backoff is min·2^attempt capped at max, jittered into its upper half; a
// Retry-After in seconds raises it, up to max.
func (t *retry) backoff(attempt int, resp *http.Response) time.Duration {
	lo, hi := t.cfg.MinBackoff, t.cfg.MaxBackoff
	if hi < lo {
		hi = lo
	}
	d := lo
	for i := 0; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	if d > 1 {
		d = d/2 + rand.N(d/2+1)
	}
	if resp != nil {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			d = max(d, min(time.Duration(s)*time.Second, hi))
		}
	}
	return d
}

// requestID passes the request's id on to the upstream, for its logs.
type requestID struct{ next http.RoundTripper }

// RequestIDHeader carries the request id upstream.
const RequestIDHeader = "X-Request-Id"

func (t requestID) RoundTrip(r *http.Request) (*http.Response, error) {
	if id := adapter.RequestID(r.Context()); id != "" && r.Header.Get(RequestIDHeader) == "" {
		r = r.Clone(r.Context()) // a RoundTripper must not change its request
		r.Header.Set(RequestIDHeader, id)
	}
	return t.next.RoundTrip(r)
}
