package adapter

import (
	"context"
	"log/slog"
)

// requestState is what a request's context carries: one value, so that a
// request derives one context (and one copy of its *http.Request), not one per
// part.
type requestState struct {
	id   string
	memo Memo
}

type requestKey struct{}

// WithRequest returns ctx carrying a request's id (for the logs and upstream
// calls; "" for none) and an empty Memo: one per request.
func WithRequest(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestKey{}, &requestState{id: id})
}

// RequestID is the id WithRequest put in ctx, or "".
func RequestID(ctx context.Context) string {
	if st, ok := ctx.Value(requestKey{}).(*requestState); ok {
		return st.id
	}
	return ""
}

// LogHandler adds the request id of a record's context to every log line.
func LogHandler(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
