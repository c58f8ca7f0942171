package rest

import (
	"cmp"
	"fmt"
	"io"
	"mime/multipart"
	"slices"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
)

// mnHandlers serve the member node; the optional tiers are asserted once here and
// are nil when the node lacks them.
type mnHandlers struct {
	e             *engine
	node          adapter.MemberNode
	authorization adapter.MNAuthorization
	storage       adapter.MNStorage
	replication   adapter.MNReplication
	monitor       adapter.MNMonitor
	pkg           adapter.MNPackage
	replicaSource adapter.MNReplicaSource
	publisher     adapter.MNPublish
	admin         adapter.MNAdmin
	hashes        speculation // what an object arriving before its system metadata is hashed with
}

// readPerm is the permission package members need.
const readPerm = auth.Read

func newMNHandlers(e *engine, n adapter.MemberNode) *mnHandlers {
	h := &mnHandlers{e: e, node: n}
	h.authorization, _ = n.(adapter.MNAuthorization)
	h.storage, _ = n.(adapter.MNStorage)
	h.replication, _ = n.(adapter.MNReplication)
	h.monitor, _ = n.(adapter.MNMonitor)
	h.pkg, _ = n.(adapter.MNPackage)
	h.replicaSource, _ = n.(adapter.MNReplicaSource)
	h.publisher, _ = n.(adapter.MNPublish)
	h.admin, _ = n.(adapter.MNAdmin)
	return h
}

func tierMissing(r *request) error {
	return adapter.Errorf(adapter.NotImplemented, "%s is not offered by this node's store or mapping", r.op)
}

// --- MNCore

// ping answers 200 with the Date header; ?deep=true also asks every upstream,
// and names those that do not answer.
func (h *mnHandlers) ping(r *request) error {
	if err := h.node.Ping(r); err != nil {
		return err
	}
	// A deep that is not a boolean asks for the plain ping: ping may raise no
	// InvalidRequest (API.md §3.1), and a monitor must not read a client's
	// typo as the node down.
	if deep, err := r.queryBool("deep", false); err == nil && deep {
		var down []string
		for _, u := range h.e.upstreams(r) {
			if !u.Up {
				down = append(down, fmt.Sprintf("%s (%s: %s)", u.Name, u.Breaker, u.Error))
			}
		}
		if len(down) > 0 {
			return adapter.Errorf(adapter.ServiceFailure, "upstreams not answering: %s", strings.Join(down, "; "))
		}
	}
	return r.ok()
}

func (h *mnHandlers) getCapabilities(r *request) error {
	return r.xml(h.capabilities())
}

// capabilities is the node document: identity from config, and exactly the
// services this node offers.
func (h *mnHandlers) capabilities() *adapter.Node {
	info := h.e.opts.Node
	services := []string{"MNCore", "MNRead"}
	if h.authorization != nil {
		services = append(services, "MNAuthorization")
	}
	if h.storage != nil {
		services = append(services, "MNStorage")
	}
	if h.replication != nil {
		services = append(services, "MNReplication")
	}
	if h.pkg != nil {
		services = append(services, "MNPackage")
	}
	n := nodeDocument(info, adapter.NodeTypeMN, "/mn", services, info.Replicate && h.replication != nil, info.Synchronize)
	// Services not in every version: the views (v1 and v2), the admin group
	// (v2; mnV1 and mnV2).
	yes := true
	n.Services.Service = append(n.Services.Service, adapter.Service{Name: "MNView", Version: "v1", Available: &yes},
		adapter.Service{Name: "MNView", Version: "v2", Available: &yes})
	if h.admin != nil {
		n.Services.Service = append(n.Services.Service, adapter.Service{Name: "MNAdmin", Version: "v2", Available: &yes})
	}
	return n
}

