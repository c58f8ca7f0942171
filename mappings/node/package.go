package node

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

var _ adapter.MNPackage = (*Node)(nil)

// member is one object of a package.
type member struct {
	rec  *Record
	name string // its path under data/
}

// Package resolves the resource map, then every member; any member missing,
// without bytes here, or unreadable fails the request before a byte is sent.
func (n *Node) Package(ctx context.Context, s *adapter.Session, packageType, id string, canRead func(*adapter.SystemMetadata) bool) (*adapter.Package, error) {
	if packageType != adapter.PackageBagIt097 && packageType != adapter.PackageBagIt10 {
		return nil, adapter.Errorf(adapter.InvalidRequest, "package type %q is not supported; supported: %s, %s", packageType, adapter.PackageBagIt097, adapter.PackageBagIt10)
	}
	mapRec, err := n.cat.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canRead(mapRec.Meta) {
		return nil, adapter.Errorf(adapter.NotAuthorized, "%s may not read the resource map %q", s.Subject, mapRec.Meta.Identifier).WithPID(id)
	}
	if mapRec.Meta.FormatID != "http://www.openarchives.org/ore/terms" {
		return nil, adapter.Errorf(adapter.InvalidRequest, "%q is not a resource map (its format is %q)", mapRec.Meta.Identifier, mapRec.Meta.FormatID).WithPID(id)
	}
	body, err := n.open(ctx, mapRec)
	if err != nil {
		return nil, err
	}
	pids, err := datapackage.Aggregated(body)
	body.Close()
	if err != nil {
		return nil, adapter.Errorf(adapter.InvalidRequest, "the resource map %q cannot be read: %v", mapRec.Meta.Identifier, err).WithPID(id)
	}
	members := []member{{rec: mapRec}}
	for _, pid := range pids {
		if pid == mapRec.Meta.Identifier {
			continue
		}
		rec, err := n.cat.Lookup(ctx, pid)
		if err != nil {
			if adapter.IsKind(err, adapter.NotFound) {
				return nil, adapter.Errorf(adapter.NotFound, "the package %q lists %q, which is not on this node", mapRec.Meta.Identifier, pid).WithPID(id)
			}
			return nil, err
		}
		if rec.BlobKey == "" {
			return nil, adapter.Errorf(adapter.NotFound, "the package %q lists %q, whose bytes are not on this node", mapRec.Meta.Identifier, pid).WithPID(id)
		}
		if !canRead(rec.Meta) {
			return nil, adapter.Errorf(adapter.NotAuthorized, "%s may not read %q, a member of the package %q", s.Subject, pid, mapRec.Meta.Identifier).WithPID(id)
		}
		members = append(members, member{rec: rec})
	}
	name := bagName(mapRec.Meta.Identifier)
	if name == "." || name == ".." { // the identifier ".." is valid: no zip slip
		name = "bag"
	}
	nameFiles(members, n)
	version := "0.97"
	if packageType == adapter.PackageBagIt10 {
		version = "1.0"
	}
	return &adapter.Package{
		Name: name + ".zip", ContentType: "application/zip", Members: len(members),
		Write: func(ctx context.Context, w io.Writer) error {
			return n.writeBag(ctx, s, w, name, version, mapRec.Meta, members)
		},
	}, nil
}

// bagName is a safe file or directory name made of a pid.
func bagName(pid string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || strings.ContainsRune(`/\:*?"<>|`, r) {
			return '_'
		}
		return r
	}, pid)
}

// nameFiles gives each member a unique, safe file name under data/: the sysmeta
// fileName, else the PID with the format's extension.
func nameFiles(ms []member, n *Node) {
	used := map[string]bool{}
	for i := range ms {
		sm := ms[i].rec.Meta
		base := sm.FileName
		if base == "" {
			base = sm.Identifier
		}
		base = bagName(path.Base("/" + base))
		if base == "" || base == "." || base == ".." {
			base = "object"
		}
		name := base
		for k := 2; used[name]; k++ {
			ext := path.Ext(base)
			name = fmt.Sprintf("%s(%d)%s", strings.TrimSuffix(base, ext), k, ext)
		}
		used[name] = true
		ms[i].name = name
	}
}

// writeBag streams the bag: each member under data/, hashed as it goes, then
// the manifests and tag files, which need those checksums.
func (n *Node) writeBag(ctx context.Context, s *adapter.Session, w io.Writer, name, version string, mapMeta *adapter.SystemMetadata, ms []member) error {
	manifestPath := func(p string) string { return p }
	if version == "1.0" { // RFC 8493 §2.1.3: %, CR and LF of a path are encoded
		manifestPath = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace
	}
	zw := zip.NewWriter(w)
	now := time.Now().UTC()
	var manifest strings.Builder
	var oxum int64
	for _, m := range ms {
		if err := ctx.Err(); err != nil {
			return err
		}
		body, err := n.open(ctx, m.rec)
		if err != nil {
			return err
		}
		f, err := zw.CreateHeader(&zip.FileHeader{Name: name + "/data/" + m.name, Method: zip.Store, Modified: m.rec.Meta.DateUploaded.Time})
		if err != nil {
			body.Close()
			return err
		}
		h := adapter.NewHasher([]string{"MD5"})
		written, err := io.Copy(io.MultiWriter(f, h), body)
		body.Close()
		if err != nil {
			return fmt.Errorf("streaming %q into the package: %w", m.rec.Meta.Identifier, err)
		}
		if uint64(written) != m.rec.Meta.Size {
			return fmt.Errorf("%q has %d bytes in the store, its system metadata says %d", m.rec.Meta.Identifier, written, m.rec.Meta.Size)
		}
		oxum += written
		fmt.Fprintf(&manifest, "%s  %s\n", h.Sums()["MD5"], manifestPath("data/"+m.name))
	}
	tags := []struct{ file, content string }{
		{"bagit.txt", "BagIt-Version: " + version + "\nTag-File-Character-Encoding: UTF-8\n"},
		{"bag-info.txt", fmt.Sprintf("Bagging-Date: %s\nPayload-Oxum: %d.%d\nExternal-Identifier: %s\nSource-Organization: %s\n",
			now.Format("2006-01-02"), oxum, len(ms), oneLine(mapMeta.Identifier), oneLine(n.id))},
		{"manifest-md5.txt", manifest.String()},
	}
	var tagManifest strings.Builder
	for _, t := range tags {
		if err := writeZipFile(zw, name+"/"+t.file, t.content, now); err != nil {
			return err
		}
		h := adapter.NewHasher([]string{"MD5"})
		io.WriteString(h, t.content)
		fmt.Fprintf(&tagManifest, "%s  %s\n", h.Sums()["MD5"], t.file)
	}
	if err := writeZipFile(zw, name+"/tagmanifest-md5.txt", sortLines(tagManifest.String()), now); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	reads := make([]adapter.LogEntry, len(ms))
	for i, m := range ms {
		reads[i] = n.entry(s, m.rec.Meta.Identifier, adapter.EventRead)
	}
	n.events.add(ctx, reads...)
	return nil
}

func writeZipFile(zw *zip.Writer, name, content string, mod time.Time) error {
	f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: mod})
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, content)
	return err
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
