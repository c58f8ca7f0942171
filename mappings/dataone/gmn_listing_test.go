package dataone

import (
	"archive/zip"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// TestGMNListingsForUntrustedCallers: with forward none the front presents a
// client certificate GMN trusts with every object. A caller the front does
// not trust must still not see, through listObjects, getLogRecords or
// getPackage, an object it may not read: the public gets GMN's public answer
// (the call goes without the certificate), an authenticated caller gets the
// entries of the objects it may read (its own private one included), a
// trusted caller gets everything; totals count what is shown.
func TestGMNListingsForUntrustedCallers(t *testing.T) {
	g := servers.StartGMN(t, servers.GMNOptions{})
	u := upstreamConfig(t, g.BaseURL, "spoolDir: "+t.TempDir())
	u.HeaderTimeout, u.Timeout = 60*time.Second, 60*time.Second
	u.TLS.CA, u.TLS.Cert, u.TLS.Key = g.CA, g.ClientCert, g.ClientKey
	c, err := upstream.Open(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	n, err := New(u, c)
	if err != nil {
		t.Fatal(err)
	}

	const owner, other = "CN=owner,DC=example,DC=org", "CN=other,DC=example,DC=org"
	create := func(pid, format string, data []byte, public bool) {
		t.Helper()
		sum := md5.Sum(data)
		sm := &adapter.SystemMetadata{Identifier: pid, FormatID: format, Size: uint64(len(data)),
			Checksum: adapter.Checksum{Algorithm: "MD5", Value: hex.EncodeToString(sum[:])}, RightsHolder: owner}
		if public {
			sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
		}
		if _, err := n.Create(t.Context(), session(owner, ""), sm, stage(t, n, data, "MD5")); err != nil {
			t.Fatalf("create %s: %v", pid, err)
		}
	}
	create("list/public", "text/plain", []byte("public\n"), true)
	create("list/private", "text/plain", []byte("private\n"), false)
	create("list/map", datapackage.FormatORE, datapackage.ResourceMap("list/map", "list/public", []string{"list/private"}, time.Now()), true)

	// The callers, with what the front passes for each (adapter/rest: the
	// authorizer's ReadableBy, nil for a trusted caller).
	type caller struct {
		s          *adapter.Session
		readableBy []string
		private    bool // may read list/private
	}
	trusted := &adapter.Session{Subject: "CN=urn:node:cn,DC=dataone,DC=org", Subjects: []string{"CN=urn:node:cn,DC=dataone,DC=org", adapter.SubjectAuthenticatedUser, adapter.SubjectPublic}}
	callers := map[string]caller{
		"trusted": {trusted, nil, true},
		"public":  {adapter.PublicSession(), []string{adapter.SubjectPublic}, false},
		"owner":   {session(owner, ""), session(owner, "").Subjects, true},
		"other":   {session(other, ""), session(other, "").Subjects, false},
	}
	all := []string{"list/map", "list/private", "list/public"}
	for name, cl := range callers {
		t.Run(name, func(t *testing.T) {
			want := all
			if !cl.private {
				want = []string{"list/map", "list/public"}
			}
			l, err := n.ListObjects(t.Context(), cl.s, adapter.ListQuery{Count: 100, ReadableBy: cl.readableBy})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, o := range l.ObjectInfo {
				ids = append(ids, o.Identifier)
			}
			slices.Sort(ids)
			if l.Total != len(want) || !slices.Equal(ids, want) {
				t.Errorf("listObjects: total %d, %q; want %q", l.Total, ids, want)
			}
			// A page: the total still counts every visible object.
			l, err = n.ListObjects(t.Context(), cl.s, adapter.ListQuery{Start: 1, Count: 1, ReadableBy: cl.readableBy})
			if err != nil || l.Total != len(want) || len(l.ObjectInfo) != 1 || l.Start != 1 {
				t.Errorf("listObjects start 1 count 1: %+v, %v", l, err)
			}

			log, err := n.LogRecords(t.Context(), cl.s, adapter.LogQuery{Count: 100, ReadableBy: cl.readableBy})
			if err != nil {
				t.Fatal(err)
			}
			var privateEvents int
			for _, e := range log.LogEntry {
				if e.Identifier == "list/private" {
					privateEvents++
				}
			}
			if log.Total != len(log.LogEntry) || (privateEvents > 0) != cl.private {
				t.Errorf("getLogRecords: total %d, %d entries, %d of list/private", log.Total, len(log.LogEntry), privateEvents)
			}
			for _, v1 := range []bool{false, true} {
				log, err = n.LogRecords(t.Context(), cl.s, adapter.LogQuery{IDFilter: "list/private", PIDsOnly: v1, Count: 100, ReadableBy: cl.readableBy})
				if err != nil || (log.Total > 0) != cl.private || log.Total != len(log.LogEntry) {
					t.Errorf("getLogRecords of list/private (v1 %v): %+v, %v", v1, log, err)
				}
			}

			canRead := func(sm *adapter.SystemMetadata) bool {
				if cl.readableBy == nil {
					return true
				}
				if slices.Contains(cl.s.Subjects, sm.RightsHolder) {
					return true
				}
				if sm.AccessPolicy == nil {
					return false
				}
				for _, r := range sm.AccessPolicy.Allow {
					for _, x := range r.Subject {
						if slices.Contains(cl.s.Subjects, x) {
							return true
						}
					}
				}
				return false
			}
			p, err := n.Package(t.Context(), cl.s, adapter.PackageBagIt097, "list/map", canRead)
			if !cl.private {
				kind := adapter.NotAuthorized
				if name == "public" {
					kind = adapter.InvalidToken
				}
				if e := adapter.AsException(err); e.Kind != kind || !strings.Contains(e.Description, "list/private") {
					t.Errorf("getPackage: %v, want %v naming list/private", err, kind)
				}
				if p != nil {
					p.Close()
				}
				return
			}
			if err != nil {
				t.Fatalf("getPackage: %v", err)
			}
			var b bytes.Buffer
			err = p.Write(t.Context(), &b)
			p.Close()
			if err != nil {
				t.Fatalf("getPackage: %v", err)
			}
			if got := zipContents(t, b.Bytes()); !slices.Contains(got, "private\n") || !slices.Contains(got, "public\n") {
				t.Errorf("getPackage: the bag holds %q", got)
			}
		})
	}

	// GMN itself, asked by the public, checks the resource map only: it hands
	// out the private member, which the front above did not.
	resp, err := g.Client(t, false).Get(g.BaseURL + "/v2/packages/" + adapter.EscapeIdentifier(adapter.PackageBagIt097) + "/list%2Fmap")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := zipContents(t, b)
	t.Logf("GMN's own getPackage for the public: HTTP %d, holding the private member: %v", resp.StatusCode, slices.Contains(got, "private\n"))
}

// zipContents are the contents of every file of a zip.
func zipContents(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip (%d bytes): %v", len(b), err)
	}
	var out []string
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		c, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(c))
	}
	return out
}
