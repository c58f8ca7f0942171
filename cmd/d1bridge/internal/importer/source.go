// Package importer is `d1bridge import`: it creates the objects of a
// directory tree, a list of URLs or a bucket prefix on a member node through
// its create operation (so the node checks and logs each), with system
// metadata from a manifest or from defaults, several at a time, skipping
// what the node already holds with the same checksum.
package importer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/mappings/node"
)

// Item is one object to import.
type Item struct {
	// Path names the item in a manifest: the path relative to the tree's
	// root (with /), the URL, or the key relative to the bucket prefix.
	Path string
	// Name is its file name: the system metadata's fileName, and the name
	// its format is guessed from.
	Name string
	// Size in bytes; -1 when not known before reading.
	Size int64
	// Open reads the bytes, from the start, each time it is called.
	Open func(ctx context.Context) (io.ReadCloser, error)
	// Local items are cheap to read twice: they are hashed, then uploaded
	// with their system metadata first. Others are read once, hashed as they
	// are uploaded, with the system metadata after the object.
	Local bool
}

// Tree lists the regular files under root (symbolic links to files
// included, links to directories not followed), in lexical order; the file
// skip (the manifest, when it lies in the tree) is left out.
func Tree(root, skip string) ([]Item, error) {
	skipAbs := ""
	if skip != "" {
		skipAbs, _ = filepath.Abs(skip)
	}
	var items []Item
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Stat(p) // follows a link
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		if abs, _ := filepath.Abs(p); abs == skipAbs {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		items = append(items, Item{
			Path: filepath.ToSlash(rel), Name: d.Name(), Size: fi.Size(), Local: true,
			Open: func(context.Context) (io.ReadCloser, error) { return os.Open(p) },
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the tree %s: %w", root, err)
	}
	return items, nil
}

// URLs lists the http(s) URLs in file, one a line (blank lines and lines
// starting with # left out); get reads one.
func URLs(file string, get func(ctx context.Context, u string) (io.ReadCloser, error)) ([]Item, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var items []Item
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		u, err := url.Parse(line)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s:%d: %q is not an http(s) URL", file, n, line)
		}
		name := path.Base(u.Path)
		if name == "/" || name == "." {
			name = u.Host
		}
		items = append(items, Item{Path: line, Name: name, Size: -1,
			Open: func(ctx context.Context) (io.ReadCloser, error) { return get(ctx, line) }})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return items, nil
}

// BucketStore is an S3 store listing its holdings: the objects under the
// prefix given as its holdings option (mappings/s3.Store).
type BucketStore interface {
	List(ctx context.Context, since time.Time, cursor string) ([]node.Found, string, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
}

// Bucket lists the objects under the store's holdings prefix, page by page;
// an object the store cannot read (an unsafe name) is listed with open
// failing, so that it is reported.
func Bucket(ctx context.Context, s BucketStore) ([]Item, error) {
	var items []Item
	cursor := ""
	for {
		page, next, err := s.List(ctx, time.Time{}, cursor)
		if err != nil {
			return nil, err
		}
		for _, f := range page {
			if !strings.HasPrefix(f.Key, "/") { // the node's own blobs
				continue
			}
			key, problem := f.Key, f.Problem
			items = append(items, Item{Path: f.FileName, Name: path.Base(f.FileName), Size: f.Size,
				Open: func(ctx context.Context) (io.ReadCloser, error) {
					if problem != nil {
						return nil, problem
					}
					return s.Get(ctx, key)
				}})
		}
		if next == "" {
			return items, nil
		}
		cursor = next
	}
}
