package dataone

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/rest"
)

// gmnLikeNotFound makes the fake answer a missing object as GMN does: the
// NotFound's detail code is the one of the upstream operation that was called
// (d1_gmn/app/middleware/detail_codes.py: /meta/ 1060, /object/ 1020).
func gmnLikeNotFound(f *fakeMN) {
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		code := ""
		switch {
		case strings.HasPrefix(r.URL.Path, "/mn/v2/meta/"):
			code = "1060"
		case strings.HasPrefix(r.URL.Path, "/mn/v2/object/"):
			code = "1020"
		case strings.HasPrefix(r.URL.Path, "/mn/v2/checksum/"):
			code = "1420"
		default:
			return false
		}
		e := adapter.Errorf(adapter.NotFound, "Attempted to perform operation on non-existing object").WithPID("missing")
		e.DetailCode = code
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		adapter.EncodeException(w, e)
		return true
	})
}

// TestDetailCodeOfTheClientsOperation: a client's get, describe or
// isAuthorized of a missing object must answer the detail code of the
// operation the client called (API.md §4: MNRead.get NotFound 1020,
// MNRead.describe NotFound 1380, MNAuthorization.isAuthorized NotFound 1800),
// not the detail code of the getSystemMetadata call (1060) the front made to
// the upstream to find the object.
func TestDetailCodeOfTheClientsOperation(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	gmnLikeNotFound(f)
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	h := rest.New(rest.Options{Svc: "d1", Node: rest.NodeInfo{ID: "urn:node:bridge"}, MN: n})
	for _, tc := range []struct {
		method, path, want string
	}{
		{http.MethodGet, "/d1/mn/v2/object/missing", "1020"},
		{http.MethodHead, "/d1/mn/v2/object/missing", "1380"},
		{http.MethodGet, "/d1/mn/v2/isAuthorized/missing?action=read", "1800"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		var got string
		if tc.method == http.MethodHead {
			if v := w.Header()["DataONE-Exception-DetailCode"]; len(v) > 0 { // the name as it goes on the wire
				got = v[0]
			}
		} else if ex, err := adapter.DecodeException(w.Body); err == nil {
			got = ex.DetailCode
		}
		if w.Code != http.StatusNotFound || got != tc.want {
			t.Errorf("%s %s: HTTP %d, detailCode %q; want 404 with detailCode %q", tc.method, tc.path, w.Code, got, tc.want)
		}
	}
}
