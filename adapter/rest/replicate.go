package rest

import (
	"mime/multipart"

	"github.com/d1bridge/d1bridge/adapter"
)

// replicate: POST /replicate with parts sysmeta (the CN's system metadata of the
// object) and sourceNode (the node to pull it from). The node checks the request
// and queues the copy; 200 means the job was accepted, not that it is done
// (API.md §3.4, §9).
func (h *mnHandlers) replicate(r *request) error {
	if h.replication == nil {
		return tierMissing(r)
	}
	var sm *adapter.SystemMetadata
	var source string
	err := r.eachPart(func(name string, p *multipart.Part) error {
		var err error
		switch name {
		case "sysmeta":
			sm = &adapter.SystemMetadata{}
			// replicate may not raise InvalidSystemMetadata: a bad document is
			// a bad request.
			err = readDoc(name, p, sm, adapter.InvalidRequest)
		case "sourceNode":
			source, err = readText(name, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	if sm == nil {
		return invalid("the sysmeta part, the object's system metadata, is missing")
	}
	if source == "" {
		return invalid("the sourceNode part, the node to copy the object from, is missing")
	}
	if err := adapter.CheckIdentifier(sm.Identifier); err != nil {
		return invalid("sysmeta identifier: %v", err)
	}
	r.id = sm.Identifier
	if _, ok := h.e.opts.Formats.Lookup(sm.FormatID); !ok {
		return adapter.Errorf(adapter.UnsupportedType, "formatId %q is not in the DataONE object format list", sm.FormatID).WithPID(sm.Identifier)
	}
	if err := h.replication.Replicate(r, r.session, sm, source); err != nil {
		return err
	}
	return r.ok()
}
