package dataone

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// TestGMN: the mapping in front of a real GMN (dataone.gmn 3.5.2 behind
// Apache mod_ssl and mod_wsgi), presenting a client certificate that GMN
// trusts: create, get, getSystemMetadata, update, archive and listObjects
// land in GMN (read back from GMN directly too), GMN's errors come through
// as their kinds with GMN's words, and without the certificate GMN refuses.
func TestGMN(t *testing.T) {
	start := time.Now()
	g := servers.StartGMN(t, servers.GMNOptions{})
	t.Logf("GMN started in %v", time.Since(start).Round(time.Millisecond))

	gmnUpstream := func(t *testing.T, tls config.UpstreamTLS) *Node {
		t.Helper()
		u := upstreamConfig(t, g.BaseURL, "spoolDir: "+t.TempDir())
		// GMN on a loaded machine answers its first calls slowly.
		u.HeaderTimeout, u.Timeout = 60*time.Second, 60*time.Second
		u.TLS = tls
		c, err := upstream.Open(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		n, err := New(u, c)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := gmnUpstream(t, config.UpstreamTLS{CA: g.CA, Cert: g.ClientCert, Key: g.ClientKey})
	s := session("CN=caller,DC=example,DC=org", "")
	md5sm := func(pid string, data []byte) *adapter.SystemMetadata {
		sum := md5.Sum(data)
		return &adapter.SystemMetadata{Identifier: pid, FormatID: "text/plain", Size: uint64(len(data)),
			Checksum:     adapter.Checksum{Algorithm: "MD5", Value: hex.EncodeToString(sum[:])},
			RightsHolder: "CN=owner,DC=example,DC=org", Submitter: "CN=not-the-caller,DC=example,DC=org",
			AccessPolicy: &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}}
	}
	// direct reads GMN's system metadata of pid with the trusted certificate,
	// not through the mapping.
	direct := func(t *testing.T, pid string) adapter.SystemMetadata {
		t.Helper()
		resp, err := g.Client(t, true).Get(g.BaseURL + "/v2/meta/" + adapter.EscapeIdentifier(pid))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sm adapter.SystemMetadata
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GMN's own getSystemMetadata(%s): %d %s", pid, resp.StatusCode, b)
		}
		if err := xml.NewDecoder(resp.Body).Decode(&sm); err != nil {
			t.Fatal(err)
		}
		return sm
	}

	v1 := []byte("first version, through d1bridge\n")
	created, err := n.Create(t.Context(), s, md5sm("gmn/obj-1", v1), stage(t, n, v1, "MD5", "SHA-1"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Identifier != "gmn/obj-1" {
		t.Errorf("create returned %+v", created)
	}
	// GMN keeps the submitter the bridge sent, the caller, not the sysmeta's
	// (TRUST_CLIENT_SUBMITTER: the bridge is its trusted front).
	sm := direct(t, "gmn/obj-1")
	if sm.Submitter != "CN=caller,DC=example,DC=org" || sm.RightsHolder != "CN=owner,DC=example,DC=org" || sm.Checksum.Algorithm != "MD5" ||
		sm.Size != uint64(len(v1)) || sm.AuthoritativeMemberNode != g.NodeID {
		t.Errorf("GMN holds %+v", sm)
	}

	obj, err := n.Get(t.Context(), s, "gmn/obj-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(b, v1) || obj.Meta.Identifier != "gmn/obj-1" {
		t.Errorf("get: %q, %+v", b, obj.Meta)
	}
	got, err := n.SystemMetadata(t.Context(), s, "gmn/obj-1")
	if err != nil || got.Checksum != sm.Checksum || got.SerialVersion != sm.SerialVersion || got.Submitter != sm.Submitter {
		t.Errorf("getSystemMetadata: %+v, %v", got, err)
	}

	v2 := []byte("second version\n")
	next := md5sm("gmn/obj-2", v2)
	next.Obsoletes = "gmn/obj-1"
	if _, err := n.Update(t.Context(), s, "gmn/obj-1", next, stage(t, n, v2, "MD5")); err != nil {
		t.Fatalf("update: %v", err)
	}
	if sm := direct(t, "gmn/obj-1"); sm.ObsoletedBy != "gmn/obj-2" {
		t.Errorf("after the update GMN's gmn/obj-1 is obsoleted by %q", sm.ObsoletedBy)
	}
	if sm := direct(t, "gmn/obj-2"); sm.Obsoletes != "gmn/obj-1" {
		t.Errorf("GMN's gmn/obj-2 obsoletes %q", sm.Obsoletes)
	}
	if id, err := n.Archive(t.Context(), s, "gmn/obj-2"); err != nil || id != "gmn/obj-2" {
		t.Fatalf("archive: %q, %v", id, err)
	}
	if sm := direct(t, "gmn/obj-2"); !sm.Archived {
		t.Error("GMN's gmn/obj-2 is not archived")
	}
	list, err := n.ListObjects(t.Context(), s, adapter.ListQuery{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, o := range list.ObjectInfo {
		ids = append(ids, o.Identifier)
	}
	if list.Total != 2 || strings.Join(ids, " ") != "gmn/obj-1 gmn/obj-2" {
		t.Errorf("listObjects: total %d, %q", list.Total, ids)
	}

	t.Run("errors", func(t *testing.T) {
		// GMN's own answers, passed on as their kinds with its words.
		_, err := n.SystemMetadata(t.Context(), s, "gmn/missing")
		if e := adapter.AsException(err); e.Kind != adapter.NotFound || !strings.HasPrefix(e.Description, "up: ") ||
			!strings.Contains(e.Description, "gmn/missing") {
			t.Errorf("missing: %+v", e)
		}
		v := []byte("taken")
		_, err = n.Create(t.Context(), s, md5sm("gmn/obj-1", v), stage(t, n, v, "MD5"))
		if e := adapter.AsException(err); e.Kind != adapter.IdentifierNotUnique || e.PID != "gmn/obj-1" {
			t.Errorf("taken: %+v", e)
		}
	})

	t.Run("no client certificate", func(t *testing.T) {
		// The same bridge without its certificate is public to GMN: a create
		// is refused, with GMN's reason.
		anon := gmnUpstream(t, config.UpstreamTLS{CA: g.CA})
		v := []byte("anonymous\n")
		_, err := anon.Create(t.Context(), s, md5sm("gmn/anonymous", v), stage(t, anon, v, "MD5"))
		e := adapter.AsException(err)
		if e.Kind != adapter.NotAuthorized || !strings.Contains(e.Description, "public") {
			t.Errorf("create without a certificate: %+v", e)
		}
		// The object GMN never got is not there.
		if _, err := n.SystemMetadata(t.Context(), s, "gmn/anonymous"); adapter.AsException(err).Kind != adapter.NotFound {
			t.Errorf("gmn/anonymous: %v", err)
		}
	})

	t.Run("untrusted server", func(t *testing.T) {
		// Without tls.ca the system's roots do not know GMN's CA.
		bare := gmnUpstream(t, config.UpstreamTLS{Cert: g.ClientCert, Key: g.ClientKey})
		err := bare.Ping(t.Context())
		if e := adapter.AsException(err); e.Kind != adapter.ServiceFailure || !strings.Contains(e.Error(), "certificate") {
			t.Errorf("ping without tls.ca: %v", err)
		}
	})
}
