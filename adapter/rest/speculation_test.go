package rest

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestSpeculationFollowsClients: an object that comes before its system
// metadata is hashed with all of adapter.SpeculativeAlgorithms until the node
// has seen speculationWindow creates, then with the algorithms those named,
// whatever spelling they used; the order of the parts does not matter to what
// is observed, and one sent first is hashed with its own algorithm only.
func TestSpeculationFollowsClients(t *testing.T) {
	f := newFake()
	h, _ := testEngine(t, f, true)
	create := func(i int, alg string, sysmetaFirst bool) []string {
		t.Helper()
		pid := fmt.Sprintf("spec-%d", i)
		sm := fmt.Sprintf(`<d1:systemMetadata xmlns:d1="http://ns.dataone.org/service/types/v2.0"><serialVersion>1</serialVersion>`+
			`<identifier>%s</identifier><formatId>text/plain</formatId><size>5</size><checksum algorithm="%s">0</checksum>`+
			`<rightsHolder>public</rightsHolder></d1:systemMetadata>`, pid, alg)
		parts := []formPart{{"pid", pid}, {"object", "hello"}, {"sysmeta", sm}}
		if sysmetaFirst {
			parts = []formPart{{"pid", pid}, {"sysmeta", sm}, {"object", "hello"}}
		}
		if w := serveForm(h, http.MethodPost, "/d1/mn/v2/object", parts...); w.Code != http.StatusOK {
			t.Fatalf("create %s: %d %s", pid, w.Code, w.Body.String())
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.staged
	}
	for i := range speculationWindow {
		alg := "SHA-1"
		if i%2 == 0 {
			alg = "SHA1" // another spelling of the same
		}
		if got := create(i, alg, i == 3); i != 3 && !slices.Equal(got, adapter.SpeculativeAlgorithms) {
			t.Fatalf("create %d of the first %d hashed with %v, want %v", i, speculationWindow, got, adapter.SpeculativeAlgorithms)
		}
	}
	if got := create(100, "SHA-1", false); !slices.Equal(got, []string{"SHA-1"}) {
		t.Errorf("after %d SHA-1 creates an object first is hashed with %v, want [SHA-1]", speculationWindow, got)
	}
	if got := create(101, "SHA-256", true); !slices.Equal(got, []string{"SHA-256"}) {
		t.Errorf("system metadata first naming SHA-256: hashed with %v", got)
	}
	if got := create(102, "MD5", false); !slices.Equal(got, []string{"SHA-1", "SHA-256"}) {
		t.Errorf("after a SHA-256 create among SHA-1 ones: hashed with %v, want [SHA-1 SHA-256]", got)
	}
	for i := range speculationWindow {
		create(200+i, "MD5", false)
	}
	if got := create(300, "MD5", false); !slices.Equal(got, []string{"MD5"}) {
		t.Errorf("after %d MD5 creates: hashed with %v, want [MD5]", speculationWindow, got)
	}
}
