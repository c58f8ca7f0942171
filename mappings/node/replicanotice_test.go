package node_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// TestReplicaNoticeSurvivesCNHiccup: the replica is stored and the CN answers
// its setReplicationStatus with one 503 (a restart). The notice is the only
// way the CN learns of the replica (API.md §9 step 3), so it is tried again as
// a copy would be. The job used to end done with the notice dropped, and the
// CN kept the replica "requested" for good.
func TestReplicaNoticeSurvivesCNHiccup(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	var mu sync.Mutex
	calls, told := 0, ""
	cn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`<error name="ServiceFailure" errorCode="500" detailCode="4700"><description>restarting</description></error>`))
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v2/replicaNotifications/") {
			told = r.FormValue("status")
		}
	}))
	defer cn.Close()
	e.n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
		CNBaseURL: cn.URL, Accept: true, RetryBackoff: 100 * time.Millisecond})

	sm := e.object("notice-hiccup", "text/csv", []byte("a,b\n1,2\n"))
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(8 * time.Second)
	for {
		mu.Lock()
		st, n := told, calls
		mu.Unlock()
		if st == adapter.ReplicaCompleted {
			return
		}
		if time.Now().After(deadline) {
			rec, err := e.cat.Lookup(t.Context(), sm.Identifier)
			t.Fatalf("the CN was never told the replica is completed (%d notice(s) sent, the last refused); the replica is stored: %v (err %v); job %+v",
				n, rec != nil, err, e.replJob(sm.Identifier))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
