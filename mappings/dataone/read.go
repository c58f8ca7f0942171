package dataone

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// --- MNCore

func (n *Node) LogRecords(ctx context.Context, s *adapter.Session, q adapter.LogQuery) (*adapter.Log, error) {
	// v1 callers filter by PID prefix only: the v1 API says so on the
	// upstream too (its v2 idFilter would resolve a series id).
	how := n.listingFor(s, q.ReadableBy)
	if how == listAndFilter {
		return n.filteredLog(ctx, q)
	}
	var log adapter.Log
	err := n.call(ctx, s, request{op: "MNCore.getLogRecords", method: http.MethodGet, path: "/log", v1: q.PIDsOnly,
		query: logQuery(q), what: "the event log", public: how == listAsPublic}, &log)
	if err != nil {
		return nil, err
	}
	return &log, nil
}

// --- MNRead

// Get asks for the system metadata and the bytes at the same time, and streams
// the bytes as they come. When the upstream serves ranges, the body seeks with
// ranged GETs.
func (n *Node) Get(ctx context.Context, s *adapter.Session, id string) (*adapter.Object, error) {
	type meta struct {
		sm  *adapter.SystemMetadata
		err error
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mc := make(chan meta, 1)
	go func() {
		sm, err := n.SystemMetadata(mctx, s, id)
		mc <- meta{sm, err}
	}()
	r := n.getRequest(id)
	resp, err := n.do(ctx, s, r)
	if err != nil {
		cancel()
		<-mc
		return nil, err
	}
	m := <-mc
	if m.err != nil {
		resp.Body.Close()
		return nil, m.err
	}
	sm := m.sm
	if resp.ContentLength >= 0 && uint64(resp.ContentLength) != sm.Size {
		resp.Body.Close()
		return nil, adapter.Errorf(adapter.ServiceFailure, "upstream %q sent %d bytes for %q, whose system metadata says %d",
			n.c.Name(), resp.ContentLength, id, sm.Size).WithPID(sm.Identifier)
	}
	obj := &adapter.Object{Meta: sm, Body: resp.Body}
	if strings.EqualFold(resp.Header.Get("Accept-Ranges"), "bytes") && resp.ContentLength >= 0 {
		etag := resp.Header.Get("ETag")
		if strings.HasPrefix(etag, "W/") {
			etag = "" // If-Range needs a strong validator
		}
		pid := sm.Identifier // a series id could move on to a newer object
		open := func(ctx context.Context, off int64) (io.ReadCloser, error) {
			return n.openAt(ctx, s, pid, off, etag)
		}
		obj.Body = upstream.NewSeekable(ctx, resp.Body, resp.ContentLength, open)
	}
	return obj, nil
}

func (n *Node) getRequest(id string) request {
	return request{op: "MNRead.get", method: http.MethodGet, path: "/object/" + adapter.EscapeIdentifier(id),
		what: fmt.Sprintf("object %q", id), stream: true}
}

// openAt reopens the object's bytes from off, with a ranged GET that fails
// when the object is no longer the one first read (If-Range with its ETag).
func (n *Node) openAt(ctx context.Context, s *adapter.Session, id string, off int64, etag string) (io.ReadCloser, error) {
	r := n.getRequest(id)
	r.header = http.Header{"Range": {"bytes=" + strconv.FormatInt(off, 10) + "-"}}
	if etag != "" {
		r.header.Set("If-Range", etag)
	}
	resp, err := n.do(ctx, s, r)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		if cr := resp.Header.Get("Content-Range"); !strings.HasPrefix(cr, "bytes "+strconv.FormatInt(off, 10)+"-") {
			resp.Body.Close()
			return nil, adapter.Errorf(adapter.ServiceFailure, "upstream %q answered the range from %d of %q with Content-Range %q",
				n.c.Name(), off, id, cr)
		}
		return resp.Body, nil
	case etag != "":
		// The whole object instead of a range under If-Range: it changed.
		resp.Body.Close()
		return nil, adapter.Errorf(adapter.ServiceFailure, "object %q changed on upstream %q while it was read", id, n.c.Name()).WithPID(id)
	}
	// No range, no validator: skip to off.
	if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
		resp.Body.Close()
		return nil, n.c.Error(err, r.what)
	}
	return resp.Body, nil
}

