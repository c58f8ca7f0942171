package d1client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestErrors: a failed call is the DataONE error it carries, from the
// <error> body or, on HEAD, the DataONE-Exception-* headers; an answer that
// is no DataONE error is a ServiceFailure quoting it (NotFound for a 404).
func TestErrors(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("HEAD /mn/v2/object/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "there":
			w.Header().Set("DataONE-Checksum", "SHA256,ABCDEF")
			w.Header().Set("Content-Length", "42")
		case "proxy":
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.Header().Set("DataONE-Exception-Name", "NotFound")
			w.Header().Set("DataONE-Exception-Description", "no object "+r.PathValue("id"))
			w.WriteHeader(http.StatusNotFound)
		}
	})
	mux.HandleFunc("GET /mn/v2/whoami", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`<?xml version="1.0"?><error name="InvalidToken" errorCode="401" detailCode="1"><description>bad token</description></error>`))
			return
		}
		adapter.Encode(w, &adapter.SessionDoc{Subject: "CN=x"}, 2)
	})
	mux.HandleFunc("GET /cn/v2/node/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("<html>no such page</html>"))
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	ctx := context.Background()
	mn := &Client{Base: ts.URL + "/mn", HTTP: ts.Client()}

	d, err := mn.Describe(ctx, "there")
	if err != nil || d.Size != 42 || d.Checksum != (adapter.Checksum{Algorithm: "SHA-256", Value: "abcdef"}) {
		t.Errorf("describe: %+v %v", d, err)
	}
	if _, err := mn.Describe(ctx, "gone"); !adapter.IsKind(err, adapter.NotFound) || !strings.Contains(err.Error(), "no object gone") {
		t.Errorf("describe of a missing object: %v", err)
	}
	if _, err := mn.Describe(ctx, "proxy"); !adapter.IsKind(err, adapter.ServiceFailure) || !strings.Contains(err.Error(), "502") {
		t.Errorf("describe through a failing proxy: %v", err)
	}
	if _, err := mn.Whoami(ctx); !adapter.IsKind(err, adapter.InvalidToken) || !strings.Contains(err.Error(), "bad token") {
		t.Errorf("whoami without the token: %v", err)
	}
	mn.Token = func() (string, error) { return "tok", nil }
	if who, err := mn.Whoami(ctx); err != nil || who != "CN=x" {
		t.Errorf("whoami: %q %v", who, err)
	}
	cn := &Client{Base: ts.URL + "/cn", HTTP: ts.Client()}
	if known, _, err := cn.Registered(ctx, "urn:node:x"); known || err != nil {
		t.Errorf("a 404 page: known %v, %v; want not known", known, err)
	}
	for raw, want := range map[string]string{
		"http://h:8080/d1": "http://h:8080/d1/mn", "https://h/mn/": "https://h/mn", "https://h/metacat/d1/mn": "https://h/metacat/d1/mn",
	} {
		if got, err := BaseURL(raw, "mn"); err != nil || got != want {
			t.Errorf("BaseURL(%q): %q %v, want %q", raw, got, err, want)
		}
	}
	if _, err := BaseURL("ftp://h/", "mn"); err == nil {
		t.Error("BaseURL of an ftp URL: no error")
	}
}
