package dataone

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

// TestPackageCutResourceMapIsServiceFailure: with forward none, the
// front reads the resource map from the upstream to check its members for a
// caller it does not trust. When the upstream cuts that body off (a network
// failure, an upstream crash), getPackage must fail with ServiceFailure
// (2871), the upstream's failure, not InvalidRequest (2873), which says the
// client's id is not a resource map (API.md MNPackage.getPackage).
func TestPackageCutResourceMapIsServiceFailure(t *testing.T) {
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
		panic(http.ErrAbortHandler)
	})
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	s := session("CN=reader", "")
	canRead := func(sm *adapter.SystemMetadata) bool {
		return sm.Identifier != "" && sm.AccessPolicy != nil // the fake's objects are public
	}
	_, err := n.Package(t.Context(), s, adapter.PackageBagIt097, "map", canRead)
	e := adapter.AsException(err)
	if err == nil || e.Kind != adapter.ServiceFailure {
		t.Errorf("got %v; want a ServiceFailure: the upstream cut the resource map off", err)
	}
	if err != nil && strings.Contains(e.Description, "cannot be read") && e.Kind == adapter.InvalidRequest {
		t.Logf("the client is told its resource map is invalid: %q", e.Description)
	}
}
