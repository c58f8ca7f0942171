package main

// The decisions isAuthorized keeps on a replica end when the CN's copy of its
// system metadata is applied (API.md §9, replicameta.go).

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestRefreshedReplicaMetaEndsCachedDecisions: a replica's access
// policy withdrawn at the CN reaches this node by systemMetadataChanged and a
// job that fetches the CN's copy. The notice itself forgets the decisions
// kept on the object, but the job applies the new policy later: a decision
// isAuthorized kept in between (on the old policy) ends when the job stores
// the CN's copy, where it answered "allowed" from the cache for up to
// authCacheTTL (1m) after the withdrawal took effect here (on SQLite no
// change log reaches the authorizer).
func TestRefreshedReplicaMetaEndsCachedDecisions(t *testing.T) {
	const pid = "replica-revoked"
	var (
		mu      sync.Mutex
		served  *adapter.SystemMetadata // what the fake CN answers
		release = make(chan struct{})
		asked   = make(chan struct{}, 10)
	)
	cn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/v2/meta/"+pid) {
			http.NotFound(w, r)
			return
		}
		asked <- struct{}{}
		<-release
		mu.Lock()
		sm := served
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		adapter.Encode(w, sm, 2)
	}))
	defer cn.Close()
	c := cnStart(t, "D1BRIDGE_REPLICATION_CNBASEURL="+cn.URL+"/cn")

	// A replica here, of an object urn:node:MN2 is authoritative for: public read.
	reg, _ := cnObject(pid, true)
	reg.AuthoritativeMemberNode = cnMN2
	if !wantIdentifier(t, c.form(t, cnAdmin, http.MethodPost, "/d1/meta/"+pid, docPart("sysmeta", reg)), pid) {
		t.FailNow()
	}
	cur := c.meta(t, pid)
	isAuth := func() int {
		return c.call(t, "", http.MethodGet, "/d1/mn/v2/isAuthorized/"+segment(pid)+"?action=read").Status
	}
	if s := isAuth(); s != http.StatusOK {
		t.Fatalf("isAuthorized before the change: %d", s)
	}
	// The CN withdraws public read: its copy is newer and private.
	next := cur.Clone()
	next.SerialVersion = cur.SerialVersion + 1
	next.AccessPolicy = nil
	mu.Lock()
	served = next
	mu.Unlock()
	r := c.form(t, cnAdmin, http.MethodPost, "/d1/mn/v2/dirtySystemMetadata", textPart("pid", pid),
		textPart("serialVersion", strconv.FormatUint(next.SerialVersion, 10)), textPart("dateSysMetaLastModified", next.DateSysMetadataModified.Format()))
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the node did not ask the CN for the new system metadata")
	}
	// While the fetch is under way, a caller asks again: still the old policy.
	if s := isAuth(); s != http.StatusOK {
		t.Fatalf("isAuthorized while the fetch runs: %d", s)
	}
	close(release)
	deadline := time.Now().Add(30 * time.Second)
	for c.meta(t, pid).SerialVersion != next.SerialVersion {
		if time.Now().After(deadline) {
			t.Fatal("the CN's copy was never applied")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := c.meta(t, pid); m.AccessPolicy != nil && len(m.AccessPolicy.Allow) > 0 {
		t.Fatalf("the applied copy still has an access policy: %+v", m.AccessPolicy)
	}
	// The object is private now; reading it is refused...
	if r := c.call(t, "", http.MethodGet, "/d1/mn/v2/meta/"+segment(pid)); r.Status != http.StatusUnauthorized {
		t.Errorf("getSystemMetadata after the withdrawal: %d, want 401", r.Status)
	}
	// ... and isAuthorized must say so too.
	if s := isAuth(); s != http.StatusUnauthorized {
		t.Errorf("isAuthorized(read) for the public after the withdrawal was applied: %d, want 401 (a decision cached before it outlived it)", s)
	}
}
