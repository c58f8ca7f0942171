package rest

import (
	"net/http"
	"strconv"

	"github.com/d1bridge/d1bridge/adapter"
)

// listViews: GET /views (v1, v2) → the themes view accepts: only default, which
// serves the object itself with its media type.
func (h *mnHandlers) listViews(r *request) error {
	return r.xml(&adapter.OptionList{Key: "theme", Description: "The themes MNView.view renders objects with.",
		Option: []string{"default"}})
}

// view: GET /views/{theme}/{id} (v1, v2). An unknown theme renders as default,
// never an error (API.md §3.1); default is the object as stored.
func (h *mnHandlers) view(r *request) error {
	obj, err := h.node.Get(r, r.session, r.pid)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	if r.Request.Method == http.MethodHead {
		// net/http discards a HEAD's body: copying it would read the object to its end for nothing.
		hd := r.Writer.Header()
		hd["Content-Type"] = []string{mediaType(obj.Meta, h.e.opts.Formats)}
		hd["Content-Length"] = []string{strconv.FormatUint(obj.Meta.Size, 10)}
		r.Status(http.StatusOK)
		return nil
	}
	r.DataFromReader(http.StatusOK, int64(obj.Meta.Size), mediaType(obj.Meta, h.e.opts.Formats), obj.Body, nil)
	return nil
}

// whoami: GET /whoami (v2) → the caller's session: its primary subject. The
// groups and equivalent identities it acts as are not listed: SubjectInfo
// would need names and group owners the node does not know.
func (h *mnHandlers) whoami(r *request) error {
	return r.xml(&adapter.SessionDoc{Subject: r.session.Subject})
}
