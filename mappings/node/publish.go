package node

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/d1bridge/d1bridge/adapter"
	"golang.org/x/sync/errgroup"
)

// Publishing with an identifier service (Identifiers; Metacat's MNodeService
// publish, publishIdentifier and updateIdMetadata).
//
// publish(id) mints a DOI and makes it a new version of id: the same bytes
// (copied through Blobs, so that either object can be deleted alone), the
// same system metadata with identifier = the DOI, obsoletes = id, the same
// seriesId, and public read added when it lacks it (as Metacat does: a DOI
// names something anyone can read). The order keeps every failure clean:
//
//  1. mint the DOI (a DataCite draft without metadata);
//  2. copy and check the bytes, settle the new version's system metadata;
//  3. register the DOI's metadata, still a draft;
//  4. commit the version (the catalog sets obsoletedBy on id), log an update;
//  5. with autoPublish, make the DOI findable.
//
// A failure in 1-4 keeps nothing: the staged bytes are removed and the draft
// deleted at the service (but for a commit whose answer was lost and could not
// be checked: bytes and draft stay, as the version may be stored). Once 4 has committed, the version stays (other
// nodes may already have seen it, and the catalog cannot un-obsolete id); a
// failure of 5 is a ServiceFailure that names the new version and says its
// DOI is a draft, so that publishIdentifier (or updateIdMetadata) can finish
// it. Once 4 has committed, 5 runs to its end even when the caller has gone.

var (
	_ adapter.MNPublish = (*Node)(nil)
	_ adapter.MNAdmin   = (*Node)(nil) // Reindex is in reindex.go
)

// maxIDBatch bounds the identifiers one updateIdMetadata call sends: it runs
// while the caller waits, idBatchCalls at a time.
const (
	maxIDBatch   = 10_000
	idBatchCalls = 4
)

// identifiers is the identifier service, or NotImplemented without one.
func (n *Node) identifiers() (Identifiers, error) {
	if n.ids == nil {
		return nil, adapter.Errorf(adapter.NotImplemented, "this node has no identifier service (config identifiers)")
	}
	return n.ids, nil
}

// Publish makes a new version of id (a PID, or a SID naming its head) whose
// identifier is a newly minted DOI, registers the DOI, and returns it.
func (n *Node) Publish(ctx context.Context, s *adapter.Session, id string) (string, error) {
	ids, err := n.identifiers()
	if err != nil {
		return "", err
	}
	old, err := n.cat.Lookup(ctx, id)
	if err != nil {
		return "", err
	}
	pid := old.Meta.Identifier
	switch {
	case old.Meta.ObsoletedBy != "":
		return "", adapter.Errorf(adapter.InvalidRequest, "%q is obsoleted by %q: publish the newest version", pid, old.Meta.ObsoletedBy).WithPID(pid)
	case old.Meta.Archived:
		return "", adapter.Errorf(adapter.InvalidRequest, "%q is archived and cannot be published", pid).WithPID(pid)
	case old.BlobKey == "":
		return "", adapter.Errorf(adapter.NotFound, "%q has system metadata but no object on this node", pid).WithPID(pid)
	}
	if err := n.versionable(old); err != nil {
		return "", err
	}
	doi, err := ids.Mint(ctx)
	if err != nil {
		return "", err
	}
	var md IDMetadata
	rec, err := n.stageVersion(ctx, s, old, doi)
	if err == nil {
		md = IDMetadata{Meta: rec.Meta, Title: n.title(ctx, rec)}
		staged := &adapter.Upload{Ref: rec.BlobKey}
		if err = ids.Register(ctx, doi, md, false); err != nil {
			err = n.fail(ctx, staged, adapter.Wrap(adapter.ServiceFailure, err, "nothing was published: %s", adapter.AsException(err).Description).WithPID(pid))
		} else {
			err = n.insert(n.logging(ctx, s, pid, adapter.EventUpdate), rec, staged)
		}
	}
	var refused *adapter.Exception
	switch {
	case err != nil && !errors.As(err, &refused):
		// A commit whose answer was lost, its bytes kept (insert): the
		// version may be stored, named by the draft.
		n.log.Error("publish: keeping the draft DOI of a version whose commit is uncertain", "doi", doi, "pid", pid, "err", err)
		return "", err
	case err != nil:
		if derr := ids.Discard(context.WithoutCancel(ctx), doi); derr != nil {
			n.log.Error("discarding the DOI of a failed publish", "doi", doi, "pid", pid, "err", derr)
		}
		return "", err
	}
	if !ids.AutoPublish() {
		return doi, nil
	}
	// The version is committed: finish even if the caller has gone.
	if err := ids.Register(context.WithoutCancel(ctx), doi, md, true); err != nil {
		n.log.Error("publish: the new version is stored but its DOI is not findable", "doi", doi, "pid", pid, "err", err)
		return "", adapter.Wrap(adapter.ServiceFailure, err,
			"%q is stored as a new version of %q, but its DOI is still a draft at the identifier service: %s; "+
				"publishIdentifier %s makes it findable", doi, pid, adapter.AsException(err).Description, doi).WithPID(doi)
	}
	return doi, nil
}

