package dataone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// Spool files are named spoolPrefix + random + spoolSuffix in the spool
// directory; an Upload's Ref is that name.
const (
	spoolPrefix = "d1bridge-dataone-"
	spoolSuffix = ".spool"
)

// spoolBuffer is the copy buffer of Stage.
const spoolBuffer = 256 << 10

// Stage spools body to a new file in the spool directory, counting and hashing
// it on the way. The file is removed by Create, Update or Discard.
func (n *Node) Stage(ctx context.Context, body io.Reader, algorithms []string) (*adapter.Upload, error) {
	f, err := os.CreateTemp(n.spool, spoolPrefix+"*"+spoolSuffix)
	if err != nil {
		return nil, spoolError(err, "creating a spool file in "+n.spool)
	}
	h := adapter.NewHasher(algorithms)
	defer h.Close() // stops its goroutines when the upload fails
	w := &writeErr{w: f}
	size, err := io.CopyBuffer(w, io.TeeReader(body, h), make([]byte, spoolBuffer))
	if cerr := f.Close(); err == nil && cerr != nil {
		err, w.err = cerr, cerr
	}
	if err != nil {
		os.Remove(f.Name())
		var ex *adapter.Exception
		switch {
		case errors.As(err, &ex):
			return nil, ex // the caller's limit (InsufficientResources)
		case w.err != nil:
			return nil, spoolError(w.err, "writing the object to the spool directory")
		}
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "reading the object's bytes")
	}
	return &adapter.Upload{Size: size, Checksums: h.Sums(), Ref: filepath.Base(f.Name())}, nil
}

// writeErr remembers a write error, to tell the spool's failures from the
// body's.
type writeErr struct {
	w   io.Writer
	err error
}

func (w *writeErr) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

func spoolError(err error, what string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return adapter.Wrap(adapter.InsufficientResources, err, "no room to stage the object (%s)", what)
	}
	return adapter.Wrap(adapter.ServiceFailure, err, "%s", what)
}

