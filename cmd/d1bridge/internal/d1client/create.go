package d1client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"

	"github.com/d1bridge/d1bridge/adapter"
)

// Create is MNStorage.create (POST object): parts pid, object and sysmeta,
// streamed, never held whole. The object part is read from body; the system
// metadata comes from meta, called before the object when sysmetaFirst (the
// node then hashes the object once, with the named algorithm) and after
// body's last byte otherwise, so that meta can give the size and checksum
// the read computed (the node hashes the bytes as they come with the
// algorithms it computes speculatively, and checks them once the system
// metadata arrives, as with the Python client's order). A failed read of
// body aborts the request, and the node keeps nothing.
func (c *Client) Create(ctx context.Context, pid string, body io.Reader, meta func() (*adapter.SystemMetadata, error), sysmetaFirst bool) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeCreate(mw, pid, body, meta, sysmetaFirst)) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url("object"), pr)
	if err != nil {
		pr.Close()
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.do(req)
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer when the node answered before reading all
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var id adapter.Identifier
	if err := adapter.Decode(resp.Body, &id); err != nil {
		return fmt.Errorf("create of %q: the answer: %w", pid, err)
	}
	if id.Value != pid {
		return adapter.Errorf(adapter.ServiceFailure, "create of %q answered the identifier %q", pid, id.Value)
	}
	return nil
}

func writeCreate(mw *multipart.Writer, pid string, body io.Reader, meta func() (*adapter.SystemMetadata, error), sysmetaFirst bool) error {
	if err := mw.WriteField("pid", pid); err != nil {
		return err
	}
	sysmeta := func() error {
		sm, err := meta()
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := adapter.Encode(&b, sm, 2); err != nil {
			return err
		}
		return writePart(mw, "sysmeta", "sysmeta.xml", "text/xml", &b)
	}
	if sysmetaFirst {
		if err := sysmeta(); err != nil {
			return err
		}
	}
	if err := writePart(mw, "object", "object", "application/octet-stream", body); err != nil {
		return err
	}
	if !sysmetaFirst {
		if err := sysmeta(); err != nil {
			return err
		}
	}
	return mw.Close()
}

// writePart writes one file part of a multipart/form-data body.
func writePart(mw *multipart.Writer, name, filename, ctype string, r io.Reader) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, name, filename))
	h.Set("Content-Type", ctype)
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, r)
	return err
}

// Node is the node's document (GET node) as it is served, and decoded.
func (c *Client) Node(ctx context.Context) ([]byte, *adapter.Node, error) {
	u := c.url("node")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	var n adapter.Node
	if err := adapter.Decode(bytes.NewReader(raw), &n); err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return raw, &n, nil
}

// Registered is CNRegister.getNodeCapabilities (GET node/{id} on a
// coordinating node): whether the CN has the node, and its document there.
// NotFound is false with no error.
func (c *Client) Registered(ctx context.Context, id string) (bool, *adapter.Node, error) {
	var n adapter.Node
	err := c.getDoc(ctx, c.url("node", id), &n)
	switch {
	case adapter.IsKind(err, adapter.NotFound):
		return false, nil, nil
	case err != nil:
		return false, nil, err
	}
	return true, &n, nil
}

// Register is CNRegister.register (POST node, part "node"): it answers what
// the CN said (a nodeReference document).
func (c *Client) Register(ctx context.Context, doc []byte) ([]byte, error) {
	return c.sendNode(ctx, http.MethodPost, c.url("node"), doc)
}

// UpdateNodeCapabilities is CNRegister.updateNodeCapabilities (PUT
// node/{id}, part "node"): it answers what the CN said (a boolean).
func (c *Client) UpdateNodeCapabilities(ctx context.Context, id string, doc []byte) ([]byte, error) {
	return c.sendNode(ctx, http.MethodPut, c.url("node", id), doc)
}

func (c *Client) sendNode(ctx context.Context, method, u string, doc []byte) ([]byte, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if err := writePart(mw, "node", "node.xml", "text/xml", bytes.NewReader(doc)); err != nil {
		return nil, err
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, &b)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}
