package rest

import (
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestUploadsBound: the per-client and the overall bounds refuse at once with
// InsufficientResources, and a release frees the slot (once, however often
// it is called).
func TestUploadsBound(t *testing.T) {
	u := NewUploads(3, 2)
	take := func(client string) func() {
		t.Helper()
		release, err := u.acquire(client)
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		return release
	}
	refused := func(client, want string) {
		t.Helper()
		_, err := u.acquire(client)
		ex := adapter.AsException(err)
		if err == nil || ex.Kind != adapter.InsufficientResources || !strings.Contains(ex.Description, want) {
			t.Fatalf("%s: %v, want InsufficientResources saying %q", client, err, want)
		}
	}
	a1 := take("10.0.0.1")
	take("10.0.0.1")
	refused("10.0.0.1", "from 10.0.0.1 (at most 2")
	take("10.0.0.2")
	refused("10.0.0.3", "on this node (at most 3")
	a1()
	a1() // a second release gives nothing back
	take("10.0.0.3")
	refused("10.0.0.1", "on this node")
	var none *Uploads // no bound
	if _, err := none.acquire("x"); err != nil {
		t.Fatal(err)
	}
}