// stageVersion copies old's bytes and returns the settled record of the
// version identified by doi; nothing is kept when it fails.
func (n *Node) stageVersion(ctx context.Context, s *adapter.Session, old *Record, doi string) (*Record, error) {
	sm := old.Meta.Clone()
	sm.Identifier, sm.Obsoletes, sm.ObsoletedBy, sm.Archived = doi, old.Meta.Identifier, "", false
	sm.AccessPolicy = withPublicRead(sm.AccessPolicy)
	alg, ok := adapter.CanonicalAlgorithm(sm.Checksum.Algorithm)
	if !ok {
		return nil, adapter.Errorf(adapter.InvalidSystemMetadata, "the checksum algorithm %q of %q is not supported", sm.Checksum.Algorithm, old.Meta.Identifier)
	}
	body, err := n.open(ctx, old)
	if err != nil {
		return nil, err
	}
	u, err := n.Stage(ctx, body, []string{alg})
	body.Close()
	if err != nil {
		return nil, err
	}
	if err := checkNew(sm); err != nil {
		return nil, n.fail(ctx, u, err)
	}
	// The copy is checked as an upload is: a store that returned other bytes
	// than it holds fails here, not in a reader's hands.
	if err := n.verify(ctx, sm, u); err != nil {
		return nil, n.fail(ctx, u, adapter.Wrap(adapter.ServiceFailure, err, "the copy of %q's bytes does not match its system metadata", old.Meta.Identifier))
	}
	return n.settle(s, sm, u), nil
}

// PublishIdentifier makes id, a DOI of the identifier service naming an
// object of this node, findable, with the object's current metadata.
func (n *Node) PublishIdentifier(ctx context.Context, s *adapter.Session, id string) (string, error) {
	ids, err := n.identifiers()
	if err != nil {
		return "", err
	}
	if !ids.Owns(id) {
		return "", adapter.Errorf(adapter.InvalidRequest, "%q is not an identifier of this node's identifier service", id).WithPID(id)
	}
	rec, err := n.cat.Lookup(ctx, id)
	if err != nil {
		return "", err
	}
	if !publiclyReadable(rec.Meta.AccessPolicy) {
		// As publish, and as Metacat: what a findable DOI names is public.
		sm, err := n.cat.Modify(ctx, rec.Meta.Identifier, func(sm *adapter.SystemMetadata) error {
			if publiclyReadable(sm.AccessPolicy) {
				return errUnchanged
			}
			sm.AccessPolicy = withPublicRead(sm.AccessPolicy)
			touch(sm)
			return nil
		})
		switch {
		case err == nil:
			rec.Meta = sm
		case !errors.Is(err, errUnchanged):
			return "", err
		}
	}
	md := IDMetadata{Meta: rec.Meta, Title: n.title(ctx, rec)}
	if err := ids.Register(ctx, id, md, true); err != nil {
		return "", err
	}
	return id, nil
}

