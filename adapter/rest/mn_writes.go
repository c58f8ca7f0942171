package rest

// The member node's writes (MNStorage): create, update, delete, archive,
// updateSystemMetadata and generateIdentifier, and the multipart form that
// create and update read.

import (
	"cmp"
	"maps"
	"mime/multipart"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
)

// objectForm is the multipart body of create and update.
type objectForm struct {
	pid, newPid string
	sm          *adapter.SystemMetadata
	upload      *adapter.Upload
}

// readObjectForm streams a create or update body: the object is staged (counted,
// hashed, size-limited) as it arrives, whatever the order of the parts.
func (h *mnHandlers) readObjectForm(r *request) (*objectForm, error) {
	f := &objectForm{}
	err := r.eachPart(func(name string, p *multipart.Part) error {
		var err error
		switch name {
		case "pid":
			f.pid, err = readText(name, p)
		case "newPid":
			f.newPid, err = readText(name, p)
		case "sysmeta":
			f.sm = &adapter.SystemMetadata{}
			err = readDoc(name, p, f.sm, adapter.InvalidSystemMetadata)
		case "object":
			if f.upload != nil {
				return invalid("the body has more than one object part")
			}
			algs := h.hashes.algorithms()
			if f.sm != nil {
				algs = []string{f.sm.Checksum.Algorithm}
			}
			body := &uploadLimit{r: p, left: h.e.opts.MaxUploadSize, max: h.e.opts.MaxUploadSize}
			f.upload, err = h.storage.Stage(r, body, algs)
		}
		return err
	})
	if err == nil {
		switch {
		case f.sm == nil:
			err = invalid("the sysmeta part, the object's system metadata, is missing")
		case f.upload == nil:
			err = invalid("the object part, the object's bytes, is missing")
		}
	}
	if err != nil {
		h.discard(r, f.upload)
		return nil, err
	}
	h.hashes.observe(f.sm.Checksum.Algorithm)
	return f, nil
}

func (h *mnHandlers) discard(r *request, u *adapter.Upload) {
	if u != nil {
		if err := h.storage.Discard(r, u); err != nil {
			h.e.log.Error("discarding a staged upload", "ref", u.Ref, "err", err)
		}
	}
}

// checkNew applies the checks every new object's system metadata gets at the edge.
func (h *mnHandlers) checkNew(r *request, pid string, sm *adapter.SystemMetadata) error {
	if err := adapter.CheckIdentifier(pid); err != nil {
		return adapter.Errorf(adapter.InvalidRequest, "%v", err).WithPID(pid)
	}
	if sm.Identifier != pid {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the system metadata identifier %q differs from the pid %q", sm.Identifier, pid).WithPID(pid)
	}
	if err := adapter.CheckSystemMetadata(sm); err != nil {
		return err
	}
	if _, ok := h.e.opts.Formats.Lookup(sm.FormatID); !ok {
		return adapter.Errorf(adapter.UnsupportedType, "formatId %q is not in the DataONE object format list", sm.FormatID).WithPID(pid)
	}
	// A v2 document sent to /v1/ passes the decoder; its series id would
	// give v1 what it does not have.
	if r.version == 1 && sm.SeriesID != "" {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "seriesId %q: API v1 has no series identifiers; use /v2/", sm.SeriesID).WithPID(pid)
	}
	return nil
}

func (h *mnHandlers) create(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	f, err := h.readObjectForm(r)
	if err != nil {
		return err
	}
	pid := cmp.Or(r.id, f.pid)
	if r.id != "" && f.pid != "" && f.pid != r.id {
		err = invalid("the pid part %q differs from the identifier in the path %q", f.pid, r.id)
	} else if pid == "" {
		err = invalid("the pid part is missing")
	} else {
		err = h.checkNew(r, pid, f.sm)
	}
	if err != nil {
		h.discard(r, f.upload)
		return err
	}
	r.id = pid
	sm, err := h.storage.Create(r, r.session, f.sm, f.upload)
	if err != nil {
		return err // Create keeps nothing when it fails
	}
	return r.xml(&adapter.Identifier{Value: sm.Identifier})
}

func (h *mnHandlers) update(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	f, err := h.readObjectForm(r)
	if err != nil {
		return err
	}
	if f.newPid == "" {
		err = invalid("the newPid part is missing")
	} else {
		err = h.checkNew(r, f.newPid, f.sm)
	}
	if err == nil && f.sm.Obsoletes != "" && f.sm.Obsoletes != r.pid {
		err = adapter.Errorf(adapter.InvalidSystemMetadata, "obsoletes is %q, but the object being updated is %q", f.sm.Obsoletes, r.pid)
	}
	if err != nil {
		h.discard(r, f.upload)
		return err
	}
	sm, err := h.storage.Update(r, r.session, r.pid, f.sm, f.upload)
	if err != nil {
		return err // Update keeps nothing when it fails
	}
	return r.xml(&adapter.Identifier{Value: sm.Identifier})
}

