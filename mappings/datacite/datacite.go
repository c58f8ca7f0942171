// Package datacite is a client of DataCite's REST API (https://support.datacite.org/docs/api):
// the identifier service (node.Identifiers) behind publish, publishIdentifier,
// updateIdMetadata and generateIdentifier's DOI scheme. Every call goes
// through the upstream's client (metrics, breaker; POST and PUT are never
// retried), bounded by the upstream's timeout.
//
// Calls, all JSON:API documents (Content-Type application/vnd.api+json)
// {"data": {"type": "dois", "attributes": {...}}} with HTTP basic
// authentication as the repository:
//
//	Mint       POST /dois {doi}: a draft DOI without metadata; a suffix
//	           already taken (422) is drawn again, up to mintAttempts times
//	Register   PUT /dois/{doi} with the metadata, and "event": "publish"
//	           when it is to become findable (draft -> findable); without an
//	           event the DOI keeps its state
//	Discard    DELETE /dois/{doi}: DataCite deletes drafts only
//
// DOIs. Minted DOIs are written as the node writes PIDs, doi:<prefix>/<shoulder><random>,
// where random is 8 characters of Crockford's base32 in lower case split as
// xxxx-xxxx (40 bits; DataCite's own style), e.g. doi:10.5072/fk2.7k3m-q9zd with
// shoulder "fk2.", all in lower case, as DataCite answers them (the shoulder
// is lower-cased). Owns is true for identifiers that begin with
// doi:<prefix>/<shoulder> and are written in lower case, with no empty, "."
// or ".." segment: DOIs are case-insensitive at DataCite while PIDs are
// exact, so a DOI has one spelling here, and another object named by another
// spelling (DOI:10.5072/FK2.…) cannot reach, and overwrite, the DOI's
// metadata; nor can a PID's path segments climb out of /dois/ in the API URL.
//
// Metadata (DataCite Metadata Schema 4, convert.go): creators: the rights
// holder (the CN of a DN, or an ORCID as name identifier); titles: the
// science metadata's title when the node found one, else the file name, else
// the identifier; publisher: options.publisher; publicationYear: the year of
// dateUploaded; types: resourceTypeGeneral Dataset (Collection for a resource
// map) with the DataONE format type as resourceType; url: the landing page;
// identifiers: the DOI and the object's series id; formats, sizes, the
// Issued date, and relatedIdentifiers IsNewVersionOf (obsoletes) and
// IsPreviousVersionOf (obsoletedBy).
//
// Errors. Whatever DataCite answers that is not a success (401 for the
// repository's credentials, 403 for a prefix it does not hold, 422 for
// invalid metadata or a DOI taken, 5xx), and a DataCite that cannot be
// reached, is a ServiceFailure that names DataCite and the upstream and quotes
// the errors of DataCite's answer: the node's caller did nothing wrong.
//
// Options (upstreams[].options), decoded strictly:
//
//	prefix:       the repository's DOI prefix, e.g. 10.5072 (required)
//	shoulder:     a string put before the random part of each suffix
//	              (optional; lower-cased, as DataCite writes DOIs)
//	username:     the repository id, e.g. EXAMPLE.REPO (required)
//	password:     its password; or passwordFile, a file holding it
//	landingPage:  the DOI's URL, {pid} replaced by the percent-encoded
//	              identifier (default: the node's <MN base URL>/v2/object/{pid})
//	publisher:    the publisher of every DOI (default: the node's name)
//	autoPublish:  true (default): publish makes the DOI findable at once;
//	              false: it stays a draft until publishIdentifier
//
// baseURL is the API: https://api.datacite.org, or https://api.test.datacite.org
// for DataCite's test system.
package datacite

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// Options are the upstream's options for DataCite.
type Options struct {
	Prefix       string `yaml:"prefix"`
	Shoulder     string `yaml:"shoulder"`
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"passwordFile"`
	LandingPage  string `yaml:"landingPage"`
	Publisher    string `yaml:"publisher"`
	AutoPublish  *bool  `yaml:"autoPublish"`
}

// Service is DataCite as the node's identifier service. It is safe for
// concurrent use.
type Service struct {
	c           *upstream.Client
	base        string // the API's base URL, without a trailing slash
	prefix      string
	shoulder    string
	user, pass  string
	landing     string // a URL template with {pid}
	publisher   string
	autoPublish bool
	owned       string // doi:<prefix>/<shoulder>, lower case
}

var _ node.Identifiers = (*Service)(nil)

var (
	prefixRE   = regexp.MustCompile(`^10\.[0-9]{4,9}$`)
	shoulderRE = regexp.MustCompile(`^[A-Za-z0-9._/-]{0,64}$`)
)

// New builds the service upstream u describes, calling it through c.
// mnBaseURL is the node's MN base URL (…/mn), for the default landing page;
// nodeName the default publisher. It does not contact DataCite.
func New(u config.Upstream, c *upstream.Client, mnBaseURL, nodeName string) (*Service, error) {
	s, err := parse(u, mnBaseURL, nodeName)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// CheckOptions reports every problem of u's options and baseURL that New
// would fail on, with the same mnBaseURL and nodeName. It reads passwordFile.
func CheckOptions(u config.Upstream, mnBaseURL, nodeName string) error {
	_, err := parse(u, mnBaseURL, nodeName)
	return err
}

// parse decodes and checks u's options into a service without its upstream
// client.
func parse(u config.Upstream, mnBaseURL, nodeName string) (*Service, error) {
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, fmt.Errorf("datacite: %w", err)
	}
	var errs []error
	b, err := url.Parse(u.BaseURL)
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" || b.RawQuery != "" || b.Fragment != "" || b.User != nil {
		errs = append(errs, fmt.Errorf("baseURL %q is not an http(s) URL without query or credentials (use options.username)", u.BaseURL))
	}
	s := &Service{base: strings.TrimRight(u.BaseURL, "/"), prefix: o.Prefix, shoulder: strings.ToLower(o.Shoulder),
		user: o.Username, pass: o.Password, landing: o.LandingPage, publisher: strings.TrimSpace(o.Publisher), autoPublish: true}
	if o.AutoPublish != nil {
		s.autoPublish = *o.AutoPublish
	}
	if !prefixRE.MatchString(o.Prefix) {
		errs = append(errs, fmt.Errorf("options.prefix %q is not a DOI prefix such as 10.5072", o.Prefix))
	}
	if !shoulderRE.MatchString(o.Shoulder) || strings.HasPrefix(o.Shoulder, "/") || strings.Contains(o.Shoulder, "//") {
		errs = append(errs, fmt.Errorf("options.shoulder %q may hold at most 64 of A-Z a-z 0-9 . _ - / (no leading or double /)", o.Shoulder))
	} else if segs := strings.Split(o.Shoulder, "/"); slices.ContainsFunc(segs[:len(segs)-1], func(seg string) bool { return seg == "." || seg == ".." }) {
		errs = append(errs, fmt.Errorf(`options.shoulder %q has a "." or ".." segment`, o.Shoulder))
	}
	if o.Username == "" {
		errs = append(errs, errors.New("options.username (the DataCite repository id) is required"))
	}
	switch {
	case o.Password != "" && o.PasswordFile != "":
		errs = append(errs, errors.New("options.password and options.passwordFile are both set; keep one"))
	case o.PasswordFile != "":
		p, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("options.passwordFile: %w", err))
			break
		}
		if s.pass = strings.TrimRight(string(p), "\r\n"); s.pass == "" {
			errs = append(errs, fmt.Errorf("options.passwordFile %s is empty", o.PasswordFile))
		}
	case o.Password == "":
		errs = append(errs, errors.New("options.password or options.passwordFile is required"))
	}
	if s.landing == "" {
		s.landing = strings.TrimRight(mnBaseURL, "/") + "/v2/object/{pid}"
	}
	if !strings.Contains(s.landing, "{pid}") {
		errs = append(errs, fmt.Errorf("options.landingPage %q has no {pid}", s.landing))
	} else if l, err := url.Parse(strings.ReplaceAll(s.landing, "{pid}", "x")); err != nil || (l.Scheme != "http" && l.Scheme != "https") || l.Host == "" {
		errs = append(errs, fmt.Errorf("options.landingPage %q is not an absolute http(s) URL", s.landing))
	}
	if s.publisher == "" {
		s.publisher = strings.TrimSpace(nodeName)
	}
	if s.publisher == "" {
		errs = append(errs, errors.New("options.publisher is required (the node has no name)"))
	}
	if err := upstream.OptionProblems("datacite", u, errs...); err != nil {
		return nil, err
	}
	s.owned = strings.ToLower("doi:" + s.prefix + "/" + s.shoulder)
	return s, nil
}

// Owns reports whether id is a DOI of the service as the node writes them:
// doi:<prefix>/<shoulder>… in lower case, without empty, "." or ".." path
// segments (see doi).
func (s *Service) Owns(id string) bool {
	_, ok := s.doi(id)
	return ok && len(id) > len(s.owned) && strings.HasPrefix(id, s.owned)
}

// AutoPublish reports whether publish makes a DOI findable at once.
func (s *Service) AutoPublish() bool { return s.autoPublish }
