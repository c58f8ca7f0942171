package rest

import (
	"cmp"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"

	"github.com/d1bridge/d1bridge/adapter"
)

// CoordinatingNode is the CN role: the member node's reads over the same catalog
// and the CN's own groups. Storage (create, delete, archive, updateSystemMetadata)
// and setAccessPolicy are asserted as the MN tiers are.
type CoordinatingNode interface {
	adapter.MemberNode
	adapter.CNCore
	adapter.CNRead
	adapter.CNAuthorization
	adapter.CNReplication
}

// cnHandlers serve the coordinating node. The operations it shares with the MN
// use the MN handlers over the CN node, under the CN's operation names.
type cnHandlers struct {
	*mnHandlers
	node CoordinatingNode
}

// nodeRegistry is the CN's registry of member nodes, when it keeps one.
type nodeRegistry interface {
	NodeSubjects(id string) []string
}

// isNode tells whether s holds a subject of the registered node id: a member
// node reporting its own replica (API.md §9 step 3; Metacat allows it).
func (h *cnHandlers) isNode(s *adapter.Session, id string) bool {
	reg, ok := h.node.(nodeRegistry)
	return ok && id != "" && slices.ContainsFunc(reg.NodeSubjects(id), s.Has)
}

func newCNHandlers(e *engine, n CoordinatingNode) *cnHandlers {
	return &cnHandlers{mnHandlers: newMNHandlers(e, n), node: n}
}

