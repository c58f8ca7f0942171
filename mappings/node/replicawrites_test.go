package node_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// TestReplicaRefusesLocalWrites: a replica is held for its authoritative
// member node, where archive, update and updateSystemMetadata are done (GMN:
// InvalidRequest; API.md §3.6: archive refuses replicas). The rights holder
// could archive a replica, obsolete it with a local version and rewrite its
// system metadata, so that this node's copy left the authoritative one and
// the CN's.
func TestReplicaRefusesLocalWrites(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	sm := e.object("held-replica", "text/csv", []byte("a,b\n1,2\n"))
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	if st := e.status(sm.Identifier); st != adapter.ReplicaCompleted {
		t.Fatalf("replication ended %q", st)
	}
	owner := &adapter.Session{Subject: "CN=owner", Subjects: []string{"CN=owner"}}

	// updateSystemMetadata on the replica.
	cur, err := e.n.SystemMetadata(t.Context(), owner, sm.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	next := cur.Clone()
	next.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
	err = e.n.UpdateSystemMetadata(t.Context(), owner, next)
	wantKind(t, "updateSystemMetadata of a replica", err, adapter.InvalidRequest, "")

	// update (a new local version obsoleting the replica).
	data := []byte("a,b\n3,4\n")
	sum := sha1.Sum(data)
	newSM := &adapter.SystemMetadata{Identifier: "held-replica-v2", FormatID: "text/csv", Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: "SHA-1", Value: hex.EncodeToString(sum[:])}, RightsHolder: "CN=owner"}
	u, err := e.n.Stage(t.Context(), bytes.NewReader(data), []string{"SHA-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.n.Update(t.Context(), owner, sm.Identifier, newSM, u)
	wantKind(t, "update of a replica", err, adapter.InvalidRequest, "")

	// archive.
	_, err = e.n.Archive(t.Context(), owner, sm.Identifier)
	wantKind(t, "archive of a replica", err, adapter.InvalidRequest, "")

	// publish (a new local version with a DOI, obsoleting the replica).
	ids := &mintingService{}
	e.n.SetIdentifiers(ids)
	_, err = e.n.Publish(t.Context(), owner, sm.Identifier)
	wantKind(t, "publish of a replica", err, adapter.InvalidRequest, "")
	if ids.minted != 0 {
		t.Errorf("publish of a replica minted %d identifiers", ids.minted)
	}

	after, err := e.cat.Lookup(t.Context(), sm.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	if after.Meta.Archived || after.Meta.ObsoletedBy != "" || after.Meta.AccessPolicy != nil {
		t.Errorf("the replica was changed locally: archived=%v obsoletedBy=%q accessPolicy=%+v",
			after.Meta.Archived, after.Meta.ObsoletedBy, after.Meta.AccessPolicy)
	}
}

// mintingService is an identifier service that mints doi:10.5072/t-N and
// accepts everything else.
type mintingService struct{ minted int }

func (m *mintingService) Mint(context.Context) (string, error) {
	m.minted++
	return fmt.Sprintf("doi:10.5072/t-%d", m.minted), nil
}
func (m *mintingService) Owns(id string) bool                                           { return strings.HasPrefix(id, "doi:10.5072/t-") }
func (m *mintingService) Register(context.Context, string, node.IDMetadata, bool) error { return nil }
func (m *mintingService) Discard(context.Context, string) error                         { return nil }
func (m *mintingService) AutoPublish() bool                                             { return false }
