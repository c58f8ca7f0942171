package node_test

import (
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// TestSetReplicationStatusKeepsCompleted: once a replica is completed, a late
// or repeated notice (a retried job, a second instance, a stale failure) does
// not turn it back into failed, queued or requested; only invalidated may
// follow (Metacat: InvalidRequest, in setReplicationStatus and
// updateReplicationMetadata). A repeated notice of the same status changes
// nothing, serialVersion included. Both used to overwrite the replica.
func TestSetReplicationStatusKeepsCompleted(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	cn := node.NewCN(e.n, adapter.NodeRef{ID: replNodeID}, []adapter.NodeRef{{ID: replSource}, {ID: "urn:node:mn2"}, {ID: "urn:node:mn3"}})
	sm := e.object("cn-held", "text/csv", []byte("x\n"))
	sm.SerialVersion = 1
	if err := e.cat.Insert(t.Context(), &node.Record{Meta: sm, BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	trusted := &adapter.Session{Subject: "CN=cn", Subjects: []string{"CN=cn"}}
	if err := cn.SetReplicationStatus(t.Context(), trusted, "cn-held", "urn:node:mn2", adapter.ReplicaCompleted, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := e.cat.Lookup(t.Context(), "cn-held")

	err := cn.SetReplicationStatus(t.Context(), trusted, "cn-held", "urn:node:mn2", adapter.ReplicaCompleted, nil)
	if err != nil {
		t.Errorf("a repeated completed notice: %v", err)
	}
	if again, _ := e.cat.Lookup(t.Context(), "cn-held"); again.Meta.SerialVersion != before.Meta.SerialVersion {
		t.Errorf("a repeated completed notice changed serialVersion %d -> %d", before.Meta.SerialVersion, again.Meta.SerialVersion)
	}

	err = cn.SetReplicationStatus(t.Context(), trusted, "cn-held", "urn:node:mn2", adapter.ReplicaFailed, nil)
	wantKind(t, "completed -> failed", err, adapter.InvalidRequest, "")
	after, _ := e.cat.Lookup(t.Context(), "cn-held")
	for _, r := range after.Meta.Replica {
		if r.ReplicaMemberNode == "urn:node:mn2" && r.ReplicationStatus != adapter.ReplicaCompleted {
			t.Errorf("the completed replica on urn:node:mn2 is now %q", r.ReplicationStatus)
		}
	}
	// updateReplicationMetadata: completed -> requested on another node.
	if err := cn.SetReplicationStatus(t.Context(), trusted, "cn-held", "urn:node:mn3", adapter.ReplicaCompleted, nil); err != nil {
		t.Fatal(err)
	}
	cur, _ := e.cat.Lookup(t.Context(), "cn-held")
	err = cn.UpdateReplicationMetadata(t.Context(), trusted, "cn-held",
		&adapter.Replica{ReplicaMemberNode: "urn:node:mn3", ReplicationStatus: adapter.ReplicaRequested}, cur.Meta.SerialVersion)
	wantKind(t, "updateReplicationMetadata completed -> requested", err, adapter.InvalidRequest, "")

	if err := cn.SetReplicationStatus(t.Context(), trusted, "cn-held", "urn:node:mn2", adapter.ReplicaInvalidated, nil); err != nil {
		t.Errorf("completed -> invalidated must be allowed: %v", err)
	}
}
