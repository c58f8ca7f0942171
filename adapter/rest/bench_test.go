package rest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkDescribeInstrumentation is describe (HEAD /object/{id}) through the
// real engine, with the metrics on and off in the same run: the cost of the
// instrumentation. The store is a fake, so the figure is the engine's own.
//
//	go test -run '^$' -bench DescribeInstrumentation -count 5 ./adapter/rest/
func BenchmarkDescribeInstrumentation(b *testing.B) {
	for _, c := range []struct {
		name string
		m    func() *metrics.Metrics
	}{
		{"metrics=off", func() *metrics.Metrics { return nil }},
		{"metrics=on", func() *metrics.Metrics { return metrics.New(prometheus.NewRegistry(), "bench") }},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newFake()
			f.meta.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
			h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:B"}, MN: f, CN: f,
				Authorizer: auth.NewAuthorizer(auth.Policy{CacheSize: 1000}), Metrics: c.m()})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodHead, "/d1/mn/v2/object/a%2Fb", nil))
					if w.Code != http.StatusOK {
						b.Fatalf("describe: %d", w.Code)
					}
				}
			})
		})
	}
}
