package node_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// TestUpdateSystemMetadataStaleDateBehindTheNewest: updateSystemMetadata's
// optimistic locking (API.md §10 rule 9) needs every change to give the
// object a new dateSysMetadataModified. When the newest date of the catalog
// is ahead of this node's clock (a replica dated by a node whose clock is
// ahead, another instance's clock on a shared catalog, a step back of the
// clock), the catalog dates a change at that newest date (the list's order
// of commits): a change of the object that holds it leaves its date as it
// was, and a second writer holding the system metadata from before the first
// change is not refused; its update silently undoes the first one's.
func TestUpdateSystemMetadataStaleDateBehindTheNewest(t *testing.T) {
	n, _ := nodeBehindAReplica(t)
	ctx := t.Context()

	createText(t, n, "local", []byte("some text\n"))
	owner := &adapter.Session{Subject: harvestOwner, Subjects: []string{harvestOwner}}
	read, err := n.SystemMetadata(ctx, owner, "local")
	if err != nil {
		t.Fatal(err)
	}
	// Two clients read the same system metadata; the first changes it.
	first, second := read.Clone(), read.Clone()
	first.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
	if err := n.UpdateSystemMetadata(ctx, owner, first); err != nil {
		t.Fatal(err)
	}
	after, err := n.SystemMetadata(ctx, owner, "local")
	if err != nil {
		t.Fatal(err)
	}
	if after.DateSysMetadataModified.Equal(read.DateSysMetadataModified.Time) {
		t.Errorf("updateSystemMetadata changed the object (serialVersion %d -> %d) and left its dateSysMetadataModified at %s",
			read.SerialVersion, after.SerialVersion, after.DateSysMetadataModified.Format())
	}

	// The second client's copy is stale: its update must be refused.
	second.FormatID = "text/csv"
	err = n.UpdateSystemMetadata(ctx, owner, second)
	wantKind(t, "updateSystemMetadata with the date from before another's change", err, adapter.InvalidRequest, "")
	if err == nil {
		final, _ := n.SystemMetadata(ctx, owner, "local")
		if final != nil && final.AccessPolicy == nil {
			t.Errorf("the first client's access policy was lost to the second client's stale update")
		}
	}
}

// TestCreateReturnsTheStoredSystemMetadata: Create answers "the system
// metadata as stored" (adapter.MNStorage). When the catalog dates the new
// object at its newest date (the list's order of commits), the answer
// still carries the date the node set before the insert.
func TestCreateReturnsTheStoredSystemMetadata(t *testing.T) {
	n, cat := nodeBehindAReplica(t)
	ctx := t.Context()

	data := []byte("some text\n")
	u, err := n.Stage(ctx, bytes.NewReader(data), []string{"SHA-256"})
	if err != nil {
		t.Fatal(err)
	}
	sm := &adapter.SystemMetadata{Identifier: "created", FormatID: "text/plain", Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: sha256Hex(data)}, RightsHolder: harvestOwner}
	got, err := n.Create(ctx, &adapter.Session{Subject: harvestOwner}, sm, u)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := cat.Lookup(ctx, "created")
	if err != nil {
		t.Fatal(err)
	}
	if !got.DateSysMetadataModified.Equal(stored.Meta.DateSysMetadataModified.Time) {
		t.Errorf("Create answered dateSysMetadataModified %s; the catalog stored %s",
			got.DateSysMetadataModified.Format(), stored.Meta.DateSysMetadataModified.Format())
	}
}

// nodeBehindAReplica is a node whose catalog holds a replica dated by its
// authoritative node an hour ahead of this node's clock: the catalog's newest
// date is ahead of every date the node sets.
func nodeBehindAReplica(t *testing.T) (*node.Node, node.Catalog) {
	dir := t.TempDir()
	cat := openCatalog(t, dir)
	n := newNode(t, dir, cat, nil)
	t.Cleanup(func() { n.Close() })
	replica := sqlcatalogtest.SM("replica-ahead", adapter.NewTime(time.Now().Add(time.Hour)))
	replica.AuthoritativeMemberNode = sqlcatalogtest.OtherNode
	if err := cat.Insert(node.WithGivenDates(t.Context()), &node.Record{Meta: replica, BlobKey: "blob-replica", Replica: true}); err != nil {
		t.Fatal(err)
	}
	return n, cat
}
