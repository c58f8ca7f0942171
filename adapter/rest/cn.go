package rest

import (
	"github.com/d1bridge/d1bridge/adapter"
)

// cnHandlers serve the coordinating node.
type cnHandlers struct {
	e    *engine
	node CoordinatingNode
}

func (h *cnHandlers) ping(r *request) error {
	if err := h.node.Ping(r); err != nil {
		return err
	}
	return r.ok()
}

func (h *cnHandlers) getCapabilities(r *request) error {
	info := h.e.opts.Node
	services := []string{"CNCore"}
	return r.xml(nodeDocument(info, adapter.NodeTypeCN, "/cn", services, false, false))
}

func (h *cnHandlers) listFormats(r *request) error { return r.xml(h.e.opts.Formats.List()) }

func (h *cnHandlers) getFormat(r *request) error {
	id, err := r.pathParam("formatId")
	if err != nil {
		return err
	}
	f, ok := h.e.opts.Formats.Lookup(id)
	if !ok {
		return adapter.Errorf(adapter.NotFound, "no object format %q", id)
	}
	return r.xml(f)
}

func (h *cnHandlers) listChecksumAlgorithms(r *request) error {
	return r.xml(&adapter.ChecksumAlgorithmList{Algorithm: adapter.ChecksumAlgorithms})
}

// notImplementedForGood answers the operations the seed leaves out of the CN:
// listNodes, search, and the identity and registration groups.
func (h *cnHandlers) notImplementedForGood(r *request) error {
	return adapter.Errorf(adapter.NotImplemented, "%s is not implemented by this coordinating node", r.op)
}
