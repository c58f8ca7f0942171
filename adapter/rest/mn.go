package rest

import (
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
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
	deep, err := r.queryBool("deep", false)
	if err != nil {
		return err
	}
	if deep {
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
	// Services served in one version only: the views in v1, the admin group
	// in v2 (mnV1 and mnV2).
	yes := true
	n.Services.Service = append(n.Services.Service, adapter.Service{Name: "MNView", Version: "v1", Available: &yes})
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
	return r.xml(log)
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
	if r.version == 1 && q.Event != "" && !slicesContains(adapter.V1Events, q.Event) {
		return q, invalid("parameter event: %q is not a v1 event (%s)", q.Event, strings.Join(adapter.V1Events, ", "))
	}
	q.IDFilter = r.Query("idFilter")
	if r.version == 1 || q.IDFilter == "" {
		q.IDFilter = firstNonEmpty(r.Query("pidFilter"), q.IDFilter)
	}
	q.PIDsOnly = r.version == 1
	q.ReadableBy = r.e.opts.Authorizer.ReadableBy(r.session)
	return q, nil
}

// --- MNRead

func (h *mnHandlers) get(r *request) error {
	obj, err := h.node.Get(r, r.session, r.pid)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	sm := obj.Meta
	h.objectHeaders(r, sm)
	hd := r.Writer.Header()
	hd["Content-Disposition"] = []string{contentDisposition(sm, h.e.opts.Formats)}
	rs, seekable := obj.Body.(io.ReadSeeker)
	if seekable && sm.Size >= sendfileFrom {
		r.Writer = &fileWriter{ResponseWriter: r.Writer}
	} else {
		r.Writer = bufferedWriter{r.Writer}
	}
	if seekable {
		// Ranges and conditional requests come with a seekable store (RFC 9110: see serveRanged).
		hd[hETag] = []string{`"` + strings.ToLower(sm.Checksum.Value) + `"`}
		serveRanged(r.Writer, r.Request, sm.DateSysMetadataModified.Time, rs)
		return nil
	}
	r.DataFromReader(http.StatusOK, int64(sm.Size), r.Writer.Header().Get("Content-Type"), obj.Body, nil)
	return nil
}

// objectHeaders are describe's headers (API.md §5.2), also sent on get. They
// are set by their canonical names (what net/http writes anyway), which spares
// canonicalizing each on every request.
func (h *mnHandlers) objectHeaders(r *request, sm *adapter.SystemMetadata) {
	hd := r.Writer.Header()
	// Every value in one backing array: one allocation, not one per header.
	vals := make([]string, 0, 10)
	set := func(name, v string) {
		vals = append(vals, v)
		hd[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set("Content-Type", mediaType(sm, h.e.opts.Formats))
	set("Content-Length", strconv.FormatUint(sm.Size, 10))
	set("Last-Modified", sm.DateSysMetadataModified.UTC().Format(http.TimeFormat))
	set(hFormatID, sm.FormatID)
	set(hObjectFormat, sm.FormatID)
	set(hChecksum, sm.Checksum.Algorithm+","+sm.Checksum.Value)
	set(hSerialVersion, strconv.FormatUint(sm.SerialVersion, 10))
	if sm.SeriesID != "" && r.version > 1 {
		set(hSeriesID, url.PathEscape(sm.SeriesID))
	}
	if sm.Obsoletes != "" {
		set(hObsoletes, url.PathEscape(sm.Obsoletes))
	}
	if sm.ObsoletedBy != "" {
		set(hObsoletedBy, url.PathEscape(sm.ObsoletedBy))
	}
}

// The canonical names of describe's DataONE headers, and of ETag.
var (
	hFormatID      = http.CanonicalHeaderKey("DataONE-FormatId")
	hObjectFormat  = http.CanonicalHeaderKey("DataONE-ObjectFormat")
	hChecksum      = http.CanonicalHeaderKey("DataONE-Checksum")
	hSerialVersion = http.CanonicalHeaderKey("DataONE-SerialVersion")
	hSeriesID      = http.CanonicalHeaderKey("DataONE-SeriesId")
	hObsoletes     = http.CanonicalHeaderKey("DataONE-Obsoletes")
	hObsoletedBy   = http.CanonicalHeaderKey("DataONE-ObsoletedBy")
	hETag          = http.CanonicalHeaderKey("ETag")
)

// mediaType is the object's media type: sysmeta v2 mediaType (with a charset
// property), else the format's, else application/octet-stream (as Metacat).
func mediaType(sm *adapter.SystemMetadata, f *adapter.Formats) string {
	if sm.MediaType != nil && sm.MediaType.Name != "" {
		mt := sm.MediaType.Name
		for _, p := range sm.MediaType.Property {
			if strings.EqualFold(p.Name, "charset") && p.Value != "" {
				mt += "; charset=" + p.Value
			}
		}
		return mt
	}
	return f.MediaType(sm.FormatID)
}

// contentDisposition names the download: the sysmeta fileName, else the PID with
// the format's extension.
func contentDisposition(sm *adapter.SystemMetadata, f *adapter.Formats) string {
	name := sm.FileName
	if name == "" {
		name = sm.Identifier
		if o, ok := f.Lookup(sm.FormatID); ok && o.Extension != "" {
			name += "." + o.Extension
		}
	}
	// mime.FormatMediaType quotes an ASCII name and RFC 2231-encodes any other,
	// escaping what a token may not hold. url.PathEscape is not that encoding:
	// it leaves ':', '=' and '@' bare, so "urn:uuid:…" made a header that
	// strict parsers (Go's mime, Python's email) reject.
	if cd, ok := printableAttachment(name); ok {
		return cd
	}
	if cd := mime.FormatMediaType("attachment", map[string]string{"filename": name}); cd != "" {
		return cd
	}
	return "attachment"
}

// printableAttachment is what mime.FormatMediaType makes of a name of
// printable ASCII (most PIDs and file names), without the map and the
// sorting that were a tenth of a small get's handler: the name as a token,
// else quoted. ok is false for any other name.
func printableAttachment(name string) (cd string, ok bool) {
	const prefix = "attachment; filename="
	token := name != ""
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c < ' ' || c > '~':
			return "", false
		case c == ' ' || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0:
			token = false
		}
	}
	if token {
		return prefix + name, true
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(name) + 8)
	b.WriteString(prefix + `"`)
	for i := 0; i < len(name); i++ {
		if name[i] == '"' || name[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	b.WriteByte('"')
	return b.String(), true
}

func (h *mnHandlers) describe(r *request) error {
	sm, err := r.object()
	if err != nil {
		return err
	}
	h.objectHeaders(r, sm)
	r.Status(http.StatusOK)
	r.Writer.WriteHeaderNow()
	return nil
}

func (h *mnHandlers) getSystemMetadata(r *request) error {
	sm, err := r.object()
	if err != nil {
		return err
	}
	return r.xml(sm)
}

func (h *mnHandlers) getChecksum(r *request) error {
	alg := r.Query("checksumAlgorithm")
	if alg != "" {
		canon, ok := adapter.CanonicalAlgorithm(alg)
		if !ok {
			return invalid("checksumAlgorithm %q is not supported; supported: %s", alg, strings.Join(adapter.ChecksumAlgorithms, ", "))
		}
		alg = canon
	}
	c, err := h.node.Checksum(r, r.session, r.pid, alg)
	if err != nil {
		return err
	}
	return r.xml(c)
}

func (h *mnHandlers) listObjects(r *request) error {
	q, err := r.listQuery()
	if err != nil {
		return err
	}
	if q.Identifier != "" && r.version == 1 {
		// v1 has no series ids: an identifier that resolves elsewhere lists nothing.
		if sm, err := h.node.SystemMetadata(r, r.session, q.Identifier); err == nil && sm.Identifier != q.Identifier {
			return r.xml(&adapter.ObjectList{Slice: adapter.Slice{Start: q.Start}})
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
	err := r.eachPart(func(name string, p *multipart.Part) error {
		switch name {
		case "pid":
			s, err := readText(name, p)
			if pid == "" {
				pid = s
			}
			return err
		case "serialVersion":
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
	if err := h.authorization.SystemMetadataChanged(r, r.session, pid, serial, modified); err != nil {
		return err
	}
	return r.ok()
}

// --- MNStorage

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
func (h *mnHandlers) checkNew(pid string, sm *adapter.SystemMetadata) error {
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
	pid := firstNonEmpty(r.id, f.pid)
	if r.id != "" && f.pid != "" && f.pid != r.id {
		err = invalid("the pid part %q differs from the identifier in the path %q", f.pid, r.id)
	} else if pid == "" {
		err = invalid("the pid part is missing")
	} else {
		err = h.checkNew(pid, f.sm)
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
		err = h.checkNew(f.newPid, f.sm)
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

func (h *mnHandlers) updateSystemMetadata(r *request) error {
	if h.storage == nil {
		return tierMissing(r)
	}
	var pid string
	var sm *adapter.SystemMetadata
	err := r.eachPart(func(name string, p *multipart.Part) error {
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
	if err != nil {
		return err
	}
	if sm == nil {
		return invalid("the sysmeta part is missing")
	}
	pid = firstNonEmpty(pid, sm.Identifier)
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

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func slicesContains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
