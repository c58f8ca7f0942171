package dataone

import "testing"

// TestSubmitterIsTheCaller: with forward: none the upstream sees only the
// bridge, so create and update send the caller as the submitter; with token
// and proxy the upstream sees the caller and decides, and the system metadata
// goes as it came.
func TestSubmitterIsTheCaller(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	for _, tc := range []struct{ options, want string }{
		{"forward: none", "CN=caller"},
		{"forward: proxy", "CN=from-the-client"},
		{"forward: token", "CN=from-the-client"},
	} {
		n := open(t, upstreamConfig(t, f.URL, tc.options), nil)
		s := session("CN=caller", "tok")
		data := []byte(tc.options)
		pid := "sub/" + tc.options[len("forward: "):]
		sm := newSysmeta(pid, data, "SHA-1")
		sm.Submitter = "CN=from-the-client"
		if _, err := n.Create(t.Context(), s, sm, stage(t, n, data)); err != nil {
			t.Fatal(err)
		}
		o, _ := f.lookup(pid)
		if o == nil || o.sm.Submitter != tc.want {
			t.Errorf("%s: create sent submitter %+v, want %q", tc.options, o, tc.want)
		}
		if sm.Submitter != "CN=from-the-client" {
			t.Errorf("%s: the caller's system metadata was changed: %q", tc.options, sm.Submitter)
		}
		next := newSysmeta(pid+".2", data, "SHA-1")
		next.Submitter, next.Obsoletes = "CN=from-the-client", pid
		if _, err := n.Update(t.Context(), s, pid, next, stage(t, n, data)); err != nil {
			t.Fatal(err)
		}
		if o, _ := f.lookup(pid + ".2"); o == nil || o.sm.Submitter != tc.want {
			t.Errorf("%s: update sent submitter %+v, want %q", tc.options, o, tc.want)
		}
	}
}