func (h *mnHandlers) delete(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	sm, err := r.object()
	if err != nil {
		return err
	}
	pid, err := h.storage.Delete(r, r.session, sm.Identifier)
	if err != nil {
		return err
	}
	return r.xml(&adapter.Identifier{Value: pid})
}

func (h *mnHandlers) archive(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	pid, err := h.storage.Archive(r, r.session, r.pid)
	if err != nil {
		return err
	}
	return r.xml(&adapter.Identifier{Value: pid})
}

// sysmetaForm reads the pid and sysmeta parts of the forms of
// updateSystemMetadata and registerSystemMetadata; sm is nil without a
// sysmeta part.
func (r *request) sysmetaForm() (pid string, sm *adapter.SystemMetadata, err error) {
	err = r.eachPart(func(name string, p *multipart.Part) error {
		var err error
		switch name {
		case "pid":
			pid, err = readText(name, p)
		case "sysmeta":
			sm = &adapter.SystemMetadata{}
			err = readDoc(name, p, sm, adapter.InvalidSystemMetadata)
		}
		return err
	})
	return pid, sm, err
}

func (h *mnHandlers) updateSystemMetadata(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	pid, sm, err := r.sysmetaForm()
	if err != nil {
		return err
	}
	if sm == nil {
		return invalid("the sysmeta part is missing")
	}
	pid = cmp.Or(pid, sm.Identifier)
	if err := adapter.CheckIdentifier(pid); err != nil {
		return invalid("part pid: %v", err)
	}
	if sm.Identifier != pid {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the system metadata identifier %q differs from the pid %q", sm.Identifier, pid)
	}
	if err := adapter.CheckSystemMetadata(sm); err != nil {
		return err
	}
	r.id = pid
	if err := r.authorize(pid); err != nil {
		if adapter.IsKind(err, adapter.NotFound) {
			return invalid("no object %q on this node to update", pid)
		}
		return err
	}
	if r.pid != pid {
		return invalid("updateSystemMetadata takes a PID; %q is a series id", pid)
	}
	if _, ok := h.e.opts.Formats.Lookup(sm.FormatID); !ok {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "formatId %q is not in the DataONE object format list", sm.FormatID)
	}
	// The route needs write; what setAccessPolicy and archive need
	// changePermission for needs it here too (Metacat's rule), or write would
	// let its holder take the object over. The update is of the system metadata
	// read here: the node refuses it if the stored one changed since
	// (dateSysMetadataModified).
	if changed := controlChanges(r.meta, sm); len(changed) > 0 {
		doing := "changing " + strings.Join(changed, " and ") + " through updateSystemMetadata"
		if err := h.e.opts.Authorizer.CheckFor(r, r.session, auth.ChangePermission, r.meta, doing); err != nil {
			return err
		}
	}
	if err := h.storage.UpdateSystemMetadata(r, r.session, sm); err != nil {
		return err
	}
	return r.ok()
}

func (h *mnHandlers) generateIdentifier(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	var scheme, fragment string
	err := r.eachPart(func(name string, p *multipart.Part) error {
		var err error
		switch name {
		case "scheme":
			scheme, err = readText(name, p)
		case "fragment":
			fragment, err = readText(name, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	if scheme == "" {
		return invalid("the scheme part is missing (UUID is supported)")
	}
	id, err := h.storage.GenerateIdentifier(r, r.session, scheme, fragment)
	if err != nil {
		return err
	}
	return r.xml(&adapter.Identifier{Value: id})
}

// controlChanges names what next changes of cur's control of the object: the
// rightsHolder, the access policy (the level it grants each subject: the same
// grants in another order or rule shape are no change) and archiving.
func controlChanges(cur, next *adapter.SystemMetadata) []string {
	var changed []string
	if next.RightsHolder != cur.RightsHolder {
		changed = append(changed, "the rightsHolder")
	}
	if !maps.Equal(grants(cur.AccessPolicy), grants(next.AccessPolicy)) {
		changed = append(changed, "the accessPolicy")
	}
	if next.Archived && !cur.Archived {
		changed = append(changed, "archived")
	}
	return changed
}

// grants is the highest level p grants each subject it names.
func grants(p *adapter.AccessPolicy) map[string]int {
	g := map[string]int{}
	if p == nil {
		return g
	}
	for _, rule := range p.Allow {
		for _, s := range rule.Subject {
			for _, perm := range rule.Permission {
				g[s] = max(g[s], perm.Level())
			}
		}
	}
	return g
}
