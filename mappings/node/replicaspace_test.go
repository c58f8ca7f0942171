package node_test

import (
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// TestSpaceAllocatedIgnoresRegisteredMetadata: spaceAllocated bounds the bytes
// of the replicas this node stores. The CN role (on by default) shares the
// catalog and registers system metadata of objects held elsewhere, with no
// bytes here; those records were counted as replicas held, so a node with a
// large registry refused every replica (InsufficientResources).
func TestSpaceAllocatedIgnoresRegisteredMetadata(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	e.configure(true, &adapter.NodeReplicationPolicy{SpaceAllocated: u64(1000)})
	cn := node.NewCN(e.n, adapter.NodeRef{ID: replNodeID}, []adapter.NodeRef{{ID: replSource}})
	elsewhere := e.object("registered-elsewhere", "text/csv", make([]byte, 5000))
	if _, err := cn.RegisterSystemMetadata(t.Context(), &adapter.Session{Subject: "CN=cn"}, elsewhere); err != nil {
		t.Fatal(err)
	}
	if rec, err := e.cat.Lookup(t.Context(), elsewhere.Identifier); err != nil || rec.BlobKey != "" {
		t.Fatalf("the registered record: %+v %v", rec, err)
	}
	small := e.object("small-replica", "text/csv", []byte("a,b\n1,2\n"))
	if err := e.replicate(small, replSource); err != nil {
		t.Fatalf("an 8-byte replica on a node holding no replica bytes, 1000 allocated: %v", err)
	}
	if st := e.status(small.Identifier); st != adapter.ReplicaCompleted {
		t.Errorf("replication ended %q", st)
	}
}
