package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProbe: `d1bridge probe URL` exits 0 on a 200 and 1, with the answer,
// on anything else or no answer.
func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.Write([]byte(`{"status":"ready"}`))
			return
		}
		http.Error(w, `{"status": "not ready"}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if code, _, errOut := runBinary(t, nil, "probe", srv.URL+"/readyz"); code != 0 {
		t.Errorf("a 200: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runBinary(t, nil, "probe", srv.URL+"/other"); code != 1 || !strings.Contains(errOut, "503") || !strings.Contains(errOut, "not ready") {
		t.Errorf("a 503: exit %d, %q", code, errOut)
	}
	url := srv.URL
	srv.Close()
	if code, _, errOut := runBinary(t, nil, "probe", "--timeout", "2s", url+"/readyz"); code != 1 || !strings.Contains(errOut, "probe:") {
		t.Errorf("no answer: exit %d, %q", code, errOut)
	}
}
