package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// TestGetDuringDeleteIsNotServiceFailure gets an object while it is
// deleted. Each get must see the object whole or not at all (NotFound). Get
// finds the record (view), then opens its bytes; a Delete between the two
// removes the row and then the file, and Get answered ServiceFailure "the
// bytes of %q are missing from the store", the answer of a damaged store,
// for an object that was simply deleted.
func TestGetDuringDeleteIsNotServiceFailure(t *testing.T) {
	dir := t.TempDir()
	cat := openCatalog(t, dir)
	n := newNode(t, dir, cat, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { n.Close() })
	ctx := t.Context()
	s := &adapter.Session{Subject: harvestOwner}
	data := []byte("some bytes to read while they are deleted")
	for i := range 40 {
		pid := fmt.Sprintf("gd-%d", i)
		createText(t, n, pid, data)
		var stop atomic.Bool
		var failure atomic.Value
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					o, err := n.Get(ctx, s, pid)
					if err == nil {
						io.Copy(io.Discard, o.Body)
						o.Body.Close()
						continue
					}
					if adapter.IsKind(err, adapter.NotFound) {
						return
					}
					failure.Store(err)
					return
				}
			}()
		}
		time.Sleep(100 * time.Microsecond)
		if _, err := n.Delete(ctx, s, pid); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		if err, ok := failure.Load().(error); ok {
			t.Fatalf("iteration %d: a get of %q during its delete answered %s: %v",
				i, pid, adapter.AsException(err).Kind, err)
		}
	}
}

// TestDeleteLeavesOthersBytes: deleting an object whose bytes are not the
// store's (a dataset source's file, its key carrying the source's mark, or a
// document of the catalog) removes its record and nothing of the store, which
// may hold bytes of its own under that very name.
func TestDeleteLeavesOthersBytes(t *testing.T) {
	dir := t.TempDir()
	cat := openCatalog(t, dir)
	blobs, err := fsblobs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	n := node.New("urn:node:t", blobs, cat, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { n.Close() })
	ctx := t.Context()
	s := &adapter.Session{Subject: harvestOwner}
	for i, key := range []string{"@src/data.csv", node.DocumentKeyPrefix + "map"} {
		if _, err := blobs.Put(ctx, key, strings.NewReader("the store's own bytes")); err != nil {
			t.Fatal(err)
		}
		pid := fmt.Sprintf("other-%d", i)
		sm := &adapter.SystemMetadata{SerialVersion: 1, Identifier: pid, FormatID: "text/csv", Size: 5,
			Checksum:     adapter.Checksum{Algorithm: "MD5", Value: "0123456789abcdef0123456789abcdef"},
			RightsHolder: harvestOwner, AuthoritativeMemberNode: "urn:node:t", DateSysMetadataModified: adapter.Now()}
		if err := cat.Insert(ctx, &node.Record{Meta: sm, BlobKey: key}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Delete(ctx, s, pid); err != nil {
			t.Fatal(err)
		}
		if _, err := cat.Lookup(ctx, pid); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("%s after delete: %v, want NotFound", pid, err)
		}
		r, err := blobs.Get(ctx, key)
		if err != nil {
			t.Errorf("deleting %s (bytes at %q, not the store's) removed the store's %q: %v", pid, key, key, err)
			continue
		}
		r.Close()
	}
}

// lostCommit is a catalog whose inserts commit and then answer an error, as
// when the database's connection breaks while the commit's answer comes back
// (the real catalog embedded, so that its other interfaces stay offered).
type lostCommit struct{ *sqlcatalog.Catalog }

func (c lostCommit) Insert(ctx context.Context, rec *node.Record) error {
	if err := c.Catalog.Insert(ctx, rec); err != nil {
		return err
	}
	return errors.New("sqlcatalog: commit: driver: bad connection")
}

// TestCreateWhoseCommitAnswerIsLost: a create whose commit happened though the
// catalog answered an error keeps its bytes: the object the catalog now lists
// can be read.
func TestCreateWhoseCommitAnswerIsLost(t *testing.T) {
	dir := t.TempDir()
	cat := openCatalog(t, dir)
	n := newNode(t, dir, lostCommit{cat}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { n.Close() })
	data := []byte("bytes whose commit's answer is lost")
	createText(t, n, "lost-answer", data)
	o, err := n.Get(t.Context(), &adapter.Session{Subject: harvestOwner, Subjects: []string{harvestOwner}}, "lost-answer")
	if err != nil {
		t.Fatalf("get of the object the catalog holds: %v", err)
	}
	defer o.Body.Close()
	if got, _ := io.ReadAll(o.Body); string(got) != string(data) {
		t.Errorf("read %q, want %q", got, data)
	}
}