func (h *cnHandlers) getCapabilities(r *request) error {
	services := []string{"CNCore", "CNRead", "CNAuthorization", "CNReplication"}
	return r.xml(nodeDocument(h.e.opts.Node, adapter.NodeTypeCN, "/cn", services, false, false))
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

// readForm reads a multipart body: the parts named in docs are decoded into their
// values (a bad document is an exception of kind k), every other part is read as
// short text.
func (r *request) readForm(docs map[string]any, k adapter.Kind) (map[string]string, error) {
	texts := map[string]string{}
	err := r.eachPart(func(name string, p *multipart.Part) error {
		if v, ok := docs[name]; ok {
			return readDoc(name, p, v, k)
		}
		s, err := readText(name, p)
		texts[name] = s
		return err
	})
	return texts, err
}

// serialForm reads a CN setter's form: docs decoded, the serialVersion part
// required.
func (r *request) serialForm(docs map[string]any) (map[string]string, uint64, error) {
	texts, err := r.readForm(docs, adapter.InvalidRequest)
	if err != nil {
		return nil, 0, err
	}
	v, err := serialVersion(texts)
	return texts, v, err
}

// serialVersion is the CN setters' required serialVersion part.
func serialVersion(texts map[string]string) (uint64, error) {
	s, ok := texts["serialVersion"]
	if !ok {
		return 0, invalid("the serialVersion part is missing")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, invalid("part serialVersion must be an unsigned integer, got %q", s)
	}
	return v, nil
}

func (h *cnHandlers) reserveIdentifier(r *request) error {
	texts, err := r.readForm(nil, adapter.InvalidRequest)
	if err != nil {
		return err
	}
	pid := cmp.Or(r.id, texts["pid"])
	if pid == "" {
		return invalid("the pid part is missing")
	}
	if err := adapter.CheckIdentifier(pid); err != nil {
		return invalid("part pid: %v", err)
	}
	id, err := h.node.ReserveIdentifier(r, r.session, pid)
	if err != nil {
		return err
	}
	return r.xml(&adapter.Identifier{Value: id})
}

// hasReservation: GET /reserve/{id}?subject= (the spec) or /reserve/{id}/{subject}
// (what the Python client sends).
func (h *cnHandlers) hasReservation(r *request) error {
	subject := r.Query("subject")
	if s, err := r.pathParam("subject"); err == nil && s != "" {
		subject = s
	}
	if subject == "" {
		subject = r.session.Subject
	}
	if err := h.node.HasReservation(r, r.session, subject, r.id); err != nil {
		return err
	}
	return r.ok()
}

func (h *cnHandlers) generateIdentifier(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	texts, err := r.readForm(nil, adapter.InvalidRequest)
	if err != nil {
		return err
	}
	if texts["scheme"] == "" {
		return invalid("the scheme part is missing (UUID is supported)")
	}
	id, err := h.storage.GenerateIdentifier(r, r.session, texts["scheme"], texts["fragment"])
	if err != nil {
		return err
	}
	if _, err := h.node.ReserveIdentifier(r, r.session, id); err != nil && !adapter.IsKind(err, adapter.NotImplemented) {
		return err
	}
	return r.xml(&adapter.Identifier{Value: id})
}

func (h *cnHandlers) registerSystemMetadata(r *request) error {
	pid, sm, err := r.sysmetaForm()
	if err != nil {
		return err
	}
	if sm == nil {
		return invalid("the sysmeta part is missing")
	}
	// A document without an identifier is invalid system metadata (checkNew).
	pid = cmp.Or(r.id, pid, sm.Identifier)
	// registerSystemMetadata may raise neither UnsupportedType nor
	// IdentifierNotUnique (the seed's kinds): an unknown format makes the system
	// metadata invalid, an identifier in use makes the request one (they were
	// ServiceFailures).
	if err := h.checkNew(r, pid, sm); err != nil {
		return recast(err, adapter.UnsupportedType, adapter.InvalidSystemMetadata)
	}
	id, err := h.node.RegisterSystemMetadata(r, r.session, sm)
	if err != nil {
		return recast(err, adapter.IdentifierNotUnique, adapter.InvalidRequest)
	}
	return r.xml(&adapter.Identifier{Value: id})
}

// recast gives an exception of kind from the kind to, keeping its description.
func recast(err error, from, to adapter.Kind) error {
	if !adapter.IsKind(err, from) {
		return err
	}
	ex := *adapter.AsException(err)
	ex.Kind, ex.DetailCode, ex.Status = to, "", 0
	return &ex
}

func (h *cnHandlers) setObsoletedBy(r *request) error {
	texts, v, err := r.serialForm(nil)
	if err != nil {
		return err
	}
	if texts["obsoletedByPid"] == "" {
		return invalid("the obsoletedByPid part is missing")
	}
	if err := adapter.CheckIdentifier(texts["obsoletedByPid"]); err != nil {
		return invalid("part obsoletedByPid: %v", err)
	}
	if err := h.node.SetObsoletedBy(r, r.session, r.pid, texts["obsoletedByPid"], v); err != nil {
		return err
	}
	return r.ok()
}

// resolve answers the ObjectLocationList with a redirect to the first location:
// 303 for GET, 307 for HEAD, as the production CN does and DataONE clients expect.
func (h *cnHandlers) resolve(r *request) error {
	l, err := h.node.Resolve(r, r.session, r.pid)
	if err != nil {
		return err
	}
	status := http.StatusSeeOther
	if r.Request.Method == http.MethodHead {
		status = http.StatusTemporaryRedirect
	}
	r.Header("Location", l.ObjectLocation[0].URL)
	r.Header("Content-Type", "text/xml; charset=utf-8")
	r.Status(status)
	return adapter.Encode(r.Writer, l, r.version)
}

// assertRelation: GET /assertRelation/{pid}?relationship=obsoletes|obsoletedBy&pidOfObject=
// answers 200 when the relation holds and 404 when it does not.
func (h *cnHandlers) assertRelation(r *request) error {
	sm, err := r.object()
	if err != nil {
		return err
	}
	rel, other := r.Query("relationship"), r.Query("pidOfObject")
	if other == "" {
		return invalid("parameter pidOfObject is missing")
	}
	var holds bool
	switch rel {
	case "obsoletes":
		holds = sm.Obsoletes == other
	case "obsoletedBy":
		holds = sm.ObsoletedBy == other
	default:
		return invalid("relationship %q is not supported (obsoletes, obsoletedBy)", rel)
	}
	if !holds {
		return adapter.Errorf(adapter.NotFound, "%q does not %s %q", sm.Identifier, rel, other).WithPID(sm.Identifier)
	}
	return r.ok()
}

func (h *cnHandlers) setRightsHolder(r *request) error {
	texts, v, err := r.serialForm(nil)
	if err != nil {
		return err
	}
	if err := adapter.CheckSubject(texts["userId"]); err != nil {
		return invalid("part userId %v", err)
	}
	if err := h.node.SetRightsHolder(r, r.session, r.pid, texts["userId"], v); err != nil {
		return err
	}
	return r.xml(&adapter.Identifier{Value: r.pid})
}

// setAccessPolicy: PUT /accessRules/{pid} (the spec) or POST /accessRules with a
// pid part (the contract); serialVersion is required on the CN.
func (h *cnHandlers) setAccessPolicy(r *request) error {
	if h.authorization == nil {
		return tierMissing(r)
	}
	policy := &adapter.AccessPolicy{}
	texts, v, err := r.serialForm(map[string]any{"accessPolicy": policy})
	if err != nil {
		return err
	}
	if len(policy.Allow) == 0 {
		return invalid("the accessPolicy part is missing or has no rule")
	}
	if err := adapter.CheckAccessPolicy(policy); err != nil {
		return invalid("part accessPolicy: %v", err)
	}
	if r.pid == "" {
		if texts["pid"] == "" {
			return invalid("the pid part is missing")
		}
		r.id = texts["pid"]
		if err := r.authorize(r.id); err != nil {
			return err
		}
	}
	if err := h.authorization.SetAccessPolicy(r, r.session, r.pid, policy, v); err != nil {
		return err
	}
	return r.ok()
}

func (h *cnHandlers) setReplicationStatus(r *request) error {
	// A trusted route: find the object (a PID, or on v2 a SID) before the parts.
	sm, err := r.object()
	if err != nil {
		return err
	}
	pid := sm.Identifier
	failure := &adapter.Exception{}
	var hasFailure bool
	texts := map[string]string{}
	err = r.eachPart(func(name string, p *multipart.Part) error {
		if name == "failure" {
			f, err := adapter.DecodeException(io.LimitReader(p, maxDocPart))
			if err != nil {
				return invalid("part failure: %v", err)
			}
			failure, hasFailure = f, true
			return nil
		}
		s, err := readText(name, p)
		texts[name] = s
		return err
	})
	if err != nil {
		return err
	}
	if !hasFailure {
		failure = nil
	}
	if !h.e.opts.Authorizer.IsTrusted(r.session) && !h.isNode(r.session, texts["nodeRef"]) {
		return adapter.Errorf(adapter.NotAuthorized, "only a coordinating node, or the node %q itself, reports its replica", texts["nodeRef"]).WithPID(pid)
	}
	if err := h.node.SetReplicationStatus(r, r.session, pid, texts["nodeRef"], texts["status"], failure); err != nil {
		return err
	}
	return r.ok()
}

func (h *cnHandlers) updateReplicationMetadata(r *request) error {
	// A trusted route: find the object (a PID, or on v2 a SID) before the parts.
	sm, err := r.object()
	if err != nil {
		return err
	}
	pid := sm.Identifier
	replica := &adapter.Replica{}
	_, v, err := r.serialForm(map[string]any{"replicaMetadata": replica})
	if err != nil {
		return err
	}
	if err := adapter.CheckSubject(replica.ReplicaMemberNode); err != nil {
		return invalid("part replicaMetadata: replicaMemberNode %v", err)
	}
	if err := h.node.UpdateReplicationMetadata(r, r.session, pid, replica, v); err != nil {
		return err
	}
	return r.ok()
}

func (h *cnHandlers) setReplicationPolicy(r *request) error {
	var policy *adapter.ReplicationPolicy
	texts := map[string]string{}
	err := r.eachPart(func(name string, p *multipart.Part) error {
		if name == "policy" {
			policy = &adapter.ReplicationPolicy{}
			return readDoc(name, p, policy, adapter.InvalidRequest)
		}
		s, err := readText(name, p)
		texts[name] = s
		return err
	})
	if err != nil {
		return err
	}
	v, err := serialVersion(texts)
	if err != nil {
		return err
	}
	// Without the policy part the object's policy was replaced by an empty one.
	if policy == nil {
		return invalid("the policy part, a replicationPolicy document, is missing")
	}
	if err := adapter.CheckReplicationPolicy(policy); err != nil {
		return invalid("part policy: %v", err)
	}
	if err := h.node.SetReplicationPolicy(r, r.session, r.pid, policy, v); err != nil {
		return err
	}
	return r.ok()
}

func (h *cnHandlers) isNodeAuthorized(r *request) error {
	target := r.Query("targetNodeSubject")
	if target == "" {
		return invalid("parameter targetNodeSubject is missing")
	}
	if err := h.node.IsNodeAuthorized(r, r.session, target, r.id); err != nil {
		return err
	}
	return r.ok()
}

func (h *cnHandlers) deleteReplicationMetadata(r *request) error {
	// A trusted route: find the object (a PID, or on v2 a SID) before the parts.
	sm, err := r.object()
	if err != nil {
		return err
	}
	pid := sm.Identifier
	texts, v, err := r.serialForm(nil)
	if err != nil {
		return err
	}
	if texts["nodeId"] == "" {
		return invalid("the nodeId part is missing")
	}
	if err := h.node.DeleteReplicationMetadata(r, r.session, pid, texts["nodeId"], v); err != nil {
		return err
	}
	return r.ok()
}

// synchronize (v2): an MN asks for its object to be harvested now. The CN reads
// the catalog the MN writes, so a known object is already synchronized.
func (h *cnHandlers) synchronize(r *request) error {
	texts, err := r.readForm(nil, adapter.InvalidRequest)
	if err != nil {
		return err
	}
	// The object's authoritative member node asks (API.md §4), or a CN; no
	// one else learns whether the object exists.
	trusted := r.e.opts.Authorizer.IsTrusted(r.session)
	if reg, ok := h.node.(replicaGate); !trusted && (!ok || !reg.IsRegisteredNode(r.session)) {
		return adapter.Errorf(adapter.NotAuthorized, "%s is neither a registered member node nor a coordinating node", r.session.Subject)
	}
	sm, err := h.node.SystemMetadata(r, r.session, texts["pid"])
	if err != nil {
		if adapter.IsKind(err, adapter.NotFound) {
			return invalid("no object %q to synchronize", texts["pid"])
		}
		return err
	}
	if !trusted && !h.isNode(r.session, sm.AuthoritativeMemberNode) {
		return adapter.Errorf(adapter.NotAuthorized, "%s is not the authoritative member node of %q (%s) nor a coordinating node",
			r.session.Subject, sm.Identifier, sm.AuthoritativeMemberNode).WithPID(sm.Identifier)
	}
	return r.ok()
}
