package adapter

import (
	"context"
	"testing"
)

func TestMemo(t *testing.T) {
	if MemoOf(context.Background()) != nil {
		t.Fatal("a context without a memo has one")
	}
	var none *Memo
	none.Store("k", 1) // a nil memo keeps nothing, and does not fail
	if _, ok := none.Load("k"); ok {
		t.Error("a nil memo kept a value")
	}
	ctx := WithRequest(context.Background(), "")
	m := MemoOf(ctx)
	m.Store("k", 1)
	if v, ok := MemoOf(ctx).Load("k"); !ok || v != 1 {
		t.Errorf("Load = %v %v, want 1 true", v, ok)
	}
	if _, ok := MemoOf(WithRequest(ctx, "")).Load("k"); ok {
		t.Error("a new request's memo holds the previous one's values")
	}
	m.Clear()
	if _, ok := m.Load("k"); ok {
		t.Error("Clear kept a value")
	}
}
