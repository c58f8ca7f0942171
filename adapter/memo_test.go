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

// TestMemoManyKeys: keys past the ones kept in place are kept too, a value
// stored again replaces the first wherever it is, keys of different types
// never meet, and Clear forgets all of them.
func TestMemoManyKeys(t *testing.T) {
	type other string
	m := MemoOf(WithRequest(context.Background(), ""))
	keys := []any{"a", other("a"), "b", "c", 4}
	for i, k := range keys {
		m.Store(k, i)
	}
	m.Store("a", 10) // in place
	m.Store("c", 12) // in the map
	want := []int{10, 1, 2, 12, 4}
	for i, k := range keys {
		if v, ok := m.Load(k); !ok || v != want[i] {
			t.Errorf("Load(%#v) = %v %v, want %d", k, v, ok, want[i])
		}
	}
	m.Clear()
	for _, k := range keys {
		if _, ok := m.Load(k); ok {
			t.Errorf("Clear kept %#v", k)
		}
	}
	m.Store("b", 7)
	if v, ok := m.Load("b"); !ok || v != 7 {
		t.Errorf("after Clear, Load = %v %v, want 7", v, ok)
	}
}
