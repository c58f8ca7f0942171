package main

// MNReplication.replicate end to end (API.md §3.4, §9): a target node pulls an
// object from a source node listed in its registry, with its own token, and
// reports the outcome to the coordinating node, here the source's CN role
// (which serves the source's catalog, where the object is).

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

const (
	replSource        = "urn:node:replSource"
	replTarget        = testNodeID // the node errors name (wantError)
	replCNSubject     = "CN=urn:node:replCN,DC=dataone,DC=org"
	replTargetSubject = "CN=urn:node:replTarget,DC=dataone,DC=org"
)

func TestReplicate(t *testing.T) {
	certPath, _, _, _ := authTokenKeyFiles(t)
	cfgDir := t.TempDir()

	// The source trusts the CN and the target (its cnSubjects), so the target's
	// token may getReplica there and notify its CN role.
	srcCfg := authWrite(t, cfgDir, "source.yaml", fmt.Appendf(nil, `node:
  cnSubjects: [%q, %q]
auth:
  tokenKeys: [%q]
`, replCNSubject, replTargetSubject, certPath))
	src := startServerConfig(t, "", srcCfg, "D1BRIDGE_NODE_ID="+replSource)

	tokenFile := authWrite(t, cfgDir, "replication.token", []byte(authToken(t, authCNKey(), replTargetSubject)+"\n"))
	tgtCfg := authWrite(t, cfgDir, "target.yaml", fmt.Appendf(nil, `node:
  cnSubjects: [%q]
  replicate: true
auth:
  tokenKeys: [%q]
nodes:
  - id: %s
    baseURL: %s/d1/mn
replication:
  cnBaseURL: %s/d1/cn
`, replCNSubject, certPath, replSource, src.URL, src.URL))
	tgt := startServerConfig(t, "", tgtCfg, "D1BRIDGE_REPLICATION_TOKEN_FILE="+tokenFile)

	cnAuth := []string{"Authorization", "Bearer " + authToken(t, authCNKey(), replCNSubject)}
	replicate := func(t *testing.T, header []string, parts ...part) *response {
		t.Helper()
		body, ctype := multipartBody(false, parts...)
		return tgt.do(t, http.MethodPost, mnp(2, "/replicate"), body, append(slices.Clone(header), "Content-Type", ctype)...)
	}
	// create stores data on s and returns its system metadata as stored.
	create := func(t *testing.T, s *server, pid string, data []byte) *adapter.SystemMetadata {
		t.Helper()
		sm := newSysmeta(pid, "application/octet-stream", "SHA-1", data)
		if r := s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(data), false)...); !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		r := s.get(t, mnp(2, "/meta/"+segment(pid)))
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		out := &adapter.SystemMetadata{}
		decode(t, r, out)
		return out
	}
	// replicaStatus waits until the CN (the source) lists the target's replica
	// of pid, and returns its status.
	replicaStatus := func(t *testing.T, pid string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := src.get(t, "/d1/cn/v2/meta/"+segment(pid))
			if !wantStatus(t, r, http.StatusOK) {
				t.FailNow()
			}
			sm := &adapter.SystemMetadata{}
			decode(t, r, sm)
			for _, rep := range sm.Replica {
				if rep.ReplicaMemberNode == replTarget {
					return rep.ReplicationStatus
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the CN lists no replica of %q on %s after 10s: %+v", pid, replTarget, sm.Replica)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// events are the events of pid in s's log, read as the CN (a trusted
	// subject sees the records of objects the node does not hold).
	events := func(t *testing.T, s *server, pid string) []string {
		t.Helper()
		r := s.get(t, mnp(2, "/log")+"?idFilter="+url.QueryEscape(pid), cnAuth...)
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		l := &adapter.Log{}
		decode(t, r, l)
		var out []string
		for _, e := range l.LogEntry {
			out = append(out, e.Event)
		}
		return out
	}

	t.Run("copies the object and notifies the CN", func(t *testing.T) {
		data := []byte("the bytes of a replicated object\n")
		sm := create(t, src, "repl-ok", data)
		r := replicate(t, cnAuth, docPart("sysmeta", sm), textPart("sourceNode", replSource))
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		if st := replicaStatus(t, sm.Identifier); st != adapter.ReplicaCompleted {
			t.Fatalf("the CN's replica status is %q, want %q", st, adapter.ReplicaCompleted)
		}
		got := tgt.get(t, mnp(2, "/object/"+segment(sm.Identifier)))
		if wantStatus(t, got, http.StatusOK) && !bytes.Equal(got.Body, data) {
			t.Errorf("the target serves %q, want %q", got.Body, data)
		}
		mr := tgt.get(t, mnp(2, "/meta/"+segment(sm.Identifier)))
		if wantStatus(t, mr, http.StatusOK) {
			rm := &adapter.SystemMetadata{}
			decode(t, mr, rm)
			if rm.Identifier != sm.Identifier || rm.Checksum != sm.Checksum || rm.Size != sm.Size {
				t.Errorf("the replica's system metadata: %s %+v %d, want %s %+v %d", rm.Identifier, rm.Checksum, rm.Size, sm.Identifier, sm.Checksum, sm.Size)
			}
			if rm.AuthoritativeMemberNode != replSource || rm.OriginMemberNode != replSource {
				t.Errorf("the replica's authoritative/origin node: %q/%q, want %s", rm.AuthoritativeMemberNode, rm.OriginMemberNode, replSource)
			}
		}
		if ev := events(t, src, sm.Identifier); !slices.Contains(ev, adapter.EventReplicate) {
			t.Errorf("the source logged %v for %q, want a replicate event", ev, sm.Identifier)
		}
		// Once here, the same pid is refused.
		r = replicate(t, cnAuth, docPart("sysmeta", sm), textPart("sourceNode", replSource))
		wantError(t, r, http.StatusConflict, "IdentifierNotUnique")
	})

	t.Run("a checksum mismatch keeps nothing", func(t *testing.T) {
		sm := create(t, src, "repl-bad-sum", []byte("bytes whose checksum the CN has wrong\n"))
		bad := sm.Clone()
		bad.Checksum.Value = checksum("SHA-1", []byte("something else"))
		r := replicate(t, cnAuth, docPart("sysmeta", bad), textPart("sourceNode", replSource))
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		if st := replicaStatus(t, sm.Identifier); st != adapter.ReplicaFailed {
			t.Fatalf("the CN's replica status is %q, want %q", st, adapter.ReplicaFailed)
		}
		wantError(t, tgt.get(t, mnp(2, "/meta/"+segment(sm.Identifier))), http.StatusNotFound, "NotFound")
		if ev := events(t, tgt, sm.Identifier); !slices.Contains(ev, adapter.EventReplicationFailed) {
			t.Errorf("the target logged %v for %q, want a %s event", ev, sm.Identifier, adapter.EventReplicationFailed)
		}
	})

	t.Run("an unknown source node fails the job", func(t *testing.T) {
		sm := create(t, src, "repl-unknown-source", []byte("bytes on a node the target does not know\n"))
		r := replicate(t, cnAuth, docPart("sysmeta", sm), textPart("sourceNode", "urn:node:nowhere"))
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		if st := replicaStatus(t, sm.Identifier); st != adapter.ReplicaFailed {
			t.Fatalf("the CN's replica status is %q, want %q", st, adapter.ReplicaFailed)
		}
		wantError(t, tgt.get(t, mnp(2, "/meta/"+segment(sm.Identifier))), http.StatusNotFound, "NotFound")
	})

	t.Run("refused requests", func(t *testing.T) {
		data := []byte("already on the target\n")
		here := create(t, tgt, "repl-here", data)
		elsewhere := newSysmeta("repl-elsewhere", "application/octet-stream", "SHA-1", data)

		r := replicate(t, nil, docPart("sysmeta", elsewhere), textPart("sourceNode", replSource))
		wantError(t, r, http.StatusUnauthorized, "InvalidToken")
		r = replicate(t, cnAuth, docPart("sysmeta", here), textPart("sourceNode", replSource))
		wantError(t, r, http.StatusConflict, "IdentifierNotUnique")
		r = replicate(t, cnAuth, docPart("sysmeta", elsewhere))
		wantError(t, r, http.StatusBadRequest, "InvalidRequest")
		r = replicate(t, cnAuth, textPart("sourceNode", replSource))
		wantError(t, r, http.StatusBadRequest, "InvalidRequest")
		odd := elsewhere.Clone()
		odd.FormatID = "application/x-no-such-format"
		r = replicate(t, cnAuth, docPart("sysmeta", odd), textPart("sourceNode", replSource))
		wantError(t, r, http.StatusBadRequest, "UnsupportedType")
	})
}
