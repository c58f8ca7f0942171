package rest

import (
	"net/http"

	"github.com/d1bridge/d1bridge/adapter"
)

// publish mints a DOI for a new version of :id (Metacat's PUT /publish/{pid}).
func (h *mnHandlers) publish(r *request) error {
	if h.publisher == nil {
		return tierMissing(r)
	}
	id, err := r.pathParam("id")
	if err != nil {
		return err
	}
	newID, err := h.publisher.Publish(r, r.session, id)
	if err != nil {
		return err
	}
	return r.xml(&adapter.Identifier{Value: newID})
}

// publishIdentifier makes a registered DOI public at the identifier service.
func (h *mnHandlers) publishIdentifier(r *request) error {
	if h.publisher == nil {
		return tierMissing(r)
	}
	id, err := r.pathParam("id")
	if err != nil {
		return err
	}
	got, err := h.publisher.PublishIdentifier(r, r.session, id)
	if err != nil {
		return err
	}
	h.e.opts.Authorizer.Invalidate(id, got) // it may have made the object public
	return r.xml(&adapter.Identifier{Value: got})
}

func (h *mnHandlers) reindex(r *request) error {
	if h.admin == nil {
		return tierMissing(r)
	}
	q, err := r.adminQuery()
	if err != nil {
		return err
	}
	if err := h.admin.Reindex(r, r.session, q); err != nil {
		return err
	}
	return r.ok()
}

func (h *mnHandlers) updateIdMetadata(r *request) error {
	if h.admin == nil {
		return tierMissing(r)
	}
	q, err := r.adminQuery()
	if err != nil {
		return err
	}
	if err := h.admin.UpdateIDMetadata(r, r.session, q); err != nil {
		return err
	}
	return r.ok()
}

// adminQuery reads the selection of a batch admin operation, as Metacat takes
// it: the path's pid, repeated pid parameters, or filters (formatId, fromDate,
// toDate), or all=true.
func (r *request) adminQuery() (adapter.AdminQuery, error) {
	var q adapter.AdminQuery
	if r.Param("id") != "" {
		id, err := r.pathParam("id")
		if err != nil {
			return q, err
		}
		q.PIDs = []string{id}
	}
	q.PIDs = append(q.PIDs, r.QueryArray("pid")...)
	for _, p := range q.PIDs {
		if err := adapter.CheckIdentifier(p); err != nil {
			return q, adapter.Errorf(adapter.InvalidRequest, "pid: %v", err).WithPID(p)
		}
	}
	var err error
	if q.FromDate, q.ToDate, err = r.dateRange(); err != nil {
		return q, err
	}
	if q.All, err = r.queryBool("all", false); err != nil {
		return q, err
	}
	q.FormatID = r.Query("formatId")
	filtered := q.FormatID != "" || !q.FromDate.IsZero() || !q.ToDate.IsZero()
	switch {
	case len(q.PIDs) > 0 && (filtered || q.All):
		return q, invalid("select objects by pid or by filters (formatId, fromDate, toDate, all), not both")
	case len(q.PIDs) == 0 && !filtered && !q.All:
		return q, invalid("nothing selected: give a pid, pid parameters, filters (formatId, fromDate, toDate) or all=true")
	}
	return q, nil
}

// token issues a bearer token for the caller's session (Metacat's GET /token).
func (h *mnHandlers) token(r *request) error {
	if h.e.opts.Tokens == nil {
		return adapter.Errorf(adapter.NotImplemented, "this node issues no tokens: auth.signingKey is not set")
	}
	tok, err := h.e.opts.Tokens(r.session)
	if err != nil {
		return err
	}
	r.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(tok))
	return nil
}