func (n *Node) SystemMetadata(ctx context.Context, s *adapter.Session, id string) (*adapter.SystemMetadata, error) {
	var sm adapter.SystemMetadata
	err := n.call(ctx, s, request{op: "MNRead.getSystemMetadata", method: http.MethodGet, path: "/meta/" + adapter.EscapeIdentifier(id),
		what: fmt.Sprintf("the system metadata of %q", id)}, &sm)
	if err != nil {
		return nil, err
	}
	return &sm, nil
}

// Checksum asks the upstream; without an algorithm, the upstream picks (its
// stored checksum, or its default algorithm).
func (n *Node) Checksum(ctx context.Context, s *adapter.Session, pid, algorithm string) (*adapter.Checksum, error) {
	q := url.Values{}
	if algorithm != "" {
		q.Set("checksumAlgorithm", algorithm)
	}
	var c adapter.Checksum
	// Computing a checksum may read the whole object: no overall timeout.
	err := n.call(ctx, s, request{op: "MNRead.getChecksum", method: http.MethodGet, path: "/checksum/" + adapter.EscapeIdentifier(pid),
		query: q, what: fmt.Sprintf("the checksum of %q", pid), stream: true}, &c)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// ListObjects asks the upstream, which filters by the identity it sees; with
// forward none, see listing.go.
func (n *Node) ListObjects(ctx context.Context, s *adapter.Session, q adapter.ListQuery) (*adapter.ObjectList, error) {
	how := n.listingFor(s, q.ReadableBy)
	if how == listAndFilter {
		return n.filteredObjects(ctx, q)
	}
	var l adapter.ObjectList
	err := n.call(ctx, s, request{op: "MNRead.listObjects", method: http.MethodGet, path: "/object",
		query: listQuery(q), what: "the object list", public: how == listAsPublic}, &l)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// SynchronizationFailed passes the CN's report on.
func (n *Node) SynchronizationFailed(ctx context.Context, s *adapter.Session, report *adapter.Exception) error {
	var b bytes.Buffer
	if err := adapter.EncodeException(&b, report); err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "encoding the report")
	}
	f, err := newForm(formPart{name: "message", filename: "message.xml", ctype: "text/xml; charset=utf-8", data: b.Bytes()})
	if err != nil {
		return err
	}
	return n.call(ctx, s, request{op: "MNRead.synchronizationFailed", method: http.MethodPost, path: "/error",
		form: f, what: "a synchronization failure report"}, nil)
}

// --- MNAuthorization

// SetAccessPolicy calls the upstream's PUT /accessRules/{pid}, which a member
// node may lack: that is NotImplemented.
func (n *Node) SetAccessPolicy(ctx context.Context, s *adapter.Session, pid string, policy *adapter.AccessPolicy, serialVersion uint64) error {
	if policy == nil {
		policy = &adapter.AccessPolicy{}
	}
	doc, err := docPart("accessPolicy", policy)
	if err != nil {
		return err
	}
	parts := []formPart{doc}
	if serialVersion != 0 {
		parts = append(parts, textPart("serialVersion", itoa(serialVersion)))
	}
	f, err := newForm(parts...)
	if err != nil {
		return err
	}
	const op = "MNAuthorization.setAccessPolicy"
	err = n.call(ctx, s, request{op: op, method: http.MethodPut, path: "/accessRules/" + adapter.EscapeIdentifier(pid),
		form: f, what: fmt.Sprintf("the access policy of %q", pid)}, nil)
	if err == nil {
		return nil
	}
	missing, ambiguous := missingOperation(err)
	if ambiguous {
		// A DataONE NotFound: an unknown path (GMN), or an unknown object.
		if _, merr := n.SystemMetadata(ctx, s, pid); merr == nil {
			missing = true
		}
	}
	if missing {
		return n.notImplemented(op, err)
	}
	return err
}

// SystemMetadataChanged passes the CN's notice on.
func (n *Node) SystemMetadataChanged(ctx context.Context, s *adapter.Session, id string, serialVersion uint64, modified adapter.Time) error {
	parts := []formPart{textPart("pid", id), textPart("serialVersion", itoa(serialVersion))}
	if !modified.IsZero() {
		parts = append(parts, textPart("dateSysMetaLastModified", modified.Format()))
	}
	f, err := newForm(parts...)
	if err != nil {
		return err
	}
	return n.call(ctx, s, request{op: "MNStorage.systemMetadataChanged", method: http.MethodPost, path: "/dirtySystemMetadata",
		form: f, what: fmt.Sprintf("the change notice of %q", id)}, nil)
}
