package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/minio/minio-go/v7"
)

// listPage is how many objects one List call reads: one ListObjectsV2
// request (S3 answers at most 1,000 keys).
const listPage = 1000

// The store is a harvest source of the objects under its holdings prefix: a
// bucket that held a collection before the node existed. List pages through
// them in key order (S3 cannot filter by date: since is ignored); the cursor
// is the last object name read, sent as start-after. Each object becomes:
//   - a node key, when its name is the node's own layout (<prefix>xx/yy/leaf,
//     where leaf is a plain key whose BlobName is that path): Found.Key is the
//     key, which the harvest finds in the catalog and skips. A ~digest leaf
//     (a key that is not plain) is not listed at all.
//   - a holding otherwise: Found.Key is "/" followed by the name relative to
//     holdings, FileName that relative name; its size and date come from the
//     listing, and its MD5 from the ETag when that is one (an object uploaded
//     in one PUT; a multipart ETag, with a "-", is not a digest).
//
// "Folder" marker objects (names ending in "/") are not listed; a name with
// an empty, "." or ".." segment is listed with a Problem, as Get refuses it.
// Get reads a holding's bytes by its "/"-key; Put and Delete refuse them.

// List returns one page of the objects under holdings.
func (s *Store) List(ctx context.Context, _ time.Time, cursor string) ([]node.Found, string, error) {
	ctx, cancel := s.c.WithTimeout(upstream.WithOperation(ctx, "ListObjectsV2"))
	defer cancel()
	noOwner := false
	opts := minio.ListObjectsOptions{Prefix: s.holdings, Recursive: true, MaxKeys: s.pageSize, StartAfter: cursor, FetchOwner: &noOwner}
	var page []node.Found
	read := 0
	// The iterator sends its next request only when asked for more than the
	// page holds: breaking out after pageSize objects sends none.
	for o := range s.core.Client.ListObjectsIter(ctx, s.bucket, opts) {
		if o.Err != nil {
			return nil, "", s.failOn(o.Err, fmt.Sprintf("the listing of %q", s.holdings), "")
		}
		read++
		if f, ok := s.found(o.Key, o); ok {
			page = append(page, f)
		}
		if read == s.pageSize {
			return page, o.Key, nil
		}
	}
	return page, "", nil
}

// Stat describes the object under key again: a holding for a "/"-key, else
// the node's bytes under key.
func (s *Store) Stat(ctx context.Context, key string) (*node.Found, error) {
	name, err := s.objectName(key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.c.WithTimeout(upstream.WithOperation(ctx, "HeadObject"))
	defer cancel()
	info, err := s.core.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return nil, s.fail(err, key)
	}
	f := describe(info)
	f.Key = key
	if strings.HasPrefix(key, "/") {
		f.FileName = key[1:]
	}
	return &f, nil
}

// found is what List says of the object name: false when it is not listed.
func (s *Store) found(name string, o minio.ObjectInfo) (node.Found, bool) {
	if key, ok := s.nodeKey(name); ok {
		if key == "" {
			return node.Found{}, false // a ~digest leaf: a key that is not plain
		}
		f := describe(o)
		f.Key = key
		return f, true
	}
	rel := strings.TrimPrefix(name, s.holdings)
	if strings.HasSuffix(rel, "/") {
		return node.Found{}, false // a folder marker
	}
	f := describe(o)
	f.Key, f.FileName = "/"+rel, rel
	if err := checkRel(rel); err != nil {
		f.Problem = fmt.Errorf("s3: object %q is not served: %w", name, err)
	}
	return f, true
}

// nodeKey tells whether name is in the node's layout, and its key ("" for a
// ~digest leaf).
func (s *Store) nodeKey(name string) (string, bool) {
	rel, ok := strings.CutPrefix(name, s.prefix)
	if !ok || len(rel) < 7 || rel[2] != '/' || rel[5] != '/' {
		return "", false
	}
	leaf := rel[6:]
	if strings.HasPrefix(leaf, "~") {
		h := leaf[1:]
		return "", len(h) == 64 && isHex(h) && h[0:2] == rel[0:2] && h[2:4] == rel[3:5]
	}
	return leaf, upstream.BlobName(leaf) == rel
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// describe is the size, date and MD5 an object's listing or HEAD gives.
func describe(o minio.ObjectInfo) node.Found {
	f := node.Found{Size: o.Size, Modified: o.LastModified}
	if etag := strings.Trim(o.ETag, `"`); len(etag) == 32 && isHex(strings.ToLower(etag)) {
		f.Checksum = adapter.Checksum{Algorithm: "MD5", Value: strings.ToLower(etag)}
	}
	return f
}

// objectName is the object holding key's bytes: holdings plus the rest of a
// "/"-key, else the node's layout.
func (s *Store) objectName(key string) (string, error) {
	rel, ok := strings.CutPrefix(key, "/")
	if !ok {
		return s.name(key), nil
	}
	if err := checkRel(rel); err != nil {
		return "", adapter.Wrap(adapter.InvalidRequest, err, "key %q names no holding of upstream %q", key, s.c.Name())
	}
	return s.holdings + rel, nil
}

// checkRel refuses a holding's relative name with an empty, "." or ".."
// segment.
func checkRel(rel string) error {
	for seg := range strings.SplitSeq(rel, "/") {
		switch seg {
		case "":
			return errors.New("its name has an empty segment")
		case ".", "..":
			return fmt.Errorf("its name has a %q segment", seg)
		}
	}
	return nil
}

// refuseHolding is the error of a write to a holding: the node never writes
// them.
func (s *Store) refuseHolding(key string) error {
	if strings.HasPrefix(key, "/") {
		return adapter.Errorf(adapter.InvalidRequest, "key %q is a holding of upstream %q, which the node does not write", key, s.c.Name())
	}
	return nil
}
