package main

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestViewsAndWhoami: listViews offers the default theme, view renders any
// theme as default (the object itself), in v1 and v2 (Metacat serves v2),
// and v2 whoami names the caller.
func TestViewsAndWhoami(t *testing.T) {
	s := startServer(t, "")
	data := []byte("site,temp\nA,21.5\n")
	sm := newSysmeta("view-1", "text/csv", "MD5", data)
	if r := s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, bytes.NewReader(data), false)...); r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	for _, v := range []int{1, 2} {
		var opts adapter.OptionList
		r := s.get(t, mnp(v, "/views"))
		if err := adapter.Decode(bytes.NewReader(r.Body), &opts); err != nil || len(opts.Option) != 1 || opts.Option[0] != "default" {
			t.Fatalf("v%d listViews: %v %+v", v, err, opts)
		}
		for _, theme := range []string{"default", "no-such-theme"} {
			r := s.get(t, mnp(v, "/views/"+theme+"/view-1"))
			if r.Status != 200 || !bytes.Equal(r.Body, data) || r.Header.Get("Content-Type") != "text/csv" {
				t.Fatalf("v%d view %s: %d %q %s", v, theme, r.Status, r.Header.Get("Content-Type"), r.Body)
			}
		}
		wantError(t, s.get(t, mnp(v, "/views/default/missing")), http.StatusNotFound, "NotFound")
	}

	var who adapter.SessionDoc
	r := s.get(t, "/d1/mn/v2/whoami")
	if err := adapter.Decode(bytes.NewReader(r.Body), &who); err != nil || who.Subject != adapter.SubjectPublic {
		t.Fatalf("whoami: %v %+v", err, who)
	}
}
