package datacite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// jsonAPI is the media type of every DataCite document.
const jsonAPI = "application/vnd.api+json"

// mintAttempts bounds the suffixes Mint draws when DataCite says one is taken.
const mintAttempts = 3

// maxAnswer bounds the DataCite answer read.
const maxAnswer = 1 << 20

// doc is a JSON:API document of one DOI.
type doc struct {
	Data resource `json:"data"`
}

type resource struct {
	ID         string     `json:"id,omitempty"`
	Type       string     `json:"type"`
	Attributes attributes `json:"attributes"`
}

// Mint reserves a new DOI as a draft without metadata and returns it as
// doi:<prefix>/<suffix>.
func (s *Service) Mint(ctx context.Context) (string, error) {
	var last error
	for range mintAttempts {
		doi := s.prefix + "/" + s.shoulder + randomSuffix()
		status, err := s.send(ctx, "DataCite.createDOI", http.MethodPost, "/dois",
			&doc{Data: resource{Type: "dois", Attributes: attributes{DOI: doi}}}, "minting a DOI")
		if err == nil {
			return "doi:" + doi, nil
		}
		if status != http.StatusUnprocessableEntity || !taken(err) {
			return "", err
		}
		last = err
	}
	return "", last
}

// Register creates or replaces the metadata of id, and makes it findable
// when findable is set.
func (s *Service) Register(ctx context.Context, id string, md node.IDMetadata, findable bool) error {
	doi, ok := s.doi(id)
	if !ok {
		return adapter.Errorf(adapter.ServiceFailure, "%q is not a DOI of DataCite prefix %s", id, s.prefix).WithPID(id)
	}
	a := s.attributes(id, doi, md)
	what := "registering the metadata of " + id
	if findable {
		a.Event = "publish"
		what = "publishing " + id
	}
	_, err := s.send(ctx, "DataCite.updateDOI", http.MethodPut, doiPath(doi), &doc{Data: resource{ID: doi, Type: "dois", Attributes: a}}, what)
	if e := (*adapter.Exception)(nil); errors.As(err, &e) {
		e.PID = id
	}
	return err
}

// Discard deletes the draft id; an id DataCite does not know is gone already.
func (s *Service) Discard(ctx context.Context, id string) error {
	doi, ok := s.doi(id)
	if !ok {
		return nil
	}
	status, err := s.send(ctx, "DataCite.deleteDOI", http.MethodDelete, doiPath(doi), nil, "deleting the draft "+id)
	if status == http.StatusNotFound {
		return nil
	}
	return err
}

// doi is id without its doi: scheme, when it is a DOI of the prefix written
// as the node writes them: in lower case (DataCite compares DOIs without case,
// so another spelling would name the same DOI as another PID), and without
// empty, "." or ".." segments in the suffix (which would move the request out
// of /dois/ once a server or proxy cleans the path).
func (s *Service) doi(id string) (string, bool) {
	doi, ok := strings.CutPrefix(id, "doi:")
	if !ok || doi != strings.ToLower(doi) {
		return "", false
	}
	suffix, ok := strings.CutPrefix(doi, s.prefix+"/")
	if !ok {
		return "", false
	}
	for seg := range strings.SplitSeq(suffix, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", false
		}
	}
	return doi, true
}

// doiPath is the API path of doi: /dois/<prefix>/<suffix>, each segment of
// the suffix escaped.
func doiPath(doi string) string {
	segs := strings.Split(doi, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return "/dois/" + strings.Join(segs, "/")
}

// send makes one call with body (nil: none) and returns the answer's status;
// any answer but a 2xx is an error (errors.go). The answer is read and
// dropped: what was sent is what DataCite holds.
func (s *Service) send(ctx context.Context, op, method, path string, body *doc, what string) (int, error) {
	ctx, cancel := s.c.WithTimeout(upstream.WithOperation(ctx, op))
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, adapter.Wrap(adapter.ServiceFailure, err, "DataCite: encoding the request for %s", what)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, adapter.Wrap(adapter.ServiceFailure, err, "DataCite: the request for %s cannot be made", what)
	}
	req.SetBasicAuth(s.user, s.pass)
	req.Header.Set("Accept", jsonAPI)
	if body != nil {
		req.Header.Set("Content-Type", jsonAPI)
	}
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return 0, s.unreachable(err, what)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, s.refused(resp, what)
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer)); err != nil {
		return resp.StatusCode, s.unreachable(err, what)
	}
	return resp.StatusCode, nil
}

// crockford is Crockford's base32 alphabet in lower case: no i, l, o, u.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// randomSuffix is 40 random bits as xxxx-xxxx.
func randomSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, crockford[c&31])
	}
	return string(out)
}
