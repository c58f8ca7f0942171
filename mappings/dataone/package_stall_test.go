package dataone

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

// TestPackageStalledResourceMapTimesOut: the front's own read of the
// resource map (checkPackage, forward none, a caller it does not trust) is a
// metadata read whose answer the client waits for before its first byte; it
// was made as a stream with no overall timeout, and an upstream that sent the
// headers and then stalled held getPackage forever, where every other
// metadata read fails with a ServiceFailure after the upstream's timeout.
func TestPackageStalledResourceMapTimesOut(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.put("d1", "", []byte("one"))
	rdf := datapackage.ResourceMap("map", "d1", nil, time.Now())
	f.put("map", "", rdf)
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/mn/v2/object/map" {
			return false
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(rdf)))
		w.Write(rdf[:10])
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
		return true
	})
	u := upstreamConfig(t, f.URL, "")
	u.Timeout = time.Second
	n := open(t, u, nil)
	canRead := func(sm *adapter.SystemMetadata) bool { return sm.Identifier != "" && sm.AccessPolicy != nil }
	done := make(chan error, 1)
	go func() {
		_, err := n.Package(t.Context(), session("CN=reader", ""), adapter.PackageBagIt097, "map", canRead)
		done <- err
	}()
	select {
	case err := <-done:
		if e := adapter.AsException(err); err == nil || e.Kind != adapter.ServiceFailure {
			t.Errorf("got %v, want a ServiceFailure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("getPackage still waits on a stalled upstream after 5s (upstream timeout %v)", u.Timeout)
	}
}
