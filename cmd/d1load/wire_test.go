package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts the connections a test server accepted and how many
// were open at most at once.
type connCounter struct {
	opened, open, most atomic.Int64
}

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.opened.Add(1)
		n := c.open.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

func newWireServer(t *testing.T, h http.Handler, conns int) (*wire, *connCounter) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	cc := &connCounter{}
	srv.Config.ConnState = cc.track
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	w, err := newWire(u, conns, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return w, cc
}

// TestWireReadsEveryFraming: bodies by length, chunked (with a trailer) and
// none (HEAD, 304) are read whole and the connection carries the next
// request; an answer that closes the connection makes the next one dial.
func TestWireReadsEveryFraming(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("d1", 3000)
	w, cc := newWireServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer t" && r.URL.Path != "/anon" {
			http.Error(rw, "no credential: "+got, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/length", "/anon":
			rw.Header().Set("Content-Length", fmt.Sprint(len(body)))
			io.WriteString(rw, body)
		case "/chunked":
			rw.Header().Set("Trailer", "X-Sum")
			for i := 0; i < len(body); i += 1000 {
				io.WriteString(rw, body[i:i+1000])
				rw.(http.Flusher).Flush()
			}
			rw.Header().Set("X-Sum", "done")
		case "/notmodified":
			rw.WriteHeader(http.StatusNotModified)
		case "/close":
			rw.Header().Set("Connection", "close")
			io.WriteString(rw, body)
		case "/post":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(rw, "%s %s %d", r.Method, r.Header.Get("Content-Type"), len(b))
		}
	}), 1)
	for _, tc := range []struct {
		req      request
		status   int
		want     string // the body read, or its length for HEAD
		newConns int64
	}{
		{request{method: "GET", target: "/length", auth: "Bearer t"}, 200, body, 1},
		{request{method: "GET", target: "/chunked", auth: "Bearer t"}, 200, body, 0},
		{request{method: "HEAD", target: "/length", auth: "Bearer t"}, 200, "", 0},
		{request{method: "GET", target: "/notmodified", auth: "Bearer t"}, 304, "", 0},
		{request{method: "GET", target: "/anon"}, 200, body, 0},
		{request{method: "GET", target: "/length"}, 401, "no credential: \n", 0},
		{request{method: "POST", target: "/post", auth: "Bearer t", ctype: "text/xml", body: []byte("<a/>")}, 200, "POST text/xml 4", 0},
		{request{method: "GET", target: "/close", auth: "Bearer t"}, 200, body, 0},
		{request{method: "GET", target: "/length", auth: "Bearer t"}, 200, body, 1},
	} {
		before := cc.opened.Load()
		var got []byte
		status, n, err := w.do(context.Background(), &tc.req, func(_ int, r io.Reader) (err error) {
			got, err = io.ReadAll(r)
			return err
		})
		if err != nil || status != tc.status || string(got) != tc.want || n != int64(len(tc.want)) {
			t.Errorf("%s %s: status %d, %d bytes %.40q, %v; want %d, %.40q", tc.req.method, tc.req.target, status, n, got, err, tc.status, tc.want)
		}
		if opened := cc.opened.Load() - before; opened != tc.newConns {
			t.Errorf("%s %s opened %d connections, want %d", tc.req.method, tc.req.target, opened, tc.newConns)
		}
	}
}

// TestWireKeepsToItsConnections: requests beyond the cap wait for a
// connection in the client, and an idle connection is closed after the idle
// timeout.
func TestWireKeepsToItsConnections(t *testing.T) {
	t.Parallel()
	w, cc := newWireServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
	}), 3)
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			if st, _, err := w.do(context.Background(), &request{method: "GET", target: "/"}, nil); err != nil || st != 200 {
				t.Errorf("status %d, %v", st, err)
			}
		})
	}
	wg.Wait()
	if most, opened := cc.most.Load(), cc.opened.Load(); most > 3 || opened != 3 {
		t.Errorf("24 requests over 3 connections: %d open at most, %d opened; want 3 and 3", most, opened)
	}
	w.idleTimeout = 10 * time.Millisecond
	time.Sleep(20 * time.Millisecond)
	w.do(context.Background(), &request{method: "GET", target: "/"}, nil)
	deadline := time.Now().Add(2 * time.Second)
	for cc.open.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if open := cc.open.Load(); open != 1 {
		t.Errorf("after the idle timeout %d connections are open, want the 1 just used", open)
	}
}

// TestWireInterrupt: a request in flight ends when its context is canceled,
// not at its timeout, and says so.
func TestWireInterrupt(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	w, _ := newWireServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { <-release }), 1)
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	st, _, err := w.do(ctx, &request{method: "GET", target: "/"}, nil)
	if !errors.Is(err, context.Canceled) || st != 0 || time.Since(start) > 2*time.Second {
		t.Errorf("canceled after 50 ms: status %d, %v after %v; want context.Canceled at once", st, err, time.Since(start))
	}
}

// TestReadHeadRefusesWhatItCannotFrame: a malformed status line or length is
// an error, not a guess.
func TestReadHeadRefusesWhatItCannotFrame(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"SPDY/3 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
	} {
		if h, err := readHead(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("readHead(%q) = %+v, want an error", in, h)
		}
	}
	h, err := readHead(bufio.NewReader(strings.NewReader("HTTP/1.0 200 OK\r\ncontent-length: 7\r\n\r\n")))
	if err != nil || h.status != 200 || h.length != 7 || !h.close {
		t.Errorf("HTTP/1.0 answer: %+v, %v; want status 200, length 7, closed after", h, err)
	}
}
