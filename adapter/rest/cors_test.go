package rest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestCORS: a preflight from an allowed origin is answered 204 with the
// Access-Control-* headers on any path, known or not; one from another
// origin, or asking for a method not allowed, gets 204 and no CORS header;
// answers to an allowed origin name it and expose the headers; with CORS off
// nothing changes (OPTIONS is not a DataONE method).
func TestCORS(t *testing.T) {
	t.Parallel()
	cors := &CORS{AllowedOrigins: []string{"https://search.example.org"}, AllowedMethods: []string{"GET", "POST"},
		AllowedHeaders: []string{"Authorization"}, ExposedHeaders: []string{"X-Request-Id"}, MaxAge: time.Minute}
	on := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:C"}, MN: newFake(), CORS: cors})
	off := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:C"}, MN: newFake()})
	star := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:C"}, MN: newFake(),
		CORS: &CORS{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}}})

	const allowed, other = "https://search.example.org", "https://evil.example.net"
	tests := map[string]struct {
		h               http.Handler
		method, path    string
		origin, reqMeth string
		status          int
		allowOrigin     string
		allowMethods    string
		expose          string
	}{
		"preflight allowed":          {on, http.MethodOptions, "/d1/mn/v2/object", allowed, "POST", 204, allowed, "GET, POST", ""},
		"preflight on any path":      {on, http.MethodOptions, "/not/dataone", allowed, "GET", 204, allowed, "GET, POST", ""},
		"preflight other origin":     {on, http.MethodOptions, "/d1/mn/v2/object", other, "POST", 204, "", "", ""},
		"preflight method refused":   {on, http.MethodOptions, "/d1/mn/v2/object/x", allowed, "DELETE", 204, "", "", ""},
		"get allowed":                {on, http.MethodGet, "/d1/mn/v2/monitor/ping", allowed, "", 200, allowed, "", "X-Request-Id"},
		"get other origin":           {on, http.MethodGet, "/d1/mn/v2/monitor/ping", other, "", 200, "", "", ""},
		"get no origin":              {on, http.MethodGet, "/d1/mn/v2/monitor/ping", "", "", 200, "", "", ""},
		"off: preflight not served":  {off, http.MethodOptions, "/d1/mn/v2/object", allowed, "POST", 405, "", "", ""},
		"off: get has no headers":    {off, http.MethodGet, "/d1/mn/v2/monitor/ping", allowed, "", 200, "", "", ""},
		"any origin, no credentials": {star, http.MethodOptions, "/d1/mn/v2/node", other, "GET", 204, "*", "GET", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.reqMeth != "" {
				req.Header.Set("Access-Control-Request-Method", tc.reqMeth)
			}
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, req)
			h := w.Header()
			if w.Code != tc.status || h.Get("Access-Control-Allow-Origin") != tc.allowOrigin ||
				h.Get("Access-Control-Allow-Methods") != tc.allowMethods || h.Get("Access-Control-Expose-Headers") != tc.expose {
				t.Errorf("%s %s: %d %v, want %d origin %q methods %q expose %q", tc.method, tc.path, w.Code, h,
					tc.status, tc.allowOrigin, tc.allowMethods, tc.expose)
			}
			if tc.allowMethods != "" && tc.h == on &&
				(h.Get("Access-Control-Allow-Headers") != "Authorization" || h.Get("Access-Control-Max-Age") != "60") {
				t.Errorf("preflight headers %v, want Authorization allowed for 60 s", h)
			}
			if h.Get("Access-Control-Allow-Credentials") != "" {
				t.Errorf("credentials allowed: %v", h)
			}
		})
	}
}
