// Package ocfl harvests an OCFL 1.0 or 1.1 storage root (https://ocfl.io) as a
// node.DatasetSource: every OCFL object is a dataset, and every version of it a
// version of that dataset, the way DataONE chains the versions of a package.
//
// The storage root's files are reached through a node.Lister and a
// node.Reader with "/"-keys, so the same code reads a root on a directory, in
// an S3 bucket or on a WebDAV share. Walk lists the files once: an object is a
// folder holding the declaration 0=ocfl_object_1.0 or 0=ocfl_object_1.1 (the
// storage root's own files, its 0=ocfl_1.x, ocfl_layout.json and extensions/,
// are skipped). The listing is expected in lexicographic (or depth-first)
// order, where an object's files are contiguous and its declaration comes
// before its version folders; Walk keeps the listed sizes of the current
// object's files only. A content file the listing did not show is described
// with Stat.
//
// For each object Walk reads its root inventory.json (at most 64 MiB),
// checks it against its sidecar (inventory.json.sha512 or .sha256) and
// validates it; an inventory that fails yields one Dataset with Problem set
// (its ID the inventory's id when it can be read, else the object's path) and
// the walk goes on with the next object. Each version v1..vN (or v001..) then
// yields, oldest first:
//
//   - ID: the object's id; Sequence: the version number; Version: the version
//     name ("v3"); Modified: the version's created date.
//   - Files: the version's state, one Found per logical path, FileName the
//     logical path and Key the content file that holds its bytes (the first
//     manifest path of its digest, under the object's folder). A file
//     unchanged since an earlier version keeps that version's content path,
//     so its Key, and the identifier the harvest gives it, stays the same.
//   - Checksum: the inventory's digest (digestAlgorithm sha512 or sha256, as
//     SHA-512 or SHA-256), lowercased: the bytes are never read to hash them.
//   - Size from the listing; Modified and Uploaded: the version's created.
//
// The version's message and user are not used: a message says what changed,
// not what the dataset is. Metadata stored in the object (EML, DataCite,
// RO-Crate ro-crate-metadata.json) are files of the version's state, which the
// harvest finds by name. Fixity blocks are ignored. OCFL has no deletion: an
// object removed from the root is no longer listed, and the harvest archives
// what a full walk no longer yields.
//
// Walk with a since date still reads every inventory (only the inventory says
// when a version was created) and yields every version of the objects with
// one created at or after it.
package ocfl

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

const (
	// maxInventory bounds the inventory.json read into memory.
	maxInventory = 64 << 20
	// maxSidecar bounds an inventory sidecar ("<digest> inventory.json\n").
	maxSidecar = 4 << 10

	inventoryName = "inventory.json"
)

// declarations are the object conformance declarations this package reads.
var declarations = map[string]bool{"0=ocfl_object_1.0": true, "0=ocfl_object_1.1": true}

// sidecarAlgorithms are the inventory digest algorithms OCFL allows, in the
// order their sidecars are tried when the listing shows none.
var sidecarAlgorithms = []string{"sha512", "sha256"}

// Files is where a storage root's files are: a store that lists them under
// "/"-keys and opens them by key.
type Files interface {
	node.Lister
	node.Reader
}

// Source is an OCFL storage root, harvested as datasets.
type Source struct {
	files Files
	root  string // key prefix of the storage root: "/" or "/a/b/"
}

var _ node.DatasetSource = (*Source)(nil)

// New returns the storage root whose files are under the key prefix root
// ("/" for the whole store, "/ocfl-root/" for a folder) in files.
func New(files Files, root string) *Source {
	root = strings.Trim(root, "/")
	if root == "" {
		return &Source{files: files, root: "/"}
	}
	return &Source{files: files, root: "/" + root + "/"}
}

// object is the object being listed: its folder and its files' listed sizes.
type object struct {
	dir   string           // key prefix of the object root, ending in "/"
	sizes map[string]int64 // by path relative to dir
}