func nodeDocument(info NodeInfo, typ, rolePath string, services []string, replicate, synchronize bool) *adapter.Node {
	yes := true
	var svcs adapter.Services
	for _, name := range services {
		for _, v := range []string{"v1", "v2"} {
			svcs.Service = append(svcs.Service, adapter.Service{Name: name, Version: v, Available: &yes})
		}
	}
	n := &adapter.Node{
		Replicate: replicate, Synchronize: synchronize, Type: typ, State: adapter.NodeUp,
		Identifier: info.ID, Name: info.Name, Description: info.Description,
		BaseURL: info.BaseURL + rolePath, Services: &svcs,
		Subject: info.Subjects, ContactSubject: info.ContactSubjects,
	}
	if synchronize {
		n.Synchronization = &adapter.Synchronization{Schedule: adapter.Schedule{
			Hour: "*", Mday: "*", Min: "0/3", Mon: "*", Sec: "0", Wday: "?", Year: "*"}}
	}
	if replicate {
		n.NodeReplicationPolicy = info.ReplicationPolicy
	}
	if len(n.Subject) == 0 {
		n.Subject = []string{"CN=" + info.ID + ",DC=dataone,DC=org"}
	}
	return n
}

func (h *mnHandlers) getLogRecords(r *request) error {
	q, err := r.logQuery()
	if err != nil {
		return err
	}
	log, err := h.node.LogRecords(r, r.session, q)
	if err != nil {
		return err
	}
	if q.ReadableBy != nil { // not trusted
		redact(log, r.session)
	}
	return r.xml(log)
}

// notAuthorized stands for what a log entry's reader may not see (GMN's
// value).
const notAuthorized = "<NotAuthorized>"

// redact hides who did what from s, unless it was s: the address and the
// subject of another's event (an anonymous one included) are personal data.
// GMN redacts them for callers that are not trusted.
func redact(l *adapter.Log, s *adapter.Session) {
	for i := range l.LogEntry {
		e := &l.LogEntry[i]
		if e.Subject != adapter.SubjectPublic && e.Subject != adapter.SubjectAuthenticatedUser && s.Has(e.Subject) {
			continue
		}
		e.IPAddress, e.Subject = notAuthorized, notAuthorized
	}
}

// logQuery reads getLogRecords' parameters (v1 names the id filter pidFilter).
func (r *request) logQuery() (adapter.LogQuery, error) {
	var q adapter.LogQuery
	var err error
	if q.FromDate, q.ToDate, err = r.dateRange(); err != nil {
		return q, err
	}
	if q.Start, q.Count, err = r.paging(); err != nil {
		return q, err
	}
	q.Event = r.Query("event")
	if r.version == 1 && q.Event != "" && !slices.Contains(adapter.V1Events, q.Event) {
		return q, invalid("parameter event: %q is not a v1 event (%s)", q.Event, strings.Join(adapter.V1Events, ", "))
	}
	q.IDFilter = r.Query("idFilter")
	if r.version == 1 || q.IDFilter == "" {
		q.IDFilter = cmp.Or(r.Query("pidFilter"), q.IDFilter)
	}
	q.PIDsOnly = r.version == 1
	q.ReadableBy = r.e.opts.Authorizer.ReadableBy(r.session)
	return q, nil
}

// --- MNRead

func (h *mnHandlers) listObjects(r *request) error {
	q, err := r.listQuery()
	if err != nil {
		return err
	}
	if q.Identifier != "" && r.version == 1 {
		// v1 has no series ids: an identifier that resolves elsewhere (a SID)
		// lists nothing, nor one the caller cannot read (an upstream node
		// refuses a SID whose head is private, and listing it would give the
		// series' readable PIDs). NotFound is left to the listing: GMN does
		// not find some PIDs by path (%2F) that its listing finds. A
		// credential the upstream refused is said.
		sm, err := h.node.SystemMetadata(r, r.session, q.Identifier)
		unreadable := adapter.IsKind(err, adapter.NotAuthorized) ||
			adapter.IsKind(err, adapter.InvalidToken) && r.session.Subject == adapter.SubjectPublic
		switch {
		case err == nil && sm.Identifier == q.Identifier, adapter.IsKind(err, adapter.NotFound):
		case err == nil || unreadable:
			return r.xml(&adapter.ObjectList{Slice: adapter.Slice{Start: q.Start}})
		default:
			return err
		}
	}
	l, err := h.node.ListObjects(r, r.session, q)
	if err != nil {
		return err
	}
	return r.xml(l)
}