// spoolPath is the file an Upload's Ref names; only names Stage makes are
// accepted, so that no Ref can point elsewhere.
func (n *Node) spoolPath(ref string) (string, bool) {
	if !strings.HasPrefix(ref, spoolPrefix) || !strings.HasSuffix(ref, spoolSuffix) ||
		strings.ContainsAny(ref, `/\`) || filepath.Base(ref) != ref {
		return "", false
	}
	return filepath.Join(n.spool, ref), true
}

// Discard removes the spool file of u; a file already gone is not an error.
func (n *Node) Discard(ctx context.Context, u *adapter.Upload) error {
	if u == nil || u.Ref == "" {
		return nil
	}
	p, ok := n.spoolPath(u.Ref)
	if !ok {
		return adapter.Errorf(adapter.ServiceFailure, "%q is not an upload staged for upstream %q", u.Ref, n.c.Name())
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return adapter.Wrap(adapter.ServiceFailure, err, "removing the staged object %s", p)
	}
	return nil
}

// discard is Discard at the end of a call, whose failure is only logged.
func (n *Node) discard(ctx context.Context, u *adapter.Upload) {
	if err := n.Discard(ctx, u); err != nil {
		n.log.ErrorContext(ctx, "removing a spool file", "upstream", n.c.Name(), "err", err)
	}
}

// sweep removes the spool files older than olderThan: a crash left them.
func (n *Node) sweep(olderThan time.Duration) int {
	es, err := os.ReadDir(n.spool)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range es {
		if _, ok := n.spoolPath(e.Name()); !ok || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > olderThan {
			if os.Remove(filepath.Join(n.spool, e.Name())) == nil {
				removed++
			}
		}
	}
	if removed > 0 {
		n.log.Info("removed stale spool files", "upstream", n.c.Name(), "dir", n.spool, "count", removed)
	}
	return removed
}

// verify checks the staged bytes against the size and checksum sm declares;
// an algorithm d1bridge does not compute is left to the upstream.
func (n *Node) verify(sm *adapter.SystemMetadata, u *adapter.Upload, path string) error {
	if uint64(u.Size) != sm.Size {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the object has %d bytes, the system metadata says %d", u.Size, sm.Size).WithPID(sm.Identifier)
	}
	alg, ok := adapter.CanonicalAlgorithm(sm.Checksum.Algorithm)
	if !ok {
		return nil
	}
	got, ok := u.Checksums[alg]
	if !ok {
		f, err := os.Open(path)
		if err != nil {
			return adapter.Wrap(adapter.ServiceFailure, err, "the staged object is gone")
		}
		defer f.Close()
		h := adapter.NewHasher([]string{alg})
		if _, err := io.CopyBuffer(h, f, make([]byte, spoolBuffer)); err != nil {
			return adapter.Wrap(adapter.ServiceFailure, err, "reading the staged object")
		}
		got = h.Sums()[alg]
		if u.Checksums == nil {
			u.Checksums = map[string]string{}
		}
		u.Checksums[alg] = got
	}
	if !strings.EqualFold(got, strings.TrimSpace(sm.Checksum.Value)) {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the object's %s checksum is %s, the system metadata says %s",
			alg, got, sm.Checksum.Value).WithPID(sm.Identifier)
	}
	return nil
}

// Create sends pid, sysmeta and the staged object to the upstream's POST
// /object. The upstream answers with the identifier only: the system
// metadata returned is sm as sent, under that identifier.
func (n *Node) Create(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	defer n.discard(context.WithoutCancel(ctx), u)
	sm = n.submitter(s, sm)
	return n.send(ctx, s, u, sm, request{op: "MNStorage.create", method: http.MethodPost, path: "/object",
		what: fmt.Sprintf("the new object %q", sm.Identifier)}, textPart("pid", sm.Identifier))
}

// Update sends newPid, sysmeta and the staged object to the upstream's PUT
// /object/{id}.
func (n *Node) Update(ctx context.Context, s *adapter.Session, id string, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	defer n.discard(context.WithoutCancel(ctx), u)
	sm = n.submitter(s, sm)
	return n.send(ctx, s, u, sm, request{op: "MNStorage.update", method: http.MethodPut, path: "/object/" + adapter.EscapeIdentifier(id),
		what: fmt.Sprintf("the update of %q by %q", id, sm.Identifier)}, textPart("newPid", sm.Identifier))
}

// submitter is sm with the caller as its submitter when the upstream cannot
// see the caller (forward: none): the node, not the client, says who
// submitted, and only the front knows. An upstream that trusts the bridge
// keeps it (GMN: TRUST_CLIENT_SUBMITTER); others record the bridge. With token
// and proxy the upstream sees the caller and sets it itself.
func (n *Node) submitter(s *adapter.Session, sm *adapter.SystemMetadata) *adapter.SystemMetadata {
	if n.o.Forward != ForwardNone || s == nil || s.Subject == "" || sm.Submitter == s.Subject {
		return sm
	}
	c := *sm
	c.Submitter = s.Subject
	return &c
}

// send checks the staged object, then streams first, sysmeta and the object
// (in that order: Metacat checks the bytes as they arrive when it knows the
// system metadata first).
func (n *Node) send(ctx context.Context, s *adapter.Session, u *adapter.Upload, sm *adapter.SystemMetadata, r request, first formPart) (*adapter.SystemMetadata, error) {
	if u == nil {
		return nil, adapter.Errorf(adapter.InvalidRequest, "no object bytes were staged")
	}
	path, ok := n.spoolPath(u.Ref)
	if !ok {
		return nil, adapter.Errorf(adapter.ServiceFailure, "%q is not an upload staged for upstream %q", u.Ref, n.c.Name())
	}
	if err := n.verify(sm, u, path); err != nil {
		return nil, err
	}
	doc, err := docPart("sysmeta", sm)
	if err != nil {
		return nil, err
	}
	if r.form, err = newForm(first, doc, filePart("object", "content.bin", path, u.Size)); err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "building the body for upstream %q", n.c.Name())
	}
	r.stream = true // the object's bytes travel: no overall timeout
	id, err := n.identifier(ctx, s, r)
	if err != nil {
		return nil, err
	}
	out := sm.Clone()
	out.Identifier = id
	return out, nil
}

func (n *Node) Delete(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return n.identifier(ctx, s, request{op: "MNStorage.delete", method: http.MethodDelete, path: "/object/" + adapter.EscapeIdentifier(id),
		what: fmt.Sprintf("the deletion of %q", id)})
}

func (n *Node) Archive(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return n.identifier(ctx, s, request{op: "MNStorage.archive", method: http.MethodPut, path: "/archive/" + adapter.EscapeIdentifier(id),
		what: fmt.Sprintf("the archiving of %q", id)})
}

// UpdateSystemMetadata sends pid and sysmeta to the upstream's PUT /meta.
func (n *Node) UpdateSystemMetadata(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata) error {
	doc, err := docPart("sysmeta", sm)
	if err != nil {
		return err
	}
	f, err := newForm(textPart("pid", sm.Identifier), doc)
	if err != nil {
		return err
	}
	return n.call(ctx, s, request{op: "MNStorage.updateSystemMetadata", method: http.MethodPut, path: "/meta",
		form: f, what: fmt.Sprintf("the system metadata update of %q", sm.Identifier)}, nil)
}

// GenerateIdentifier asks the upstream's POST /generate.
func (n *Node) GenerateIdentifier(ctx context.Context, s *adapter.Session, scheme, fragment string) (string, error) {
	parts := []formPart{textPart("scheme", scheme)}
	if fragment != "" {
		parts = append(parts, textPart("fragment", fragment))
	}
	f, err := newForm(parts...)
	if err != nil {
		return "", err
	}
	return n.identifier(ctx, s, request{op: "MNStorage.generateIdentifier", method: http.MethodPost, path: "/generate",
		form: f, what: fmt.Sprintf("a new %s identifier", scheme)})
}
