package rest

import (
	"context"
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// panicNode is a fake member node whose getSystemMetadata panics (a bug in a
// mapping): the recover middleware answers 500 ServiceFailure.
type panicNode struct{ *fakeNode }

func (panicNode) SystemMetadata(ctx context.Context, s *adapter.Session, id string) (*adapter.SystemMetadata, error) {
	panic("a bug in the mapping")
}

// TestPanicIsCounted: a request whose handler panics is answered 500,
// and that 5xx must show in d1bridge_requests_total (the series the
// D1BridgeHighErrorRatio alert and the dashboard's error ratio read) and in
// the per-operation counts of monitor/event and the status page. Today
// wrap.s ObserveRequest was skipped when the handler panics (the panic unwinds
// past it to engine.recover), so the failure is invisible to monitoring.
func TestPanicIsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test")
	p := panicNode{newFake()}
	h := New(Options{
		Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST", Name: "t", Description: "d", BaseURL: "http://x/d1",
			ContactSubjects: []string{"CN=a"}},
		MN: p, Authorizer: auth.NewAuthorizer(auth.Policy{Trusted: []string{adapter.SubjectPublic}}), Metrics: m, MaxUploadSize: 1 << 20,
	})
	w := serve(h, http.MethodGet, "/d1/mn/v2/meta/p1")
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("a panicking handler answered %d, want 500", w.Code)
	}
	if n := testutil.ToFloat64(requestsCounter(reg, "mn", "v2", "MNRead.getSystemMetadata", "500")); n != 1 {
		t.Errorf("d1bridge_requests_total{operation=MNRead.getSystemMetadata,code=500} = %v after a 500 answer, want 1", n)
	}
	var errs uint64
	for _, op := range m.Operations() {
		errs += op.Errors
	}
	if errs != 1 {
		t.Errorf("monitor/event operations count %d errors after a 500 answer, want 1", errs)
	}
}
