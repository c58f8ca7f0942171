package dataone

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/d1bridge/d1bridge/adapter"
)

// Publishing and the admin group are forwarded as they are: the upstream
// (Metacat, or a d1bridge with an identifier service) mints the DOIs and
// reindexes its own store.
var (
	_ adapter.MNPublish = (*Node)(nil)
	_ adapter.MNAdmin   = (*Node)(nil)
)

// Publish forwards to the upstream's PUT /publish/{pid}.
func (n *Node) Publish(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return n.identifier(ctx, s, request{op: "MNStorage.publish", method: http.MethodPut, path: "/publish/" + adapter.EscapeIdentifier(id),
		what: fmt.Sprintf("the publishing of %q", id)})
}

// PublishIdentifier forwards to the upstream's PUT /publishIdentifier/{id}.
func (n *Node) PublishIdentifier(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return n.identifier(ctx, s, request{op: "MNStorage.publishIdentifier", method: http.MethodPut,
		path: "/publishIdentifier/" + adapter.EscapeIdentifier(id), what: fmt.Sprintf("the publishing of identifier %q", id)})
}

// Reindex forwards to the upstream's PUT /index.
func (n *Node) Reindex(ctx context.Context, s *adapter.Session, q adapter.AdminQuery) error {
	return n.call(ctx, s, adminRequest("MNAdmin.reindex", "/index", "the reindex", q), nil)
}

// UpdateIDMetadata forwards to the upstream's PUT /identifiers.
func (n *Node) UpdateIDMetadata(ctx context.Context, s *adapter.Session, q adapter.AdminQuery) error {
	return n.call(ctx, s, adminRequest("MNAdmin.updateIdMetadata", "/identifiers", "the identifier metadata update", q), nil)
}

// adminRequest is the admin call at path selecting q: one pid in the path,
// several as pid parameters, or the filters.
func adminRequest(op, path, what string, q adapter.AdminQuery) request {
	query := url.Values{}
	switch {
	case len(q.PIDs) == 1:
		path += "/" + adapter.EscapeIdentifier(q.PIDs[0])
		what += fmt.Sprintf(" of %q", q.PIDs[0])
	case len(q.PIDs) > 1:
		query["pid"] = q.PIDs
	}
	if q.FormatID != "" {
		query.Set("formatId", q.FormatID)
	}
	setTime(query, "fromDate", q.FromDate)
	setTime(query, "toDate", q.ToDate)
	if q.All {
		query.Set("all", "true")
	}
	return request{op: op, method: http.MethodPut, path: path, query: query, what: what}
}
