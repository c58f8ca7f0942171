package node_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// hashingGoroutines counts the goroutines of adapter.Hasher, waiting up to
// 5 s for them to end (the Hasher waits for them; this covers only their
// last instructions, which a preempted thread may take a while to run).
func hashingGoroutines() int {
	buf := make([]byte, 4<<20)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := bytes.Count(buf[:runtime.Stack(buf, true)], []byte("adapter.startCrew.func"))
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

// cutReader gives n bytes of data, then calls cut and returns err.
type cutReader struct {
	data []byte
	cut  func()
	err  error
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		if r.cut != nil {
			r.cut()
		}
		return 0, r.err
	}
	k := copy(p, r.data)
	r.data = r.data[k:]
	return k, nil
}

// TestStageSpeculative stages an object with the speculative algorithms, which
// the Hasher computes in parallel, and checks the digests and that no hashing
// goroutine outlives Stage, whether the upload succeeds, fails or is
// cancelled. Not parallel: it counts goroutines, and turns the collector off
// so that Stage must stop them itself, not leave them to the cleanup that
// collecting a dropped Hasher runs.
func TestStageSpeculative(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	e := newHarvestEnv(t, "")
	data := make([]byte, 3<<20+1)
	for i := range data {
		data[i] = byte(i * 7)
	}
	t.Run("complete", func(t *testing.T) {
		u, err := e.n.Stage(t.Context(), bytes.NewReader(data), adapter.SpeculativeAlgorithms)
		if err != nil {
			t.Fatal(err)
		}
		m, s1, s256 := md5.Sum(data), sha1.Sum(data), sha256.Sum256(data)
		want := map[string]string{"MD5": hex.EncodeToString(m[:]), "SHA-1": hex.EncodeToString(s1[:]), "SHA-256": hex.EncodeToString(s256[:])}
		for alg, v := range want {
			if u.Checksums[alg] != v {
				t.Errorf("%s = %s, want %s", alg, u.Checksums[alg], v)
			}
		}
		if u.Size != int64(len(data)) {
			t.Errorf("size %d, want %d", u.Size, len(data))
		}
		if n := hashingGoroutines(); n != 0 {
			t.Errorf("%d hashing goroutines left", n)
		}
		if err := e.n.Discard(t.Context(), u); err != nil {
			t.Error(err)
		}
	})
	gone := errors.New("client gone")
	t.Run("body fails", func(t *testing.T) {
		_, err := e.n.Stage(t.Context(), &cutReader{data: data, err: gone}, adapter.SpeculativeAlgorithms)
		if !errors.Is(err, gone) {
			t.Errorf("Stage = %v, want %v", err, gone)
		}
		if n := hashingGoroutines(); n != 0 {
			t.Errorf("%d hashing goroutines left", n)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		body := io.MultiReader(&cutReader{data: data, cut: cancel, err: io.EOF}, bytes.NewReader(data))
		if _, err := e.n.Stage(ctx, body, adapter.SpeculativeAlgorithms); err == nil {
			t.Error("Stage succeeded after its context ended")
		}
		if n := hashingGoroutines(); n != 0 {
			t.Errorf("%d hashing goroutines left", n)
		}
	})
}
