package dataone

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

// TestPackageResourceMapFailing: with forward none the front reads the
// resource map from the upstream to check its members for a caller it does
// not trust. A body the upstream cuts off (a network failure, a crash) was
// InvalidRequest (2873: "the id is not a resource map"), and a body that
// stalls after its headers held getPackage forever (the read streamed, with
// no overall timeout). Both are the upstream's failure: ServiceFailure
// (2871), the stall after the upstream's timeout.
func TestPackageResourceMapFailing(t *testing.T) {
	t.Parallel()
	for name, after := range map[string]func(r *http.Request){
		"cut":   func(*http.Request) { panic(http.ErrAbortHandler) },
		"stall": func(r *http.Request) { <-r.Context().Done() },
	} {
		t.Run(name, func(t *testing.T) {
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
				w.Write(rdf[:len(rdf)/2])
				http.NewResponseController(w).Flush()
				after(r)
				return true
			})
			u := upstreamConfig(t, f.URL, "")
			u.Timeout = time.Second
			n := open(t, u, nil)
			canRead := func(sm *adapter.SystemMetadata) bool { return sm.Identifier != "" && sm.AccessPolicy != nil } // the fake's are public
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
				t.Fatalf("getPackage still waits after 5s (upstream timeout %v)", u.Timeout)
			}
		})
	}
}
