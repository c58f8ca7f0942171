package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/minio/minio-go/v7"
)

// maxParts is S3's limit on the parts of one upload.
const maxParts = 10_000

// putOptions: the bytes are opaque, and the payload is not signed (no SHA-256
// pass over it, no aws-chunked streaming signature): each request carries the
// Content-MD5 of its bytes, which the store checks.
var putOptions = minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true}

// Put stores r under key. An error from r comes back as it is.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.refuseHolding(key); err != nil {
		return 0, err
	}
	ctx = upstream.WithOperation(ctx, "PutObject")
	name := s.name(key)
	bp := s.parts.Get().(*[]byte)
	defer s.parts.Put(bp)
	buf := *bp
	n, err := node.ReadChunk(r, buf)
	switch err {
	case io.EOF: // it fits in one part: one PUT
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_, err := s.core.PutObject(ctx, s.bucket, name, bytes.NewReader(buf[:n]), int64(n), md5sum(buf[:n]), "", putOptions)
		if err != nil {
			return 0, s.forget(ctx, key, err)
		}
		return int64(n), nil
	case nil:
		return s.putMultipart(upstream.WithOperation(ctx, "UploadPart"), key, name, r, buf)
	default:
		return 0, err
	}
}

// putMultipart uploads buf, full, and the rest of r, one part at a time
// through buf; any failure aborts the upload, leaving no parts behind.
func (s *Store) putMultipart(ctx context.Context, key, name string, r io.Reader, buf []byte) (size int64, err error) {
	cctx, cancel := s.c.WithTimeout(upstream.WithOperation(ctx, "CreateMultipartUpload"))
	id, err := s.core.NewMultipartUpload(cctx, s.bucket, name, putOptions)
	cancel()
	if err != nil {
		return 0, s.fail(err, key)
	}
	defer func() {
		if err == nil {
			return
		}
		actx, cancel := s.c.WithTimeout(upstream.WithOperation(context.WithoutCancel(ctx), "AbortMultipartUpload"))
		defer cancel()
		// NoSuchUpload: completed (see forget) or aborted already; no parts remain.
		if aerr := s.core.AbortMultipartUpload(actx, s.bucket, name, id); aerr != nil && minio.ToErrorResponse(aerr).Code != "NoSuchUpload" {
			err = errors.Join(err, fmt.Errorf("s3: aborting the upload of %q (parts may remain until the bucket's lifecycle removes them): %w", key, s.fail(aerr, key)))
		}
	}()
	var parts []minio.CompletePart
	length, last := len(buf), false
	for num := 1; ; num++ {
		if num > maxParts {
			return 0, adapter.Errorf(adapter.InsufficientResources,
				"the object is larger than upstream %q takes: %d parts of %d bytes", s.c.Name(), maxParts, len(buf))
		}
		p, err := s.core.PutObjectPart(ctx, s.bucket, name, id, num, bytes.NewReader(buf[:length]), int64(length),
			minio.PutObjectPartOptions{Md5Base64: md5sum(buf[:length]), DisableContentSha256: true})
		if err != nil {
			return 0, s.fail(err, key)
		}
		parts = append(parts, minio.CompletePart{PartNumber: num, ETag: p.ETag})
		size += int64(length)
		if last {
			break
		}
		var rerr error
		length, rerr = node.ReadChunk(r, buf)
		if rerr == io.EOF {
			if length == 0 {
				break
			}
			last = true
		} else if rerr != nil {
			return 0, rerr
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	_, err = s.core.CompleteMultipartUpload(upstream.WithOperation(ctx, "CompleteMultipartUpload"), s.bucket, name, id, parts, putOptions)
	if err != nil {
		return 0, s.forget(ctx, key, err)
	}
	return size, nil
}

// forget is err, the failure of the request that makes the object under key
// (the PUT, or CompleteMultipartUpload), as an exception. When no answer came
// back (the transport failed, or ctx ended), the store may hold the object
// all the same; node.Blobs promises nothing under key after an error, and the
// node's keys are fresh, so forget deletes key: best effort, bounded by the
// upstream's timeout, even when ctx has ended.
func (s *Store) forget(ctx context.Context, key string, err error) error {
	var er minio.ErrorResponse
	if errors.As(err, &er) || !upstream.Unanswered(err) {
		return s.fail(err, key)
	}
	if derr := s.Delete(context.WithoutCancel(ctx), key); derr != nil {
		return errors.Join(s.fail(err, key), fmt.Errorf("s3: deleting %q, which the store may hold after all: %w", key, derr))
	}
	return s.fail(err, key)
}

func md5sum(b []byte) string {
	sum := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Get opens the bytes under key; a "/"-key names a holding (see List). The
// body is an upstream.Seekable when the answer has a validator (see
// upstream.PinOf); else it only streams.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	ctx = upstream.WithOperation(ctx, "GetObject")
	name, err := s.objectName(key)
	if err != nil {
		return nil, err
	}
	body, info, h, err := s.core.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.fail(err, key)
	}
	pin, ok := upstream.PinOf(h, info.Size)
	if !ok {
		// No ETag (a file versitygw serves from its directory) and a
		// Last-Modified in the second of the read: a reopen could not tell a
		// later version from this one.
		return body, nil
	}
	what := fmt.Sprintf("object %q", key)
	open := func(ctx context.Context, off int64) (io.ReadCloser, error) {
		var o minio.GetObjectOptions
		if off > 0 { // SetRange(0, 0) would be the first byte only
			if err := o.SetRange(off, 0); err != nil {
				return nil, err
			}
		}
		// A Last-Modified is only checked on the answer: versitygw refuses an
		// If-Unmodified-Since equal to the object's own Last-Modified (it
		// compares the file's sub-second time, strictly).
		if pin.ETag != "" {
			o.Set("If-Match", pin.ETag)
		}
		b, _, h, err := s.core.GetObject(ctx, s.bucket, name, o)
		if err != nil {
			var er minio.ErrorResponse
			if errors.As(err, &er) && er.StatusCode == http.StatusPreconditionFailed {
				return nil, s.c.Changed(err, what)
			}
			return nil, s.fail(err, key)
		}
		from, err := pin.Check(h, off)
		if err != nil {
			b.Close()
			return nil, s.c.Changed(err, what)
		}
		if _, err := io.CopyN(io.Discard, b, off-from); err != nil {
			b.Close()
			return nil, s.fail(err, key)
		}
		return b, nil
	}
	return upstream.NewSeekable(ctx, body, info.Size, open), nil
}

// Delete removes key; a missing key is not an error. Holdings ("/"-keys)
// are refused.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.refuseHolding(key); err != nil {
		return err
	}
	ctx, cancel := s.c.WithTimeout(upstream.WithOperation(ctx, "DeleteObject"))
	defer cancel()
	err := s.core.RemoveObject(ctx, s.bucket, s.name(key), minio.RemoveObjectOptions{})
	if err != nil && !adapter.IsKind(s.fail(err, key), adapter.NotFound) {
		return s.fail(err, key)
	}
	return nil
}
