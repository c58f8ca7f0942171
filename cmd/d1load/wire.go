package main

// wire is the HTTP/1.1 client of the load: requests written as bytes on
// kept-alive connections, answers read in the goroutine that sent them. The
// client shares the machine's CPUs with the node it measures, so what it costs
// is taken from the node: net/http's Transport hands each request between
// three goroutines, and cost 34 µs of CPU a describe where the node spent 27.5
// (wrk on the same node measured half as much again, 38,400 gets a second
// against 26,000). The figures of .ci/bench are the node's, not the client's.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// wire sends requests to one server (scheme, host and port) over at most
// cap(slots) connections.
type wire struct {
	scheme, host, addr string
	timeout            time.Duration
	idleTimeout        time.Duration
	// slots holds one token per connection allowed: requests beyond the cap
	// wait for one in the client, not in the node.
	slots chan struct{}
	mu    sync.Mutex
	idle  []*wireConn // the most recently used last
}

// idleTimeout closes a connection left unused that long, so that the node's
// connection count (and its goroutines and open files) follows the load
// instead of its peak: the most recently used connection is taken first, and
// those a burst opened go idle.
const idleTimeout = 30 * time.Second

type wireConn struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time
}

func newWire(base *url.URL, conns int, timeout time.Duration) (*wire, error) {
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, fmt.Errorf("%s: the scheme must be http or https", base)
	}
	addr := base.Host
	if base.Port() == "" {
		addr = net.JoinHostPort(base.Hostname(), map[string]string{"http": "80", "https": "443"}[base.Scheme])
	}
	w := &wire{scheme: base.Scheme, host: base.Host, addr: addr, timeout: timeout, idleTimeout: idleTimeout, slots: make(chan struct{}, conns)}
	for range conns {
		w.slots <- struct{}{}
	}
	return w, nil
}

// take gives the most recently used idle connection (nil: none), closing
// those idle for longer than w.idleTimeout.
func (w *wire) take() *wireConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	stale := 0
	for stale < len(w.idle) && time.Since(w.idle[stale].used) > w.idleTimeout {
		w.idle[stale].conn.Close()
		stale++
	}
	w.idle = w.idle[stale:]
	if len(w.idle) == 0 {
		return nil
	}
	c := w.idle[len(w.idle)-1]
	w.idle = w.idle[:len(w.idle)-1]
	return c
}

func (w *wire) keep(c *wireConn) {
	c.used = time.Now()
	w.mu.Lock()
	w.idle = append(w.idle, c)
	w.mu.Unlock()
}

// request is what a request sends: target is the path and query, escaped.
type request struct {
	method, target string
	auth           string // the Authorization header, or ""
	ctype          string
	body           []byte
}

// do sends req and reads the answer: its body goes to read (nil: drained),
// and do returns the status and how many bytes of body were read. A
// connection whose answer was not read to its end is closed.
func (w *wire) do(ctx context.Context, req *request, read func(status int, body io.Reader) error) (status int, n int64, err error) {
	select {
	case <-w.slots:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	defer func() { w.slots <- struct{}{} }()
	c := w.take()
	if c == nil {
		if c, err = w.dial(ctx); err != nil {
			return 0, 0, err
		}
	}
	reuse := false
	defer func() {
		if reuse {
			w.keep(c)
		} else {
			c.conn.Close()
		}
	}()
	// An interrupt ends a request in flight at once, not at its timeout.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if w.timeout > 0 {
		c.conn.SetDeadline(time.Now().Add(w.timeout))
	}
	status, n, reuse, err = c.roundTrip(w.host, req, read)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return status, n, err
}

func (w *wire) dial(ctx context.Context) (*wireConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return nil, err
	}
	if w.scheme == "https" {
		host, _, _ := net.SplitHostPort(w.addr)
		tc := tls.Client(conn, &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return &wireConn{conn: conn, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 4<<10)}, nil
}

// roundTrip writes req, reads the answer's head, hands its body to read, and
// reads what read left. reuse tells whether the connection can carry another
// request.
func (c *wireConn) roundTrip(host string, req *request, read func(int, io.Reader) error) (status int, n int64, reuse bool, err error) {
	bw := c.bw
	bw.WriteString(req.method)
	bw.WriteByte(' ')
	bw.WriteString(req.target)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\nUser-Agent: d1load\r\n")
	if req.auth != "" {
		bw.WriteString("Authorization: ")
		bw.WriteString(req.auth)
		bw.WriteString("\r\n")
	}
	if req.ctype != "" {
		bw.WriteString("Content-Type: ")
		bw.WriteString(req.ctype)
		bw.WriteString("\r\n")
	}
	if req.body != nil || req.method == "POST" || req.method == "PUT" {
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.Itoa(len(req.body)))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	bw.Write(req.body)
	if err := bw.Flush(); err != nil {
		return 0, 0, false, err
	}

	h, err := readHead(c.br)
	if err != nil {
		return 0, 0, false, err
	}
	var body io.Reader
	switch {
	case req.method == "HEAD" || h.status == 204 || h.status == 304 || h.status < 200:
		body = bytes.NewReader(nil)
	case h.chunked:
		body = &chunkedBody{r: httputil.NewChunkedReader(c.br), br: c.br}
	case h.length >= 0:
		body = io.LimitReader(c.br, h.length)
	default: // until the server closes the connection
		body, h.close = c.br, true
	}
	counted := &countingReader{r: body}
	if read != nil {
		err = read(h.status, counted)
	}
	if err == nil {
		_, err = io.Copy(io.Discard, counted)
	}
	return h.status, counted.n, err == nil && !h.close, err
}

// head is what the client needs of an answer's header.
type head struct {
	status  int
	length  int64 // -1: not given
	chunked bool
	close   bool
}

var (
	headerLength   = []byte("Content-Length")
	headerEncoding = []byte("Transfer-Encoding")
	headerConn     = []byte("Connection")
)

// readHead reads the status line and the header fields.
func readHead(br *bufio.Reader) (head, error) {
	h := head{length: -1}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("reading the status line: %w", err)
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return h, fmt.Errorf("malformed status line %q", line)
	}
	h.status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return h, fmt.Errorf("malformed status line %q", line)
	}
	h.close = line[7] == '0'
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return h, fmt.Errorf("reading the header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return h, nil
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return h, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, headerLength):
			if h.length, err = strconv.ParseInt(string(value), 10, 64); err != nil || h.length < 0 {
				return h, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, headerEncoding):
			h.chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, headerConn):
			h.close = bytes.EqualFold(value, []byte("close"))
		}
	}
}

// chunkedBody is a chunked body and its trailer, which the chunked reader
// leaves unread after the last chunk.
type chunkedBody struct {
	r    io.Reader
	br   *bufio.Reader
	done bool
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		for {
			line, terr := b.br.ReadSlice('\n')
			if terr != nil {
				return n, terr
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
	}
	return n, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
