package dataone

import (
	"context"
	"fmt"
	"io"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

// checkPackage is the front's own check of getPackage with forward none: the
// caller must be able to read the resource map and every object it aggregates
// that the upstream has (an absent one is left out of the bag, as GMN does).
// canRead tells a trusted caller, who reads everything, from the others: only
// the former may read an object with no rights holder and no access rule;
// for it the upstream's answer is enough. Every read is the bridge's: one
// system metadata call per member, plus the resource map itself.
func (n *Node) checkPackage(ctx context.Context, s *adapter.Session, id string, canRead func(*adapter.SystemMetadata) bool) error {
	if canRead == nil {
		return adapter.Errorf(adapter.ServiceFailure, "getPackage on upstream %q was called without a read check", n.c.Name())
	}
	if canRead(&adapter.SystemMetadata{}) {
		return nil
	}
	subject := adapter.SubjectPublic
	if s != nil && s.Subject != "" {
		subject = s.Subject
	}
	refuse := func(what string) error {
		if subject == adapter.SubjectPublic {
			return adapter.Errorf(adapter.InvalidToken, "no credential was presented; reading %s needs read permission", what).WithPID(id)
		}
		return adapter.Errorf(adapter.NotAuthorized, "%s may not read %s", subject, what).WithPID(id)
	}
	mapMeta, err := n.SystemMetadata(ctx, nil, id)
	if err != nil {
		return err
	}
	if !canRead(mapMeta) {
		return refuse(fmt.Sprintf("the resource map %q", mapMeta.Identifier))
	}
	// A document read before the answer starts: bounded as one (Get streams).
	rctx, cancel := n.c.WithTimeout(ctx)
	defer cancel()
	obj, err := n.Get(rctx, nil, mapMeta.Identifier)
	if err != nil {
		return err
	}
	body := &adapter.ReadFailure{R: io.LimitReader(obj.Body, datapackage.MaxForeignResourceMap)}
	pids, err := datapackage.Aggregated(body)
	obj.Body.Close()
	switch {
	case body.Err != nil:
		return adapter.Wrap(adapter.ServiceFailure, body.Err, "reading the resource map %q from upstream %q failed", mapMeta.Identifier, n.c.Name()).WithPID(id)
	case err != nil:
		return adapter.Errorf(adapter.InvalidRequest, "the resource map %q cannot be read: %v", mapMeta.Identifier, err).WithPID(id)
	}
	for _, pid := range pids {
		if pid == mapMeta.Identifier {
			continue
		}
		sm, err := n.SystemMetadata(ctx, nil, pid)
		switch {
		case adapter.IsKind(err, adapter.NotFound):
			continue
		case err != nil:
			return err
		case !canRead(sm):
			return refuse(fmt.Sprintf("%q, a member of the package %q", pid, mapMeta.Identifier))
		}
	}
	return nil
}
