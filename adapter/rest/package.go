package rest

import (
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// getPackage streams a data package as a BagIt zip. Every member is found and
// its read permission checked before the first byte; a failure after that
// aborts the connection, so a client never takes a truncated zip for whole.
func (h *mnHandlers) getPackage(r *request) error {
	if h.pkg == nil {
		return tierMissing(r)
	}
	packageType, id, err := r.packageParams()
	if err != nil {
		return err
	}
	r.id = id
	canRead := func(sm *adapter.SystemMetadata) bool {
		return h.e.opts.Authorizer.Allowed(r.session, readPerm, sm)
	}
	p, err := h.pkg.Package(r, r.session, packageType, id, canRead)
	if err != nil {
		return err
	}
	if p.Close != nil {
		defer p.Close()
	}
	r.Header("Content-Type", p.ContentType)
	r.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": p.Name}))
	r.Status(http.StatusOK)
	if r.Request.Method == http.MethodHead {
		return nil
	}
	if err := p.Write(r, r.Writer); err != nil {
		h.e.log.Error("package stream failed after its start; aborting the response", "pid", id, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// packageParams reads the package type and the resource map id: v2 and the
// spec's v1 1.2 form give /packages/{type}/{id}; Metacat's v1 form gives
// /packages/{id}, with BagIt 0.97.
func (r *request) packageParams() (string, string, error) {
	rest := strings.TrimPrefix(r.Param("rest"), "/")
	segs := []string{r.Param("type"), r.Param("id")}
	if rest != "" {
		segs = strings.SplitN(rest, "/", 2)
		if len(segs) == 1 {
			segs = []string{adapter.PackageBagIt097, segs[0]}
		}
	}
	var out [2]string
	for i, seg := range segs {
		v, err := unescape(seg)
		if err != nil {
			return "", "", err
		}
		out[i] = v
	}
	if err := adapter.CheckIdentifier(out[1]); err != nil {
		return "", "", invalid("%v", err)
	}
	return out[0], out[1], nil
}

// getReplica streams an object to a replicating node (trusted callers).
func (h *mnHandlers) getReplica(r *request) error {
	if h.replicaSource == nil {
		return tierMissing(r)
	}
	if r.version == 1 {
		// A trusted route looks nothing up before: v1's rule that a series
		// id is an unknown PID is applied here.
		if _, err := r.lookup(r.id); err != nil {
			return err
		}
	}
	obj, err := h.replicaSource.GetReplica(r, r.session, r.id)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	h.objectHeaders(r, obj.Meta)
	r.DataFromReader(http.StatusOK, int64(obj.Meta.Size), mediaType(obj.Meta, h.e.opts.Formats), io.NopCloser(obj.Body), nil)
	return nil
}
