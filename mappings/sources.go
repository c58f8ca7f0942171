package mappings

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/files"
	"github.com/d1bridge/d1bridge/mappings/httpapi"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/oaipmh"
	"github.com/d1bridge/d1bridge/mappings/ocfl"
	"github.com/d1bridge/d1bridge/mappings/s3"
	"github.com/d1bridge/d1bridge/mappings/sitemap"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/mappings/webdav"
	"github.com/d1bridge/d1bridge/metrics"
)

// source is one harvest source the configuration names; opts.Reader is set
// when the source, not the node's store, holds its objects' bytes.
type source struct {
	name string // the upstream's
	src  node.DatasetSource
	opts node.DatasetOptions
}

// fileStore is a store that lists its holdings: what a file tree or an OCFL
// storage root is read through.
type fileStore interface {
	node.Lister
	node.Reader
}

// openSources builds every dataset source of cfg. store is the node's store,
// which is itself a source when its upstream is harvested.
func openSources(cfg *config.Config, clients map[string]*upstream.Client, store node.Blobs, m *metrics.Metrics) ([]source, error) {
	var out []source
	for _, u := range cfg.Upstreams {
		if !u.Datasets() && !groupsRecords(u) {
			continue
		}
		u = config.UpstreamDefaults(u)
		s := source{name: u.Name, opts: datasetOptions(cfg, u, m)}
		var tree fileStore
		switch {
		case u.Type == config.UpstreamHTTP:
			// The node's store keeps its own keys; another http upstream is
			// read through its marked keys.
			l, _ := store.(node.Lister)
			if u.Name != cfg.Store {
				st, err := httpapi.New(u, clients[u.Name])
				if err != nil {
					return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
				}
				l, s.opts.Reader = st, st
			}
			s.src = node.GroupRecords(l)
		case u.Name == cfg.Store:
			fs, ok := store.(fileStore)
			if !ok {
				return nil, fmt.Errorf("upstream %q: its store does not list its holdings", u.Name)
			}
			tree = fs
		case u.Type == config.UpstreamS3:
			st, err := s3.New(u, clients[u.Name])
			if err != nil {
				return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			tree, s.opts.Reader = st, st
		case u.Type == config.UpstreamWebDAV:
			st, err := webdav.New(u, clients[u.Name])
			if err != nil {
				return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			tree, s.opts.Reader = st, st
		case u.Type == config.UpstreamFiles:
			st, err := openTree(u)
			if err != nil {
				return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			tree, s.opts.Reader = st, st
		case u.Type == config.UpstreamOAIPMH:
			st, err := oaipmh.New(u, clients[u.Name])
			if err != nil {
				return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			s.src, s.opts.Reader = st, st
		case u.Type == config.UpstreamSitemap:
			st, err := sitemap.New(u, clients[u.Name])
			if err != nil {
				return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			s.src, s.opts.Reader = st, st
		case u.Type == config.UpstreamOCFL:
			st, root, err := openOCFL(cfg, u, clients)
			if err != nil {
				return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			s.src, s.opts.Reader = ocfl.New(st, root), st
		}
		if tree != nil {
			s.src = node.GroupFiles(tree, u.Harvest.Depth)
		}
		out = append(out, s)
	}
	return out, nil
}

// groupsRecords tells whether u is an http upstream whose records name
// their dataset: harvested as datasets (node.GroupRecords), not object by
// object.
func groupsRecords(u config.Upstream) bool {
	return u.Type == config.UpstreamHTTP && httpapi.GroupsDatasets(u)
}

// treeOptions are the options of a files upstream (and of an OCFL root on a
// directory).
type treeOptions struct {
	// Root is the directory whose tree is harvested (required).
	Root string `yaml:"root"`
}

func openTree(u config.Upstream) (*files.Tree, error) {
	var o treeOptions
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, err
	}
	if o.Root == "" {
		return nil, fmt.Errorf("options.root: required: the directory to harvest")
	}
	return files.New(o.Root)
}

// ocflOptions: an OCFL storage root on a directory (root), or under a prefix
// of another upstream's bucket or share (upstream, prefix).
type ocflOptions struct {
	// Root is the directory of the OCFL storage root; or give upstream.
	Root string `yaml:"root"`
	// Upstream names the s3 or webdav upstream whose bucket or share holds
	// the storage root; or give root.
	Upstream string `yaml:"upstream"`
	// Prefix is the storage root's key prefix or collection path in
	// upstream.
	Prefix string `yaml:"prefix"`
}

// checkOCFL is what openOCFL checks, without opening the other upstream.
func checkOCFL(cfg *config.Config, u config.Upstream) error {
	o, err := ocflOptionsOf(cfg, u)
	if err == nil && o.Root != "" {
		_, err = files.New(o.Root)
	}
	return err
}

func ocflOptionsOf(cfg *config.Config, u config.Upstream) (ocflOptions, error) {
	var o ocflOptions
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return o, err
	}
	if (o.Root == "") == (o.Upstream == "") {
		return o, fmt.Errorf("options: give root (a directory) or upstream (an s3 or webdav upstream), one of them")
	}
	if o.Upstream != "" {
		if t := upstreamNamed(cfg, o.Upstream).Type; t != config.UpstreamS3 && t != config.UpstreamWebDAV {
			return o, fmt.Errorf("options.upstream: %q is not an s3 or webdav upstream", o.Upstream)
		}
	}
	return o, nil
}

func openOCFL(cfg *config.Config, u config.Upstream, clients map[string]*upstream.Client) (fileStore, string, error) {
	o, err := ocflOptionsOf(cfg, u)
	if err != nil {
		return nil, "", err
	}
	if o.Root != "" {
		t, err := files.New(o.Root)
		return t, "/", err
	}
	root := "/" + strings.Trim(o.Prefix, "/") + "/"
	if root == "//" {
		root = "/"
	}
	b := upstreamNamed(cfg, o.Upstream)
	if b.Type == config.UpstreamS3 {
		st, err := s3.New(b, clients[b.Name])
		return st, root, err
	}
	st, err := webdav.New(b, clients[b.Name])
	return st, root, err
}

func datasetOptions(cfg *config.Config, u config.Upstream, m *metrics.Metrics) node.DatasetOptions {
	h := u.Harvest
	o := node.DatasetOptions{Name: u.Name, Interval: h.Interval, FullInterval: h.FullInterval, PIDPrefix: h.PIDPrefix,
		RightsHolder: h.RightsHolder, Submitter: h.Submitter, Readers: h.Readers,
		ChecksumAlgorithm: h.ChecksumAlgorithm, LeaseTTL: h.LeaseTTL, Metrics: m,
		Facts: datapackage.Facts{Publisher: h.Publisher}}
	if h.Contact != "" || h.ContactEmail != "" {
		o.Facts.Contact = &datapackage.Party{Name: h.Contact, Email: h.ContactEmail}
	}
	base := cfg.BaseURL() + "/mn/v2/object/"
	o.ObjectURL = func(pid string) string { return base + url.PathEscape(pid) }
	return o
}
