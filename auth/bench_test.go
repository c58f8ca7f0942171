package auth

// Benchmarks of the two caches on the request path, each against its uncached
// path in the same run:
//
//	go test ./auth/ -run '^$' -bench 'AuthorizerDecision|LDAPGroups' -benchtime 2s -count 3 -v
//
// The ratio of each pair (uncached ns/op ÷ cached ns/op, of the last run) is
// logged, which go test shows with -v.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth/ldaptest"
)

// compare runs the cached and uncached sub-benchmarks and logs their ratio.
func compare(b *testing.B, cached, uncached func(b *testing.B)) {
	nsPerOp := map[string]float64{}
	for _, c := range []struct {
		name string
		f    func(b *testing.B)
	}{{"cached", cached}, {"uncached", uncached}} {
		b.Run(c.name, func(b *testing.B) {
			c.f(b)
			nsPerOp[c.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	if nsPerOp["cached"] > 0 {
		b.Logf("uncached/cached = %.1f (%.0f ns/op vs %.0f ns/op)", nsPerOp["uncached"]/nsPerOp["cached"], nsPerOp["uncached"], nsPerOp["cached"])
	}
}

// BenchmarkAuthorizerDecision is what wrap's authorize does in the Authorizer
// for a read by a group member of an object with a 6-rule policy: a remembered
// decision (cached), or deciding and remembering (uncached: a cache of size 0).
// The uncached path of a real request also reads the system metadata from the
// catalog, which the cache saves too and this does not count.
func BenchmarkAuthorizerDecision(b *testing.B) {
	s := session(strangeDN, groupDN, "cn=dataone-admins,ou=Groups,dc=example,dc=org", "http://orcid.org/0000-0002-1825-0097")
	rules := []adapter.AccessRule{}
	for i := range 5 {
		rules = append(rules, rule(adapter.PermWrite, fmt.Sprintf("CN=Other %d,O=Example,C=US,DC=cilogon,DC=org", i)))
	}
	rules = append(rules, rule(adapter.PermRead, groupDN))
	sm := object("pid-bench", rules...)
	ctx := context.Background()
	decide := func(b *testing.B, a *Authorizer) {
		for b.Loop() {
			if _, allowed, ok := a.Cached(s, "mn", sm.Identifier, Read); ok && allowed {
				continue
			}
			mark := a.Mark()
			err := a.Check(ctx, s, Read, sm)
			a.Remember(s, "mn", sm.Identifier, Read, sm.Identifier, err == nil, mark)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	compare(b,
		func(b *testing.B) { decide(b, NewAuthorizer(Policy{CacheSize: 10_000, CacheTTL: time.Minute})) },
		func(b *testing.B) { decide(b, NewAuthorizer(Policy{})) })
}

// BenchmarkAuthorizerInvalidate is what every write costs in the Authorizer:
// forgetting decisions on its PID, with no recent change (none) and with the
// minute of changes a node creating 1,000 objects a second keeps (busy). The
// logged ratio busy/none stays near 1 when the cost does not grow with the
// rate of writes:
//
//	go test ./auth/ -run '^$' -bench AuthorizerInvalidate -count 3 -v
func BenchmarkAuthorizerInvalidate(b *testing.B) {
	nsPerOp := map[string]float64{}
	for _, c := range []struct {
		name   string
		recent int
	}{{"none", 0}, {"busy", 60_000}} {
		b.Run(c.name, func(b *testing.B) {
			a := NewAuthorizer(Policy{CacheSize: 10_000, CacheTTL: time.Minute})
			pids := make([]string, c.recent+1<<16)
			for i := range pids {
				pids[i] = fmt.Sprintf("urn:uuid:bench-%08d", i)
			}
			for _, p := range pids[:c.recent] {
				a.Invalidate(p)
			}
			i := c.recent
			for b.Loop() {
				a.Invalidate(pids[i%len(pids)])
				i++
			}
			nsPerOp[c.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	if nsPerOp["none"] > 0 {
		b.Logf("busy/none = %.2f (%.0f ns/op vs %.0f ns/op)", nsPerOp["busy"]/nsPerOp["none"], nsPerOp["busy"], nsPerOp["none"])
	}
}

// BenchmarkLDAPGroups looks bob's groups up in a real slapd on loopback: from
// the cache (cached), or with a search every time (uncached: a TTL below the
// cache's minimum disables it).
func BenchmarkLDAPGroups(b *testing.B) {
	srv := ldaptest.Start(b)
	ctx := context.Background()
	lookup := func(b *testing.B, ttl time.Duration) {
		d, obs := newDirectory(b, srv, func(o *LDAPOptions) { o.CacheTTL = ttl })
		for b.Loop() {
			gs, err := d.Groups(ctx, bobLDAP)
			if err != nil || len(gs) != 2 {
				b.Fatalf("Groups: %q, %v", gs, err)
			}
		}
		b.ReportMetric(float64(obs.count(""))/float64(b.N), "searches/op")
	}
	compare(b, func(b *testing.B) { lookup(b, time.Hour) }, func(b *testing.B) { lookup(b, time.Nanosecond) })
}
