package dataone

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// newSysmeta describes data as pid, with a checksum of alg.
func newSysmeta(pid string, data []byte, alg string) *adapter.SystemMetadata {
	var sum string
	switch alg {
	case "SHA-512":
		s := sha512.Sum512(data)
		sum = hex.EncodeToString(s[:])
	default:
		s := sha1.Sum(data)
		sum = hex.EncodeToString(s[:])
	}
	return &adapter.SystemMetadata{Identifier: pid, FormatID: "application/octet-stream", Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: alg, Value: sum}, RightsHolder: "CN=owner"}
}

// spooled lists the spool directory.
func spooled(t testing.TB, n *Node) []string {
	t.Helper()
	es, err := os.ReadDir(n.spool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func stage(t testing.TB, n *Node, data []byte, algs ...string) *adapter.Upload {
	t.Helper()
	if algs == nil {
		algs = adapter.SpeculativeAlgorithms
	}
	u, err := n.Stage(t.Context(), bytes.NewReader(data), algs)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCreate(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	s := session("CN=submitter", "")
	data := randomBytes(2, 3<<20+17)
	sum := sha1.Sum(data)

	u := stage(t, n, data)
	if u.Size != int64(len(data)) || u.Checksums["SHA-1"] != hex.EncodeToString(sum[:]) || len(u.Checksums) != 3 {
		t.Fatalf("staged %+v", u)
	}
	if got := spooled(t, n); !slices.Equal(got, []string{u.Ref}) {
		t.Fatalf("spool holds %v, want %s", got, u.Ref)
	}
	sm := newSysmeta("new/1", data, "SHA-1")
	out, err := n.Create(t.Context(), s, sm, u)
	if err != nil {
		t.Fatal(err)
	}
	if out.Identifier != "new/1" || out == sm {
		t.Errorf("returned %+v", out)
	}
	r := f.last(t, "POST", "/mn/v2/object")
	if !slices.Equal(r.Parts, []string{"pid", "sysmeta", "object"}) || r.Values["pid"] != "new/1" {
		t.Errorf("parts %v, values %v", r.Parts, r.Values)
	}
	if r.Sizes["object"] != int64(len(data)) || r.SHA1["object"] != hex.EncodeToString(sum[:]) {
		t.Errorf("the object arrived as %d bytes, SHA-1 %s", r.Sizes["object"], r.SHA1["object"])
	}
	if r.ContentLength <= int64(len(data)) || len(r.Header["Transfer-Encoding"]) > 0 {
		t.Errorf("Content-Length %d, Transfer-Encoding %v: the body must have a known length", r.ContentLength, r.Header["Transfer-Encoding"])
	}
	if got := spooled(t, n); len(got) != 0 {
		t.Errorf("spool files left after the create: %v", got)
	}
	if err := n.Discard(t.Context(), u); err != nil {
		t.Errorf("Discard after Create: %v", err)
	}
	obj, err := n.Get(t.Context(), s, "new/1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(b, data) {
		t.Error("the object read back differs")
	}

	t.Run("taken", func(t *testing.T) {
		_, err := n.Create(t.Context(), s, sm, stage(t, n, data))
		if e := adapter.AsException(err); e.Kind != adapter.IdentifierNotUnique || e.Description != `up: "new/1" is taken` || e.PID != "new/1" {
			t.Errorf("%+v", e)
		}
		if got := spooled(t, n); len(got) != 0 {
			t.Errorf("spool files left after a failed create: %v", got)
		}
	})
	t.Run("checked here", func(t *testing.T) {
		for name, sm := range map[string]*adapter.SystemMetadata{
			"checksum": func() *adapter.SystemMetadata {
				m := newSysmeta("c", data, "SHA-1")
				m.Checksum.Value = strings.Repeat("0", 40)
				return m
			}(),
			"size": func() *adapter.SystemMetadata { m := newSysmeta("c", data, "SHA-1"); m.Size++; return m }(),
		} {
			f.requests()
			_, err := n.Create(t.Context(), s, sm, stage(t, n, data))
			if !adapter.IsKind(err, adapter.InvalidSystemMetadata) {
				t.Errorf("%s: %v", name, err)
			}
			for _, r := range f.requests() {
				if r.Method == "POST" {
					t.Errorf("%s: a mismatching object was sent upstream", name)
				}
			}
		}
		if got := spooled(t, n); len(got) != 0 {
			t.Errorf("spool files left: %v", got)
		}
	})
	t.Run("algorithm not staged", func(t *testing.T) {
		small := []byte("checked again")
		if _, err := n.Create(t.Context(), s, newSysmeta("sha512", small, "SHA-512"), stage(t, n, small, "MD5")); err != nil {
			t.Fatal(err)
		}
		bad := newSysmeta("sha512-bad", small, "SHA-512")
		bad.Checksum.Value = strings.Repeat("a", 128)
		if _, err := n.Create(t.Context(), s, bad, stage(t, n, small, "MD5")); !adapter.IsKind(err, adapter.InvalidSystemMetadata) {
			t.Errorf("%v", err)
		}
	})
	t.Run("empty object", func(t *testing.T) {
		if _, err := n.Create(t.Context(), s, newSysmeta("empty", nil, "SHA-1"), stage(t, n, nil)); err != nil {
			t.Fatal(err)
		}
		if r := f.last(t, "POST", "/mn/v2/object"); r.Sizes["object"] != 0 || !slices.Equal(r.Parts, []string{"pid", "sysmeta", "object"}) {
			t.Errorf("%v %v", r.Parts, r.Sizes)
		}
	})
}

func TestUpdateAndTheRest(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	s := session("CN=owner", "")
	ctx := t.Context()
	f.put("old/1", "", []byte("old"))

	data := []byte("the new version")
	sm := newSysmeta("new/2", data, "SHA-1")
	out, err := n.Update(ctx, s, "old/1", sm, stage(t, n, data))
	if err != nil || out.Identifier != "new/2" {
		t.Fatalf("Update: %v %v", out, err)
	}
	r := f.last(t, "PUT", "/mn/v2/object/")
	if r.Path != "/mn/v2/object/old%2F1" || !slices.Equal(r.Parts, []string{"newPid", "sysmeta", "object"}) || r.Values["newPid"] != "new/2" {
		t.Errorf("%s %v %v", r.Path, r.Parts, r.Values)
	}
	if o, _ := f.lookup("old/1"); o.sm.ObsoletedBy != "new/2" {
		t.Error("the old object is not obsoleted")
	}
	if got := spooled(t, n); len(got) != 0 {
		t.Errorf("spool files left: %v", got)
	}
	if _, err := n.Update(ctx, s, "missing", newSysmeta("new/3", data, "SHA-1"), stage(t, n, data)); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("update of a missing object: %v", err)
	}

	if pid, err := n.Archive(ctx, s, "new/2"); err != nil || pid != "new/2" {
		t.Errorf("Archive: %q %v", pid, err)
	}
	if r := f.last(t, "PUT", "/mn/v2/archive/"); r.Path != "/mn/v2/archive/new%2F2" {
		t.Errorf("archive sent to %s", r.Path)
	}

	cur, _ := n.SystemMetadata(ctx, s, "new/2")
	cur.FileName = "renamed.txt"
	if err := n.UpdateSystemMetadata(ctx, s, cur); err != nil {
		t.Fatal(err)
	}
	r = f.last(t, "PUT", "/mn/v2/meta")
	if !slices.Equal(r.Parts, []string{"pid", "sysmeta"}) || r.Values["pid"] != "new/2" {
		t.Errorf("parts %v %v", r.Parts, r.Values)
	}
	if err := n.UpdateSystemMetadata(ctx, s, cur); !adapter.IsKind(err, adapter.InvalidRequest) {
		t.Errorf("stale update: %v", err)
	}

	if id, err := n.GenerateIdentifier(ctx, s, "UUID", "frag-"); err != nil || id != "frag-generated-1" {
		t.Errorf("GenerateIdentifier: %q %v", id, err)
	}
	if r := f.last(t, "POST", "/mn/v2/generate"); !slices.Equal(r.Parts, []string{"scheme", "fragment"}) || r.Values["scheme"] != "UUID" {
		t.Errorf("parts %v %v", r.Parts, r.Values)
	}

	if pid, err := n.Delete(ctx, s, "new/2"); err != nil || pid != "new/2" {
		t.Errorf("Delete: %q %v", pid, err)
	}
	if _, err := n.Delete(ctx, s, "new/2"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("second Delete: %v", err)
	}
}

type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func TestStageAndDiscard(t *testing.T) {
	t.Parallel()
	n := open(t, upstreamConfig(t, "http://127.0.0.1:1/mn", ""), nil)
	ctx := t.Context()
	t.Run("reader fails", func(t *testing.T) {
		_, err := n.Stage(ctx, &failingReader{n: 1 << 20, err: errors.New("client gone")}, []string{"MD5"})
		if e := adapter.AsException(err); e.Kind != adapter.ServiceFailure || !strings.Contains(e.Error(), "client gone") {
			t.Errorf("%v", err)
		}
		if got := spooled(t, n); len(got) != 0 {
			t.Errorf("left %v", got)
		}
	})
	t.Run("limit", func(t *testing.T) {
		limit := adapter.Errorf(adapter.InsufficientResources, "too large")
		if _, err := n.Stage(ctx, &failingReader{n: 100, err: limit}, nil); err != limit {
			t.Errorf("%v", err)
		}
	})
	t.Run("discard", func(t *testing.T) {
		u := stage(t, n, []byte("x"))
		for range 2 {
			if err := n.Discard(ctx, u); err != nil {
				t.Error(err)
			}
		}
		if err := n.Discard(ctx, nil); err != nil {
			t.Error(err)
		}
	})
	t.Run("foreign ref", func(t *testing.T) {
		victim := filepath.Join(t.TempDir(), "victim")
		os.WriteFile(victim, []byte("keep"), 0o600)
		rel, _ := filepath.Rel(n.spool, victim)
		for _, ref := range []string{victim, rel, spoolPrefix + "/../x" + spoolSuffix, "victim"} {
			if err := n.Discard(ctx, &adapter.Upload{Ref: ref}); err == nil {
				t.Errorf("Discard(%q) accepted", ref)
			}
			if _, err := n.Create(ctx, session("CN=x", ""), newSysmeta("p", nil, "SHA-1"), &adapter.Upload{Ref: ref}); err == nil {
				t.Errorf("Create with Ref %q accepted", ref)
			}
		}
		if _, err := os.Stat(victim); err != nil {
			t.Error("a file outside the spool was removed")
		}
	})
}

// TestCreateStreams: a 64 MiB create allocates a small fraction of its size
// (client and fake server together): the object is never held in memory.
func TestCreateStreams(t *testing.T) {
	f := newFake(t)
	f.set(func(f *fakeMN) { f.dropBytes = true })
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	const size = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := sha1.New()
	u, err := n.Stage(t.Context(), io.TeeReader(io.LimitReader(zeros{}, size), h), []string{"SHA-1"})
	if err != nil {
		t.Fatal(err)
	}
	sm := &adapter.SystemMetadata{Identifier: "big", FormatID: "application/octet-stream", Size: size,
		Checksum: adapter.Checksum{Algorithm: "SHA-1", Value: hex.EncodeToString(h.Sum(nil))}, RightsHolder: "CN=o"}
	if _, err := n.Create(t.Context(), session("CN=x", ""), sm, u); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if r := f.last(t, "POST", "/mn/v2/object"); r.Sizes["object"] != size {
		t.Fatalf("%d bytes arrived", r.Sizes["object"])
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MiB for a %d MiB create", float64(alloc)/(1<<20), size>>20)
	if alloc > size/4 {
		t.Errorf("allocated %d bytes for a %d-byte create: the object is buffered", alloc, size)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
