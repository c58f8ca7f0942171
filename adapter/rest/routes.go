package rest

import (
	"net/http"
	"strings"

	"github.com/d1bridge/d1bridge/auth"
	"github.com/gin-gonic/gin"
)

// route is one operation at one path: the rows below are the contract
// (shared/seed/CONTRACT.md, API.md §3–4), one table per interface.
type route struct {
	method, path string      // gin pattern, relative to /{svc}/{mn|cn}/{v1|v2}
	op           string      // "MNRead.get": the metrics label, the detail-code key, the log field
	perm         auth.Perm   // checked in wrap; object permissions on :id, or in the handler for ids in the body
	h            handlerFunc // nil: not built yet, answers NotImplemented
}

const (
	get, head, post, put, del = http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete
)

// mnV2 is the member node interface, v2 (also served without the version segment).
func mnV2(h *mnHandlers) []route {
	return []route{
		// MNCore
		{get, "/monitor/ping", "MNCore.ping", auth.Public, h.ping},
		{get, "/log", "MNCore.getLogRecords", auth.Public, h.getLogRecords},
		{get, "/monitor/object", "MNCore.getObjectStatistics", auth.Public, h.getObjectStatistics},
		{get, "/monitor/event", "MNCore.getOperationsStatistics", auth.Public, h.getOperationsStatistics},
		{get, "/monitor/status", "MNCore.getStatus", auth.Public, h.getStatus},
		{get, "/", "MNCore.getCapabilities", auth.Public, h.getCapabilities},
		{get, "/node", "MNCore.getCapabilities", auth.Public, h.getCapabilities},
		// MNRead
		{get, "/object/:id", "MNRead.get", auth.Read, h.get},
		{get, "/meta/:id", "MNRead.getSystemMetadata", auth.Read, h.getSystemMetadata},
		{head, "/object/:id", "MNRead.describe", auth.Read, h.describe},
		{get, "/checksum/:id", "MNRead.getChecksum", auth.Read, h.getChecksum},
		{get, "/object", "MNRead.listObjects", auth.Public, h.listObjects},
		{post, "/error", "MNRead.synchronizationFailed", auth.Trusted, h.synchronizationFailed},
		// MNAuthorization
		{get, "/isAuthorized/:id", "MNAuthorization.isAuthorized", auth.Public, h.isAuthorized},
		{put, "/accessRules/:id", "MNAuthorization.setAccessPolicy", auth.ChangePermission, h.setAccessPolicy},
		{post, "/dirtySystemMetadata", "MNStorage.systemMetadataChanged", auth.Trusted, h.systemMetadataChanged},
		// MNStorage
		{post, "/object", "MNStorage.create", auth.Submit, h.create},
		{post, "/object/:id", "MNStorage.create", auth.Submit, h.create},
		{put, "/object/:id", "MNStorage.update", auth.Write, h.update},
		{del, "/object/:id", "MNStorage.delete", auth.Trusted, h.delete},
		{put, "/archive/:id", "MNStorage.archive", auth.ChangePermission, h.archive},
		{put, "/meta", "MNStorage.updateSystemMetadata", auth.Write, h.updateSystemMetadata},
		{post, "/generate", "MNStorage.generateIdentifier", auth.Submit, h.generateIdentifier},
		{put, "/publish/:id", "MNStorage.publish", auth.ChangePermission, h.publish},
		{put, "/publishIdentifier/:id", "MNStorage.publishIdentifier", auth.ChangePermission, h.publishIdentifier},
		// MNReplication
		{post, "/replicate", "MNReplication.replicate", auth.Trusted, h.replicate},
		{get, "/replica/:id", "MNReplication.getReplica", auth.Authenticated, h.getReplica}, // trusted, or a registered node
		// MNView (v2 as Metacat; v1 as the specification, API 1.2)
		{get, "/views", "MNView.listViews", auth.Public, h.listViews},
		{get, "/views/:theme/:id", "MNView.view", auth.Read, h.view},
		// MNPackage, MNAuthentication
		{get, "/packages/:type/:id", "MNPackage.getPackage", auth.Public, h.getPackage},
		{get, "/token", "MNAuthentication.token", auth.Authenticated, h.token},
		{get, "/whoami", "MNAuthentication.whoami", auth.Public, h.whoami},
		// MNAdmin (v2 only)
		{put, "/index", "MNAdmin.reindex", auth.Trusted, h.reindex},
		{put, "/index/:id", "MNAdmin.reindex", auth.Trusted, h.reindex},
		{put, "/identifiers", "MNAdmin.updateIdMetadata", auth.Trusted, h.updateIdMetadata},
		{put, "/identifiers/:id", "MNAdmin.updateIdMetadata", auth.Trusted, h.updateIdMetadata},
	}
}

