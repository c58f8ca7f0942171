package adapter

import (
	"context"
	"sync"
)

// A Memo keeps what one request has read, so that reading it again in the
// same request (the authorization's lookup, then the operation's) costs
// nothing. A store reads and fills it (MemoOf) and clears it on every write
// made with the request's context. A nil *Memo keeps nothing.
type Memo struct {
	mu sync.Mutex
	m  map[any]any
}

// MemoOf returns the Memo of ctx's request (WithRequest), or nil.
func MemoOf(ctx context.Context) *Memo {
	if st, ok := ctx.Value(requestKey{}).(*requestState); ok {
		return &st.memo
	}
	return nil
}

// Load returns what was stored under k.
func (m *Memo) Load(k any) (any, bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

// Store keeps v under k.
func (m *Memo) Store(k, v any) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[any]any{}
	}
	m.m[k] = v
}

// Clear forgets everything: the request wrote.
func (m *Memo) Clear() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.m)
}
