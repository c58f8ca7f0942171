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
	// A request keeps one or two things (the record it looked up, under its
	// PID and perhaps its SID): they go in place, a map only past those, one
	// allocation fewer per request.
	few  [2]memoEntry
	n    int
	more map[any]any
}

type memoEntry struct{ k, v any }

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
	for _, e := range m.few[:m.n] {
		if e.k == k {
			return e.v, true
		}
	}
	v, ok := m.more[k]
	return v, ok
}

// Store keeps v under k.
func (m *Memo) Store(k, v any) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.few[:m.n] {
		if m.few[i].k == k {
			m.few[i].v = v
			return
		}
	}
	if m.n < len(m.few) {
		m.few[m.n] = memoEntry{k, v}
		m.n++
		return
	}
	if m.more == nil {
		m.more = map[any]any{}
	}
	m.more[k] = v
}

// Clear forgets everything: the request wrote.
func (m *Memo) Clear() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.few, m.n = [2]memoEntry{}, 0
	clear(m.more)
}