// UpdateIDMetadata sends the current metadata of the identifiers q selects
// to the identifier service, synchronously, idBatchCalls at a time. With
// PIDs, each must name an object here (a PID, or a SID) and those outside
// the service's namespace are skipped; with filters (formatId, fromDate,
// toDate, all), the objects are listed from the catalog and those whose PID
// is in the namespace are sent (a SID is sent when it is named by pid). A
// selection of more than maxIDBatch identifiers is refused before anything
// is sent. A failure of the service for some identifiers does not stop the
// others; the call then answers a ServiceFailure that counts and names them.
func (n *Node) UpdateIDMetadata(ctx context.Context, s *adapter.Session, q adapter.AdminQuery) error {
	ids, err := n.identifiers()
	if err != nil {
		return err
	}
	var targets []string
	if len(q.PIDs) > 0 {
		targets, err = n.namedIdentifiers(ctx, ids, q.PIDs)
	} else {
		targets, err = n.listedIdentifiers(ctx, ids, q)
	}
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		failed []string
		first  error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(idBatchCalls)
	for _, id := range targets {
		g.Go(func() error {
			if err := n.sendMetadata(gctx, ids, id); err != nil {
				mu.Lock()
				failed = append(failed, id)
				if first == nil {
					first = err
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return err // the caller went away: stop
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "updating identifier metadata was interrupted after %d failures", len(failed))
	}
	if len(failed) > 0 {
		n.log.Error("updateIdMetadata: identifiers not updated", "failed", len(failed), "selected", len(targets), "err", first)
		names := failed
		if len(names) > 5 {
			names = names[:5]
		}
		return adapter.Wrap(adapter.ServiceFailure, first, "%d of %d identifiers were not updated (%s): %s",
			len(failed), len(targets), strings.Join(names, ", "), adapter.AsException(first).Description)
	}
	n.log.Info("updateIdMetadata", "identifiers", len(targets))
	return nil
}

// namedIdentifiers checks every named identifier before anything is sent: an
// unknown one is an InvalidRequest.
func (n *Node) namedIdentifiers(ctx context.Context, ids Identifiers, pids []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, id := range pids {
		if _, err := n.cat.Lookup(ctx, id); err != nil {
			if adapter.IsKind(err, adapter.NotFound) {
				return nil, adapter.Errorf(adapter.InvalidRequest, "no object %q on this node", id).WithPID(id)
			}
			return nil, err
		}
		if !ids.Owns(id) {
			n.log.Debug("updateIdMetadata: not an identifier of the service, skipped", "pid", id)
			continue
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// listedIdentifiers pages through the catalog's objects that q's filters
// select and keeps the PIDs in the service's namespace.
func (n *Node) listedIdentifiers(ctx context.Context, ids Identifiers, q adapter.AdminQuery) ([]string, error) {
	var out []string
	seen := map[string]bool{} // an object changed meanwhile is listed again, at its new date
	err := walkList(ctx, n.cat, adapter.ListQuery{FromDate: q.FromDate, ToDate: q.ToDate, FormatID: q.FormatID}, 1000, func(oi adapter.ObjectInfo) error {
		if ids.Owns(oi.Identifier) && !seen[oi.Identifier] {
			seen[oi.Identifier] = true
			out = append(out, oi.Identifier)
			if len(out) > maxIDBatch {
				return adapter.Errorf(adapter.InvalidRequest,
					"the selection holds more than %d identifiers of the identifier service; narrow it (fromDate, toDate, formatId)", maxIDBatch)
			}
		}
		return nil
	})
	return out, err
}

// sendMetadata sends id's current metadata, keeping its state.
func (n *Node) sendMetadata(ctx context.Context, ids Identifiers, id string) error {
	rec, err := n.cat.Lookup(ctx, id)
	if err != nil {
		// Deleted since it was selected: nothing to describe.
		if adapter.IsKind(err, adapter.NotFound) {
			return nil
		}
		return err
	}
	return ids.Register(ctx, id, IDMetadata{Meta: rec.Meta, Title: n.title(ctx, rec)}, false)
}

// publiclyReadable reports whether p lets the public subject read.
func publiclyReadable(p *adapter.AccessPolicy) bool {
	if p == nil {
		return false
	}
	for _, r := range p.Allow {
		for _, sub := range r.Subject {
			if sub != adapter.SubjectPublic {
				continue
			}
			for _, perm := range r.Permission {
				if perm.Level() >= adapter.PermRead.Level() {
					return true
				}
			}
		}
	}
	return false
}

// withPublicRead is p (a copy is not needed: callers own it) with a rule
// granting the public subject read, unless it already does.
func withPublicRead(p *adapter.AccessPolicy) *adapter.AccessPolicy {
	if publiclyReadable(p) {
		return p
	}
	if p == nil {
		p = &adapter.AccessPolicy{}
	}
	p.Allow = append(p.Allow, adapter.AccessRule{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}})
	return p
}

// --- titles of science metadata

// maxTitleScan bounds how much of a science metadata document is read to find
// its title; titles come near the start.
const maxTitleScan = 2 << 20

// maxTitle bounds the title sent.
const maxTitle = 1000

type titleSchema int

const (
	noTitle titleSchema = iota
	emlTitle
	isoTitle
)

func titleSchemaOf(formatID string) titleSchema {
	switch {
	case strings.HasPrefix(formatID, "eml://ecoinformatics.org/eml-"),
		strings.HasPrefix(formatID, "https://eml.ecoinformatics.org/eml-"):
		return emlTitle
	case strings.HasPrefix(formatID, "http://www.isotc211.org/2005/gm"):
		return isoTitle
	}
	return noTitle
}

// title is the title of rec's object when it is an EML or ISO 19139 document
// that has one; "" otherwise, or when the object cannot be read.
func (n *Node) title(ctx context.Context, rec *Record) string {
	schema := titleSchemaOf(rec.Meta.FormatID)
	if schema == noTitle || rec.BlobKey == "" {
		return ""
	}
	body, err := n.open(ctx, rec)
	if err != nil {
		n.log.Warn("reading the title of a science metadata document", "pid", rec.Meta.Identifier, "err", err)
		return ""
	}
	defer body.Close()
	t, err := scanTitle(io.LimitReader(body, maxTitleScan), schema)
	if err != nil {
		n.log.Debug("no title found in a science metadata document", "pid", rec.Meta.Identifier, "err", err)
	}
	return t
}

// scanTitle streams the document to its first title: EML's
// /eml/{dataset,citation,software,protocol}/title, ISO 19139's first
// CI_Citation/title under identificationInfo. Its text (all character data
// inside it, e.g. gco:CharacterString or EML 2.2's value) is returned with
// its white space collapsed.
func scanTitle(r io.Reader, schema titleSchema) (string, error) {
	d := xml.NewDecoder(r)
	d.Strict = false
	var path []string
	for {
		tok, err := d.Token()
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			path = append(path, t.Name.Local)
			if t.Name.Local == "title" && isTitlePath(path, schema) {
				return titleText(d)
			}
		case xml.EndElement:
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		}
	}
}

func isTitlePath(path []string, schema titleSchema) bool {
	n := len(path)
	switch schema {
	case emlTitle:
		if n != 3 || path[0] != "eml" {
			return false
		}
		switch path[1] {
		case "dataset", "citation", "software", "protocol":
			return true
		}
	case isoTitle:
		if n < 2 || path[n-2] != "CI_Citation" {
			return false
		}
		for _, p := range path[:n-2] {
			if p == "identificationInfo" {
				return true
			}
		}
	}
	return false
}

// titleText reads the character data up to the end of the element just opened.
func titleText(d *xml.Decoder) (string, error) {
	var b strings.Builder
	depth := 1
	for depth > 0 {
		tok, err := d.Token()
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if b.Len() < 4*maxTitle {
				b.Write(t)
				b.WriteByte(' ')
			}
		}
	}
	title := strings.Join(strings.Fields(b.String()), " ")
	if r := []rune(title); len(r) > maxTitle {
		title = string(r[:maxTitle])
	}
	if title == "" {
		return "", fmt.Errorf("the title element is empty")
	}
	return title, nil
}