// listQuery reads listObjects' parameters.
func (r *request) listQuery() (adapter.ListQuery, error) {
	var q adapter.ListQuery
	var err error
	if q.FromDate, q.ToDate, err = r.dateRange(); err != nil {
		return q, err
	}
	if q.Start, q.Count, err = r.paging(); err != nil {
		return q, err
	}
	replicas, err := r.queryBool("replicaStatus", true)
	if err != nil {
		return q, err
	}
	q.ExcludeReplicas = !replicas
	q.FormatID = r.Query("formatId")
	q.Identifier = r.Query("identifier")
	if q.Identifier != "" {
		if err := adapter.CheckIdentifier(q.Identifier); err != nil {
			return q, invalid("parameter identifier: %v", err)
		}
	}
	q.NodeID = r.Query("nodeId")
	q.ReadableBy = r.e.opts.Authorizer.ReadableBy(r.session)
	return q, nil
}

func (h *mnHandlers) synchronizationFailed(r *request) error {
	var report *adapter.Exception
	err := r.eachPart(func(name string, p *multipart.Part) error {
		if name != "message" {
			return nil
		}
		var err error
		if report, err = adapter.DecodeException(io.LimitReader(p, maxDocPart)); err != nil {
			return invalid("part message: %v", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if report == nil {
		return invalid("the message part, a SynchronizationFailed error document, is missing")
	}
	if err := h.node.SynchronizationFailed(r, r.session, report); err != nil {
		return err
	}
	return r.ok()
}

// --- MNAuthorization

func (h *mnHandlers) isAuthorized(r *request) error {
	action := r.Query("action")
	perm, ok := auth.PermOf(adapter.Permission(action))
	if !ok {
		return invalid("parameter action must be read, write or changePermission, got %q", action)
	}
	r.perm = perm
	if err := r.authorize(r.id); err != nil {
		return err
	}
	return r.ok()
}

func (h *mnHandlers) setAccessPolicy(r *request) error {
	if h.authorization == nil {
		return tierMissing(r)
	}
	var policy *adapter.AccessPolicy
	var serial uint64
	err := r.eachPart(func(name string, p *multipart.Part) error {
		switch name {
		case "accessPolicy":
			policy = &adapter.AccessPolicy{}
			return readDoc(name, p, policy, adapter.InvalidRequest)
		case "serialVersion":
			return readUint(name, p, &serial)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if policy == nil {
		return invalid("the accessPolicy part is missing")
	}
	if err := adapter.CheckAccessPolicy(policy); err != nil {
		return invalid("part accessPolicy: %v", err)
	}
	if err := h.authorization.SetAccessPolicy(r, r.session, r.pid, policy, serial); err != nil {
		return err
	}
	return r.ok()
}

func readUint(name string, p io.Reader, out *uint64) error {
	s, err := readText(name, p)
	if err != nil {
		return err
	}
	if *out, err = strconv.ParseUint(s, 10, 64); err != nil {
		return invalid("part %s must be an unsigned integer, got %q", name, s)
	}
	return nil
}

func (h *mnHandlers) systemMetadataChanged(r *request) error {
	if h.authorization == nil {
		return tierMissing(r)
	}
	pid := r.id
	var serial uint64
	var modified adapter.Time
	var hasSerial bool
	err := r.eachPart(func(name string, p *multipart.Part) error {
		switch name {
		case "pid":
			s, err := readText(name, p)
			if pid == "" {
				pid = s
			}
			return err
		case "serialVersion":
			hasSerial = true
			return readUint(name, p, &serial)
		case "dateSysMetaLastModified":
			s, err := readText(name, p)
			if err != nil {
				return err
			}
			if modified, err = adapter.ParseTime(s); err != nil {
				return invalid("part %s: %v", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := adapter.CheckIdentifier(pid); err != nil {
		return invalid("part pid: %v", err)
	}
	// Without them the notice could never be newer than the replica's copy:
	// it would be answered OK and dropped.
	switch {
	case !hasSerial:
		return invalid("the serialVersion part is missing")
	case modified.IsZero():
		return invalid("the dateSysMetaLastModified part is missing")
	}
	r.pid = pid // the decisions on it are forgotten (wrap)
	if err := h.authorization.SystemMetadataChanged(r, r.session, pid, serial, modified); err != nil {
		return err
	}
	return r.ok()
}

// --- MNStorage
