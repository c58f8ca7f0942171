package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestLimitsStalledSysmetaPart: the README's limits table says a request body
// that stops flowing for limits.bodyStallTimeout is ended with InvalidRequest
// "the request body stalled". A create whose body stalls while the sysmeta
// part (sent before the object, as many clients do) is being read was
// answered InvalidSystemMetadata: readDoc turned every read error of the
// part, the stall too, into the part's document kind.
func TestLimitsStalledSysmetaPart(t *testing.T) {
	t.Parallel()
	const gap = time.Second
	s := startServer(t, "", "D1BRIDGE_LIMITS_BODYSTALLTIMEOUT="+gap.String())
	host := strings.TrimPrefix(s.URL, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := []byte("stalled in the sysmeta")
	sm := newSysmeta("rvmon-stalled-sysmeta", "application/octet-stream", "SHA-256", data)
	var doc bytes.Buffer
	if err := adapter.Encode(&doc, sm, 2); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "--%s\r\nContent-Disposition: form-data; name=\"pid\"\r\n\r\n%s\r\n", stallBoundary, sm.Identifier)
	fmt.Fprintf(&b, "--%s\r\nContent-Disposition: form-data; name=\"sysmeta\"; filename=\"sysmeta.xml\"\r\nContent-Type: text/xml\r\n\r\n", stallBoundary)
	b.Write(doc.Bytes()[:doc.Len()/2]) // half the document, then nothing
	head := fmt.Sprintf("POST /d1/mn/v2/object HTTP/1.1\r\nHost: %s\r\nContent-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n",
		host, stallBoundary, 1<<20)
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	r, err := readAnswer(t, c, gap+5*time.Second)
	if err != nil {
		t.Fatalf("the stalled upload was not answered: %v", err)
	}
	e := wantError(t, r, http.StatusBadRequest, "InvalidRequest")
	if !strings.Contains(e.Description, "stalled") {
		t.Errorf("the description does not say the body stalled: %q", e.Description)
	}
}

// TestLimitsHeaderSizeExact: the README's limits table bounds "the request
// line and headers" at limits.maxHeaderBytes (64 KiB by default; "a larger
// block: 431"). net/http lets 4,096 bytes more through (it reads
// MaxHeaderBytes+4096): a 66 KiB header block was served. 60 KiB is.
func TestLimitsHeaderSizeExact(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	req, err := http.NewRequest(http.MethodGet, s.URL+"/d1/mn/v2/monitor/ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 66<<10))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 66 KiB header block (limits.maxHeaderBytes 64 KiB): %d, want 431", resp.StatusCode)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 60<<10))
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a 60 KiB header block: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}
