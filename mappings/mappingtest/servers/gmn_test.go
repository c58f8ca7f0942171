package servers

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStartGMN: GMN answers over TLS, knows the trusted client certificate's
// subject, and refuses a create from a caller without one.
func TestStartGMN(t *testing.T) {
	start := time.Now()
	g := StartGMN(t, GMNOptions{})
	t.Logf("GMN started in %v at %s", time.Since(start).Round(time.Millisecond), g.BaseURL)

	get := func(c *http.Client, path string) (int, string) {
		t.Helper()
		resp, err := c.Get(g.BaseURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(g.Client(t, false), "/v2/node"); code != 200 || !strings.Contains(body, g.NodeID) {
		t.Fatalf("node: %d %s", code, body)
	}
	// A create without a client certificate is public's: refused.
	resp, err := g.Client(t, false).Post(g.BaseURL+"/v2/object", "multipart/form-data; boundary=x", strings.NewReader("--x--\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), "NotAuthorized") || !strings.Contains(string(b), "public") {
		t.Fatalf("create without a certificate: %d %s", resp.StatusCode, b)
	}
}
