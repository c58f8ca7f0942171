package node_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// TestReplicaFollowsCNSystemMetadata: a replica's system metadata belongs to
// the CN and the authoritative node. When it changes there (the rights holder
// withdraws public read), the CN calls systemMetadataChanged on the nodes
// holding replicas, and each fetches GET {cn}/v2/meta/{pid} when its
// serialVersion is newer (API.md §9). The node answered 200 and kept its
// stale copy, publicly readable, for good.
func TestReplicaFollowsCNSystemMetadata(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	sm := e.object("dirty-replica", "text/csv", []byte("a,b\n1,2\n"))
	sm.SerialVersion = 3
	sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}

	var mu sync.Mutex
	cnMeta := sm.Clone()
	cn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/meta/") || strings.HasPrefix(r.URL.Path, "/v1/meta/") {
			mu.Lock()
			var b bytes.Buffer
			adapter.Encode(&b, cnMeta, 2)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/xml")
			w.Write(b.Bytes())
			return
		}
		// replicaNotifications and anything else: OK
	}))
	defer cn.Close()
	e.n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
		CNBaseURL: cn.URL, Accept: true})
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, sm.Identifier, "done")

	// The rights holder makes the object private; the CN's copy moves on.
	mu.Lock()
	cnMeta.AccessPolicy = nil
	cnMeta.SerialVersion = 4
	// The CN's date, behind every date of this node's catalog (its clock is
	// behind): the replica keeps the CN's dates all the same.
	cnMeta.DateSysMetadataModified = adapter.NewTime(time.Now().Add(-time.Hour))
	modified := cnMeta.DateSysMetadataModified
	mu.Unlock()
	cnSession := &adapter.Session{Subject: "CN=cn", Subjects: []string{"CN=cn"}}
	if err := e.n.SystemMetadataChanged(t.Context(), cnSession, sm.Identifier, 4, modified); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := e.cat.Lookup(t.Context(), sm.Identifier)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Meta.SerialVersion >= 4 && rec.Meta.AccessPolicy == nil {
			if !rec.Meta.DateSysMetadataModified.Equal(modified.Time) {
				t.Errorf("the replica's dateSysMetadataModified is %s, not the CN's %s", rec.Meta.DateSysMetadataModified.Format(), modified.Format())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after systemMetadataChanged(serialVersion 4) the replica still has serialVersion %d and access policy %+v (public read)",
				rec.Meta.SerialVersion, rec.Meta.AccessPolicy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaMetaNoticeDuringFetch: a notice that comes while the fetch of an
// older one runs is fetched too; it was dropped as a duplicate of the running
// job, and the replica kept the older copy until another notice.
func TestReplicaMetaNoticeDuringFetch(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	sm := e.object("noticed-twice", "text/csv", []byte("a,b\n1,2\n"))
	sm.SerialVersion = 3

	var mu sync.Mutex
	cnMeta := sm.Clone()
	started, release := make(chan struct{}), make(chan struct{})
	var held sync.Once
	cn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v2/meta/") {
			return // replicaNotifications: OK
		}
		mu.Lock()
		var b bytes.Buffer
		adapter.Encode(&b, cnMeta, 2)
		serial := cnMeta.SerialVersion
		mu.Unlock()
		if serial == 4 {
			held.Do(func() { close(started); <-release }) // the fetch of serialVersion 4 is running
		}
		w.Header().Set("Content-Type", "text/xml")
		w.Write(b.Bytes())
	}))
	defer cn.Close()
	defer close(release)
	e.n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
		CNBaseURL: cn.URL, Accept: true})
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, sm.Identifier, "done")

	cnSession := &adapter.Session{Subject: "CN=cn", Subjects: []string{"CN=cn"}}
	change := func(serial uint64, title string) {
		mu.Lock()
		cnMeta.SerialVersion = serial
		cnMeta.FormatID = title
		cnMeta.DateSysMetadataModified = adapter.Now()
		modified := cnMeta.DateSysMetadataModified
		mu.Unlock()
		if err := e.n.SystemMetadataChanged(t.Context(), cnSession, sm.Identifier, serial, modified); err != nil {
			t.Fatal(err)
		}
	}
	change(4, "text/plain")
	<-started
	change(5, "text/tab-separated-values")
	release <- struct{}{}

	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := e.cat.Lookup(t.Context(), sm.Identifier)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Meta.SerialVersion == 5 && rec.Meta.FormatID == "text/tab-separated-values" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the notice of serialVersion 5, sent while the fetch of 4 ran, the replica has serialVersion %d (%s)",
				rec.Meta.SerialVersion, rec.Meta.FormatID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaRefusesUnfitCNSystemMetadata: a CN's copy that names no other
// authoritative member node, or describes other bytes, does not replace the
// replica's system metadata (it would make the replica this node's own, or
// lie about its bytes): the fetch fails for good and the record stays.
func TestReplicaRefusesUnfitCNSystemMetadata(t *testing.T) {
	for name, spoil := range map[string]func(*adapter.SystemMetadata){
		"no authoritative node": func(sm *adapter.SystemMetadata) { sm.AuthoritativeMemberNode = "" },
		"another algorithm":     func(sm *adapter.SystemMetadata) { sm.Checksum.Algorithm = "MD5" },
		"no rights holder":      func(sm *adapter.SystemMetadata) { sm.RightsHolder = "" },
	} {
		t.Run(name, func(t *testing.T) {
			e := newReplEnv(t, t.TempDir())
			defer e.n.Close()
			sm := e.object("spoiled", "text/csv", []byte("a,b\n1,2\n"))
			sm.SerialVersion = 3
			sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
			cnMeta := sm.Clone()
			cnMeta.SerialVersion, cnMeta.AccessPolicy = 4, nil
			spoil(cnMeta)
			cn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/v2/meta/") {
					w.Header().Set("Content-Type", "text/xml")
					adapter.Encode(w, cnMeta, 2)
				}
			}))
			defer cn.Close()
			e.n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
				CNBaseURL: cn.URL, Accept: true})
			if err := e.replicate(sm, replSource); err != nil {
				t.Fatal(err)
			}
			waitJob(t, e, sm.Identifier, "done")
			cnSession := &adapter.Session{Subject: "CN=cn", Subjects: []string{"CN=cn"}}
			if err := e.n.SystemMetadataChanged(t.Context(), cnSession, sm.Identifier, 4, adapter.Now()); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				rows, err := e.cat.Jobs(t.Context(), "refresh-sysmeta")
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) == 1 && rows[0].State == "failed" {
					if !strings.Contains(rows[0].Error, "coordinating node's system metadata") {
						t.Errorf("the fetch failed with %q", rows[0].Error)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the fetch of the CN's copy: %+v, want one failed job", rows)
				}
			}
			rec, err := e.cat.Lookup(t.Context(), sm.Identifier)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Meta.SerialVersion != 3 || rec.Meta.AccessPolicy == nil || rec.Meta.AuthoritativeMemberNode != replSource {
				t.Errorf("the replica took the CN's unfit copy: serialVersion %d, access policy %+v, authoritative node %q",
					rec.Meta.SerialVersion, rec.Meta.AccessPolicy, rec.Meta.AuthoritativeMemberNode)
			}
		})
	}
}
