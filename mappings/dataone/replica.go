package dataone

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/d1bridge/d1bridge/adapter"
)

var (
	_ adapter.MNReplication   = (*Node)(nil)
	_ adapter.MNReplicaSource = (*Node)(nil)
	_ adapter.MNPackage       = (*Node)(nil)
)

// GetReplica forwards getReplica: the upstream logs the replicate event and
// decides whether the (forwarded) caller may replicate.
func (n *Node) GetReplica(ctx context.Context, s *adapter.Session, pid string) (*adapter.Object, error) {
	sm, err := n.SystemMetadata(ctx, s, pid)
	if err != nil {
		return nil, err
	}
	resp, err := n.do(ctx, s, request{op: "MNReplication.getReplica", method: http.MethodGet,
		path: "/replica/" + adapter.EscapeIdentifier(pid), what: fmt.Sprintf("the replica of %q", pid), stream: true})
	if err != nil {
		return nil, err
	}
	return &adapter.Object{Meta: sm, Body: resp.Body}, nil
}

// Replicate forwards replicate: the upstream checks the request, queues the
// copy and reports it to its coordinating node.
func (n *Node) Replicate(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, sourceNode string) error {
	doc, err := docPart("sysmeta", sm)
	if err != nil {
		return err
	}
	f, err := newForm(doc, textPart("sourceNode", sourceNode))
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "building the body for upstream %q", n.c.Name())
	}
	return n.call(ctx, s, request{op: "MNReplication.replicate", method: http.MethodPost, path: "/replicate",
		form: f, what: fmt.Sprintf("the replication of %q", sm.Identifier)}, nil)
}

// Package forwards getPackage. The upstream resolves the resource map and
// checks it, with the forwarded identity, before its first byte, so an answer
// that starts well is streamed through as it comes. With forward none the
// upstream would check it for the bridge, and GMN 3.5.2 checks no member at
// all: for a caller the front does not trust, the front first checks canRead
// on the resource map and on every object it aggregates (package.go).
func (n *Node) Package(ctx context.Context, s *adapter.Session, packageType, id string, canRead func(*adapter.SystemMetadata) bool) (*adapter.Package, error) {
	if n.o.Forward == ForwardNone {
		if err := n.checkPackage(ctx, s, id, canRead); err != nil {
			return nil, err
		}
	}
	resp, err := n.do(ctx, s, request{op: "MNPackage.getPackage", method: http.MethodGet,
		path: "/packages/" + adapter.EscapeIdentifier(packageType) + "/" + adapter.EscapeIdentifier(id), what: fmt.Sprintf("the package %q", id), stream: true})
	if err != nil {
		return nil, err
	}
	name := id + ".zip"
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		name = params["filename"]
	}
	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = "application/zip"
	}
	return &adapter.Package{
		Name: name, ContentType: ctype,
		Write: func(ctx context.Context, w io.Writer) error {
			defer resp.Body.Close()
			if _, err := io.Copy(w, resp.Body); err != nil {
				return n.c.Error(err, fmt.Sprintf("the package %q", id))
			}
			return nil
		},
		Close: resp.Body.Close,
	}, nil
}