// Walk implements node.DatasetSource.
func (s *Source) Walk(ctx context.Context, since time.Time, fn func(*node.Dataset) error) error {
	var cur *object
	flush := func() error {
		if cur == nil {
			return nil
		}
		o := cur
		cur = nil
		return s.walkObject(ctx, o, since, fn)
	}
	for cursor := ""; ; {
		// Every file is listed whatever since is: the sizes of old
		// versions' content are needed for new versions too.
		page, next, err := s.files.List(ctx, time.Time{}, cursor)
		if err != nil {
			return err
		}
		for i := range page {
			f := &page[i]
			if f.Problem != nil {
				// A folder that cannot be read may hold objects: a failed
				// dataset without an id keeps the pass from archiving them.
				if err := fn(&node.Dataset{Problem: fmt.Errorf("%q: %w", f.FileName, f.Problem)}); err != nil {
					return err
				}
				continue
			}
			if f.Key == "" {
				continue
			}
			if cur != nil && strings.HasPrefix(f.Key, cur.dir) {
				cur.sizes[f.Key[len(cur.dir):]] = f.Size
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			if dir, ok := s.objectRoot(f.Key); ok {
				cur = &object{dir: dir, sizes: map[string]int64{}}
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return flush()
}

// objectRoot says whether key is an object's conformance declaration within
// the storage root, and the object's folder.
func (s *Source) objectRoot(key string) (string, bool) {
	if !strings.HasPrefix(key, s.root) || strings.HasPrefix(key, s.root+"extensions/") {
		return "", false
	}
	dir, name := path.Split(key)
	return dir, declarations[name]
}

// walkObject reads one object's inventory and yields its versions.
func (s *Source) walkObject(ctx context.Context, o *object, since time.Time, fn func(*node.Dataset) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	inv, id, err := s.readInventory(ctx, o)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if id == "" {
			id = strings.TrimSuffix(strings.TrimPrefix(o.dir, s.root), "/")
		}
		if id == "" {
			id = o.dir
		}
		return fn(&node.Dataset{ID: id, Problem: fmt.Errorf("ocfl: object at %s: %w", o.dir, err)})
	}
	// An object changed since is yielded whole: one copied into the root
	// keeps its old versions' dates, and the pass, which skips by sequence
	// the versions it has, would pass over for good those it never saw.
	changed := func(v version) bool { return !v.created.Before(since) }
	if !since.IsZero() && !slices.ContainsFunc(inv.versions, changed) {
		return nil
	}
	for i := range inv.versions {
		v := &inv.versions[i]
		d, err := s.dataset(ctx, o, inv, v)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d = &node.Dataset{ID: inv.id, Sequence: v.number, Version: v.name, Modified: v.created,
				Problem: fmt.Errorf("ocfl: object %s %s: %w", inv.id, v.name, err)}
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// dataset describes one version of an object.
func (s *Source) dataset(ctx context.Context, o *object, inv *inventory, v *version) (*node.Dataset, error) {
	files := make([]node.Found, 0, len(v.state))
	for _, e := range v.state {
		content := inv.manifest[e.digest]
		size, ok := o.sizes[content]
		if !ok {
			f, err := s.files.Stat(ctx, o.dir+content)
			if err != nil {
				return nil, fmt.Errorf("content file %s of %s: %w", content, e.path, err)
			}
			size = f.Size
			o.sizes[content] = size
		}
		files = append(files, node.Found{
			Key:      o.dir + content,
			Size:     size,
			Checksum: adapter.Checksum{Algorithm: inv.algorithm, Value: e.digest},
			FileName: e.path,
			Modified: v.created,
			Uploaded: v.created,
		})
	}
	return &node.Dataset{ID: inv.id, Sequence: v.number, Version: v.name, Modified: v.created, Files: files}, nil
}

// readInventory reads, checks and parses an object's root inventory. On
// failure it still returns the inventory's id when the JSON gave one.
func (s *Source) readInventory(ctx context.Context, o *object) (*inventory, string, error) {
	if n, ok := o.sizes[inventoryName]; ok && n > maxInventory {
		return nil, "", fmt.Errorf("%s is %d bytes, more than %d", inventoryName, n, maxInventory)
	}
	body, err := s.read(ctx, o.dir+inventoryName, maxInventory)
	if err != nil {
		return nil, "", err
	}
	alg, want, err := s.readSidecar(ctx, o)
	if err != nil {
		return nil, idOf(body), err
	}
	h := newHash(alg)
	h.Write(body)
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, idOf(body), fmt.Errorf("%s has %s %s, its sidecar says %s", inventoryName, alg, got, want)
	}
	inv, err := parseInventory(body)
	if err != nil {
		return nil, idOf(body), err
	}
	if inv.digestAlgorithm != alg {
		return nil, inv.id, fmt.Errorf("%s digestAlgorithm is %s, its sidecar is %s", inventoryName, inv.digestAlgorithm, alg)
	}
	return inv, inv.id, nil
}

// readSidecar finds the inventory's sidecar (the one listed, else the first
// that exists) and returns its algorithm and lowercased digest.
func (s *Source) readSidecar(ctx context.Context, o *object) (alg, digest string, err error) {
	var try []string
	for _, a := range sidecarAlgorithms {
		if _, ok := o.sizes[inventoryName+"."+a]; ok {
			try = append(try, a)
		}
	}
	if len(try) == 0 {
		try = sidecarAlgorithms
	}
	for _, a := range try {
		b, err := s.read(ctx, o.dir+inventoryName+"."+a, maxSidecar)
		if adapter.IsKind(err, adapter.NotFound) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		fields := strings.Fields(string(b))
		if len(fields) == 0 || len(fields) > 2 || len(fields) == 2 && fields[1] != inventoryName {
			return "", "", fmt.Errorf("%s.%s is not \"<digest> %s\"", inventoryName, a, inventoryName)
		}
		return a, strings.ToLower(fields[0]), nil
	}
	return "", "", fmt.Errorf("no %s.sha512 or .sha256 sidecar", inventoryName)
}

// read returns the bytes under key, at most limit of them.
func (s *Source) read(ctx context.Context, key string, limit int64) ([]byte, error) {
	rc, err := s.files.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is more than %d bytes", key, limit)
	}
	return b, nil
}

func newHash(alg string) hash.Hash {
	if alg == "sha256" {
		return sha256.New()
	}
	return sha512.New()
}
