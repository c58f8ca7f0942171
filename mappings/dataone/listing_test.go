package dataone

import (
	"slices"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestListingIdentity: how listObjects and getLogRecords are asked, by
// forward mode and caller. With forward none the bridge's credential (here
// its token) goes only with a trusted caller's listing; the public's goes
// without it; an authenticated caller's is read as the bridge and filtered by
// the front through each object's system metadata. token and proxy forward
// the caller's listing as before, once, unfiltered by the front.
func TestListingIdentity(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.put("open", "", []byte("open"))
	closed := f.put("closed", "", []byte("closed"))
	closed.AccessPolicy, closed.RightsHolder = nil, "CN=owner"
	shared := f.put("shared", "", []byte("shared"))
	shared.RightsHolder = "CN=someone"
	shared.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"CN=group"}, Permission: []adapter.Permission{adapter.PermWrite}}}}
	f.set(func(f *fakeMN) {
		for _, id := range []string{"open", "closed", "shared", "closed"} {
			f.log = append(f.log, adapter.LogEntry{Identifier: id, Event: adapter.EventCreate})
		}
	})

	trusted := session("CN=admin", "caller-token")
	owner := session("CN=owner", "caller-token")
	member := session("CN=member", "caller-token")
	member.Subjects = append(member.Subjects, "CN=group")
	type caller struct {
		s          *adapter.Session
		readableBy []string
	}
	callers := map[string]caller{
		"trusted": {trusted, nil},
		"public":  {adapter.PublicSession(), []string{adapter.SubjectPublic}},
		"owner":   {owner, owner.Subjects},
		"member":  {member, member.Subjects},
	}
	for _, tc := range []struct {
		forward, options string
		caller           string
		auth             string   // the Authorization header of the listing
		subject          string   // proxy: the subject header
		metas            bool     // the front read system metadata to filter
		objects          []string // listed
		events           []string // identifiers of the log records
	}{
		{"none", "{token: bridge-token}", "trusted", "Bearer bridge-token", "", false, []string{"closed", "open", "shared"}, []string{"open", "closed", "shared", "closed"}},
		{"none", "{token: bridge-token}", "public", "", "", false, []string{"closed", "open", "shared"}, []string{"open", "closed", "shared", "closed"}},
		{"none", "{token: bridge-token}", "owner", "Bearer bridge-token", "", true, []string{"closed", "open"}, []string{"open", "closed", "closed"}},
		{"none", "{token: bridge-token}", "member", "Bearer bridge-token", "", true, []string{"open", "shared"}, []string{"open", "shared"}},
		{"token", "{forward: token}", "member", "Bearer caller-token", "", false, []string{"closed", "open", "shared"}, []string{"open", "closed", "shared", "closed"}},
		{"token", "{forward: token}", "public", "", "", false, []string{"closed", "open", "shared"}, []string{"open", "closed", "shared", "closed"}},
		{"proxy", "{forward: proxy, subjectHeader: X-Subject}", "owner", "", "CN=owner", false, []string{"closed", "open", "shared"}, []string{"open", "closed", "shared", "closed"}},
		{"proxy", "{forward: proxy, subjectHeader: X-Subject}", "public", "", "", false, []string{"closed", "open", "shared"}, []string{"open", "closed", "shared", "closed"}},
	} {
		t.Run(tc.forward+"/"+tc.caller, func(t *testing.T) {
			// The fake does not filter: what the public gets from it here is
			// everything, and the test looks at how it was asked.
			n := open(t, upstreamConfig(t, f.URL, tc.options), nil)
			cl := callers[tc.caller]
			f.requests()
			l, err := n.ListObjects(t.Context(), cl.s, adapter.ListQuery{Count: 10, ReadableBy: cl.readableBy})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, o := range l.ObjectInfo {
				ids = append(ids, o.Identifier)
			}
			if !slices.Equal(ids, tc.objects) || l.Total != len(tc.objects) {
				t.Errorf("listObjects: total %d, %q; want %q", l.Total, ids, tc.objects)
			}
			log, err := n.LogRecords(t.Context(), cl.s, adapter.LogQuery{Count: 10, ReadableBy: cl.readableBy})
			if err != nil {
				t.Fatal(err)
			}
			ids = nil
			for _, e := range log.LogEntry {
				ids = append(ids, e.Identifier)
			}
			if !slices.Equal(ids, tc.events) || log.Total != len(tc.events) {
				t.Errorf("getLogRecords: total %d, %q; want %q", log.Total, ids, tc.events)
			}
			metas := 0
			for _, r := range f.requests() {
				switch r.Path {
				case "/mn/v2/object", "/mn/v2/log":
					if got := r.Header.Get("Authorization"); got != tc.auth {
						t.Errorf("%s sent Authorization %q, want %q", r.Path, got, tc.auth)
					}
					if got := r.Header.Get("X-Subject"); got != tc.subject {
						t.Errorf("%s sent X-Subject %q, want %q", r.Path, got, tc.subject)
					}
				default:
					metas++
					if got := r.Header.Get("Authorization"); got != "Bearer bridge-token" {
						t.Errorf("%s sent Authorization %q", r.Path, got)
					}
				}
			}
			if (metas > 0) != tc.metas {
				t.Errorf("%d system metadata reads", metas)
			}
		})
	}

	t.Run("paging of a filtered listing", func(t *testing.T) {
		n := open(t, upstreamConfig(t, f.URL, ""), nil)
		l, err := n.ListObjects(t.Context(), owner, adapter.ListQuery{Start: 1, Count: 5, ReadableBy: owner.Subjects})
		if err != nil || l.Total != 2 || l.Start != 1 || l.Count != 1 || len(l.ObjectInfo) != 1 || l.ObjectInfo[0].Identifier != "open" {
			t.Errorf("%+v, %v", l, err)
		}
		l, err = n.ListObjects(t.Context(), owner, adapter.ListQuery{Start: 7, Count: 5, ReadableBy: owner.Subjects})
		if err != nil || l.Total != 2 || len(l.ObjectInfo) != 0 {
			t.Errorf("past the end: %+v, %v", l, err)
		}
	})
}