// mnV1 is the member node interface, v1: v2 without updateSystemMetadata, the admin
// group, publishIdentifier and whoami; package retrieval takes a pid only.
func mnV1(h *mnHandlers) []route {
	var rs []route
	for _, r := range mnV2(h) {
		switch r.op {
		case "MNStorage.updateSystemMetadata", "MNAdmin.reindex", "MNAdmin.updateIdMetadata",
			"MNStorage.publishIdentifier", "MNAuthentication.whoami", "MNPackage.getPackage":
			continue
		}
		rs = append(rs, r)
	}
	return append(rs, route{get, "/packages/*rest", "MNPackage.getPackage", auth.Public, h.getPackage})
}

// cnV2 is the coordinating node interface, v2 (also served without the version segment).
func cnV2(h *cnHandlers) []route {
	return []route{
		// CNCore
		{get, "/monitor/ping", "CNCore.ping", auth.Public, h.ping},
		{get, "/", "CNCore.getCapabilities", auth.Public, h.getCapabilities},
		{post, "/object", "CNCore.create", auth.Trusted, h.create},
		{post, "/object/:id", "CNCore.create", auth.Trusted, h.create},
		{get, "/formats", "CNCore.listFormats", auth.Public, h.listFormats},
		{get, "/formats/:formatId", "CNCore.getFormat", auth.Public, h.getFormat},
		{get, "/checksum", "CNCore.listChecksumAlgorithms", auth.Public, h.listChecksumAlgorithms},
		{get, "/log", "CNCore.getLogRecords", auth.Public, h.getLogRecords},
		{post, "/reserve", "CNCore.reserveIdentifier", auth.Authenticated, h.reserveIdentifier},
		{post, "/reserve/:id", "CNCore.reserveIdentifier", auth.Authenticated, h.reserveIdentifier},
		{get, "/reserve/:id", "CNCore.hasReservation", auth.Public, h.hasReservation},
		{get, "/reserve/:id/:subject", "CNCore.hasReservation", auth.Public, h.hasReservation},
		{post, "/generate", "CNCore.generateIdentifier", auth.Authenticated, h.generateIdentifier},
		{post, "/meta", "CNCore.registerSystemMetadata", auth.Trusted, h.registerSystemMetadata},
		{put, "/meta", "CNCore.updateSystemMetadata", auth.Trusted, h.updateSystemMetadata},
		{put, "/obsoletedBy/:id", "CNCore.setObsoletedBy", auth.Write, h.setObsoletedBy},
		{del, "/object/:id", "CNCore.delete", auth.Trusted, h.delete},
		{put, "/archive/:id", "CNCore.archive", auth.ChangePermission, h.archive},
		{get, "/node", "CNCore.listNodes", auth.Public, h.notImplementedForGood},
		// CNRead
		{get, "/object/:id", "CNRead.get", auth.Read, h.get},
		{head, "/object/:id", "CNRead.describe", auth.Read, h.describe},
		{get, "/object", "CNRead.listObjects", auth.Public, h.listObjects},
		{get, "/meta/:id", "CNRead.getSystemMetadata", auth.Read, h.getSystemMetadata},
		{get, "/resolve/:id", "CNRead.resolve", auth.Read, h.resolve},
		{get, "/assertRelation/:id", "CNRead.assertRelation", auth.Read, h.assertRelation},
		{get, "/checksum/:id", "CNRead.getChecksum", auth.Read, h.getChecksum},
		{get, "/search/:type", "CNRead.search", auth.Public, h.notImplementedForGood},
		{get, "/search/:type/*query", "CNRead.search", auth.Public, h.notImplementedForGood},
		{post, "/synchronize", "CNRead.synchronize", auth.Authenticated, h.synchronize}, // trusted, or the authoritative node
		// CNAuthorization
		{put, "/owner/:id", "CNAuthorization.setRightsHolder", auth.ChangePermission, h.setRightsHolder},
		{get, "/isAuthorized/:id", "CNAuthorization.isAuthorized", auth.Public, h.isAuthorized},
		{put, "/accessRules/:id", "CNAuthorization.setAccessPolicy", auth.ChangePermission, h.setAccessPolicy},
		{post, "/accessRules", "CNAuthorization.setAccessPolicy", auth.ChangePermission, h.setAccessPolicy},
		// CNReplication
		{put, "/replicaNotifications/:id", "CNReplication.setReplicationStatus", auth.Authenticated, h.setReplicationStatus}, // trusted, or the node itself
		{put, "/replicaMetadata/:id", "CNReplication.updateReplicationMetadata", auth.Trusted, h.updateReplicationMetadata},
		{put, "/replicaPolicies/:id", "CNReplication.setReplicationPolicy", auth.ChangePermission, h.setReplicationPolicy},
		{get, "/replicaAuthorizations/:id", "CNReplication.isNodeAuthorized", auth.Public, h.isNodeAuthorized},
		{put, "/removeReplicaMetadata/:id", "CNReplication.deleteReplicationMetadata", auth.Trusted, h.deleteReplicationMetadata},
		// CNIdentity and CNRegister: NotImplemented for good (the seed).
		{post, "/accounts", "CNIdentity", auth.Public, h.notImplementedForGood},
		{get, "/accounts", "CNIdentity", auth.Public, h.notImplementedForGood},
		{get, "/accounts/:subject", "CNIdentity", auth.Public, h.notImplementedForGood},
		{put, "/accounts/:subject", "CNIdentity", auth.Public, h.notImplementedForGood},
		{put, "/accounts/verification/:subject", "CNIdentity", auth.Public, h.notImplementedForGood},
		{post, "/accounts/map", "CNIdentity", auth.Public, h.notImplementedForGood},
		{del, "/accounts/map/:subject", "CNIdentity", auth.Public, h.notImplementedForGood},
		{post, "/accounts/pendingmap", "CNIdentity", auth.Public, h.notImplementedForGood},
		{get, "/accounts/pendingmap/:subject", "CNIdentity", auth.Public, h.notImplementedForGood},
		{put, "/accounts/pendingmap/:subject", "CNIdentity", auth.Public, h.notImplementedForGood},
		{del, "/accounts/pendingmap/:subject", "CNIdentity", auth.Public, h.notImplementedForGood},
		{post, "/groups", "CNIdentity", auth.Public, h.notImplementedForGood},
		{put, "/groups", "CNIdentity", auth.Public, h.notImplementedForGood},
		{post, "/node", "CNRegister", auth.Public, h.notImplementedForGood},
		{get, "/node/:nodeId", "CNRegister", auth.Public, h.notImplementedForGood},
		{put, "/node/:nodeId", "CNRegister", auth.Public, h.notImplementedForGood},
	}
}

// cnV1 is the coordinating node interface, v1: the v2 operations less
// updateSystemMetadata and synchronize (the seed lists the same operations).
func cnV1(h *cnHandlers) []route {
	var rs []route
	for _, r := range cnV2(h) {
		if r.op != "CNCore.updateSystemMetadata" && r.op != "CNRead.synchronize" {
			rs = append(rs, r)
		}
	}
	return rs
}

// seedPaths are the seed's literal paths outside /{svc}/{role}: each serves the
// operation of the named table, with the identifier in the path.
var seedPaths = []struct {
	method, path string // {svc} is replaced by the service prefix
	role         string
	op           string
}{
	{post, "/dirtySystemMetadata/:id", "mn", "MNStorage.systemMetadataChanged"},
	{post, "/{svc}/meta/:id", "cn", "CNCore.registerSystemMetadata"},
	{put, "/replicaNotifications/:id", "cn", "CNReplication.setReplicationStatus"},
	{put, "/replicaMetadata/:id", "cn", "CNReplication.updateReplicationMetadata"},
	{put, "/replicaPolicies/:id", "cn", "CNReplication.setReplicationPolicy"},
	{get, "/replicaAuthorizations/:id", "cn", "CNReplication.isNodeAuthorized"},
}

// interfaces lists where each table is served.
func (e *engine) interfaces() []iface {
	var out []iface
	if e.mn != nil {
		out = append(out,
			iface{"mn", 1, "/mn/v1", mnV1(e.mn)},
			iface{"mn", 2, "/mn/v2", mnV2(e.mn)},
			iface{"mn", 2, "/mn", mnV2(e.mn)},
		)
	}
	if e.cn != nil {
		out = append(out,
			iface{"cn", 1, "/cn/v1", cnV1(e.cn)},
			iface{"cn", 2, "/cn/v2", cnV2(e.cn)},
			iface{"cn", 2, "/cn", cnV2(e.cn)},
		)
	}
	return out
}

type iface struct {
	role    string
	version int
	prefix  string // under /{svc}
	routes  []route
}

// register is the one registration loop: every table row under its prefix, a HEAD
// twin for every GET that has no HEAD of its own, the seed's literal paths, and the
// status page at /.
func (e *engine) register(g *gin.Engine) {
	svc := "/" + e.opts.Svc
	// The status page for people, outside the DataONE paths (status.go).
	g.GET("/", e.status)
	g.HEAD("/", e.status)
	for _, in := range e.interfaces() {
		heads := map[string]bool{}
		for _, r := range in.routes {
			if r.method == head {
				heads[r.path] = true
			}
		}
		for _, r := range in.routes {
			h := e.wrap(r, in.role, in.version)
			path := svc + in.prefix + r.path
			g.Handle(r.method, path, h)
			if r.method == get && !heads[r.path] {
				g.Handle(head, path, h)
			}
			if r.path == "/" { // the interface root answers with and without its slash
				g.Handle(r.method, strings.TrimSuffix(path, "/"), h)
				g.Handle(head, strings.TrimSuffix(path, "/"), h)
			}
		}
	}
	for _, sp := range seedPaths {
		for _, in := range e.interfaces() {
			if in.role != sp.role || in.version != 2 || in.prefix != "/"+sp.role+"/v2" {
				continue
			}
			for _, r := range in.routes {
				if r.op == sp.op && r.method == sp.method {
					r.path = strings.ReplaceAll(sp.path, "{svc}", e.opts.Svc)
					g.Handle(sp.method, r.path, e.wrap(r, in.role, in.version))
					if sp.method == get {
						g.Handle(head, r.path, e.wrap(r, in.role, in.version))
					}
					break
				}
			}
		}
	}
}
