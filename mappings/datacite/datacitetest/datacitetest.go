// Package datacitetest is a fake of DataCite's REST API (the DOIs part of
// https://support.datacite.org/docs/api) on a loopback port, for tests: DataCite
// is a hosted service that cannot be run locally. It enforces what the real
// API enforces for a repository account:
//
//   - HTTP basic authentication as the repository (401 "Bad credentials." on
//     writes, and on reads of DOIs that are not findable, which are 404 to
//     others);
//   - JSON:API documents: POST and PUT need Content-Type
//     application/vnd.api+json (415 otherwise), {"data": {"type": "dois",
//     "attributes": {...}}} (400 when it is not one), answers are JSON:API;
//   - prefix ownership: a DOI outside the repository's prefixes is 403;
//   - POST /dois with attributes.doi, or attributes.prefix alone for a
//     generated suffix; a DOI that exists is 422 "This DOI has already been
//     taken"; PUT /dois/{doi} updates the attributes it is given, or creates
//     the DOI (201);
//   - states draft, registered and findable, moved by attributes.event:
//     publish (draft or registered -> findable), register (draft ->
//     registered), hide (findable -> registered); another move is 422. A
//     registered or findable DOI must hold url (an http(s) URL), creators
//     (each with a name), titles (each with a title), publisher,
//     publicationYear and types.resourceTypeGeneral (one of the schema's
//     values), and each relatedIdentifier its three fields: 422 listing
//     each missing one, on every write that leaves it so;
//   - DELETE removes drafts only (204; 405 for others); an unknown DOI is 404.
//
// DOIs are kept and answered in lower case, as DataCite does. Fault lets a test
// answer requests itself (an outage, a slow answer, a refusal).
package datacitetest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a fake DataCite API.
type Server struct {
	// URL is the API's base URL, http://127.0.0.1:PORT.
	URL string

	srv      *httptest.Server
	repo     string
	password string
	prefixes []string

	mu       sync.Mutex
	dois     map[string]*DOI // by lower-case DOI
	fault    func(w http.ResponseWriter, r *http.Request) bool
	requests []Request
	seq      int
}

// DOI is one DOI as the fake holds it.
type DOI struct {
	DOI        string         // lower case, without a scheme: 10.5072/abc
	State      string         // draft, registered or findable
	Attributes map[string]any // the metadata attributes, as JSON decodes them
	Created    time.Time
	Updated    time.Time
}

// Request is one request the fake received.
type Request struct {
	Method, Path string
	Event        string // attributes.event of a write
	Status       int    // the answer's status
}

// States.
const (
	Draft      = "draft"
	Registered = "registered"
	Findable   = "findable"
)

// New starts a fake for the repository repo with password, which holds
// prefixes. Close stops it.
func New(repo, password string, prefixes ...string) *Server {
	s := &Server{repo: repo, password: password, prefixes: prefixes, dois: map[string]*DOI{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /heartbeat", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OK") })
	mux.HandleFunc("POST /dois", s.create)
	mux.HandleFunc("PUT /dois/{doi...}", s.update)
	mux.HandleFunc("GET /dois/{doi...}", s.get)
	mux.HandleFunc("DELETE /dois/{doi...}", s.delete)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			return // 200: the API answers
		}
		fail(w, http.StatusNotFound, apiError{Status: "404", Title: "The resource you are looking for doesn't exist."})
	})
	s.srv = httptest.NewServer(s.record(mux))
	s.URL = s.srv.URL
	return s
}

// Start is New, closed when tb ends.
func Start(tb testing.TB, repo, password string, prefixes ...string) *Server {
	tb.Helper()
	s := New(repo, password, prefixes...)
	tb.Cleanup(s.Close)
	return s
}

// Close stops the server; requests in flight are cut off.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Fault installs f, which sees every request first and answers it itself
// when it returns true; nil removes it.
func (s *Server) Fault(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// DOI returns a copy of what the fake holds for doi (with or without doi:,
// any case).
func (s *Server) DOI(doi string) (DOI, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dois[key(doi)]
	if !ok {
		return DOI{}, false
	}
	return d.clone(), true
}

// DOIs returns copies of every DOI held, in the order they were created.
func (s *Server) DOIs() []DOI {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DOI, 0, len(s.dois))
	for _, d := range s.dois {
		out = append(out, d.clone())
	}
	slices.SortFunc(out, func(a, b DOI) int { return a.Created.Compare(b.Created) })
	return out
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Get is the attribute at path, dot-separated with list indexes:
// "titles.0.title", "types.resourceTypeGeneral"; nil when absent.
func (d DOI) Get(path string) any {
	var v any = d.Attributes
	for _, p := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// String is Get as a string ("" when absent; numbers as JSON writes them).
func (d DOI) String(path string) string {
	switch v := d.Get(path).(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func (d *DOI) clone() DOI {
	c := *d
	b, _ := json.Marshal(d.Attributes)
	json.Unmarshal(b, &c.Attributes)
	return c
}

func key(doi string) string {
	doi = strings.ToLower(strings.TrimSpace(doi))
	return strings.TrimPrefix(doi, "doi:")
}

// --- handlers

// statusWriter remembers the answer's status for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// record logs each request (with its event) and runs the fault hook first.
func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var event string
		if r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			var d struct {
				Data struct {
					Attributes struct {
						Event string `json:"event"`
					} `json:"attributes"`
				} `json:"data"`
			}
			json.Unmarshal(b, &d)
			event = d.Data.Attributes.Event
		}
		sw := &statusWriter{ResponseWriter: w}
		s.mu.Lock()
		f := s.fault
		s.mu.Unlock()
		if f == nil || !f(sw, r) {
			next.ServeHTTP(sw, r)
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.EscapedPath(), Event: event, Status: sw.status})
		s.mu.Unlock()
	})
}

// apiError is one JSON:API error.
type apiError struct {
	Status string `json:"status,omitempty"`
	Source string `json:"source,omitempty"`
	UID    string `json:"uid,omitempty"`
	Title  string `json:"title"`
}

func fail(w http.ResponseWriter, status int, errs ...apiError) {
	w.Header().Set("Content-Type", "application/vnd.api+json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": errs})
}

func (s *Server) authorized(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	return ok && strings.EqualFold(u, s.repo) && p == s.password
}

func badCredentials(w http.ResponseWriter) {
	fail(w, http.StatusUnauthorized, apiError{Status: "401", Title: "Bad credentials."})
}

// payload reads a JSON:API DOI document: its attributes, or an answer.
func payload(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/vnd.api+json" {
		fail(w, http.StatusUnsupportedMediaType, apiError{Status: "415", Title: "The content type is not recognized."})
		return nil, false
	}
	var d struct {
		Data *struct {
			Type       string         `json:"type"`
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&d); err != nil || d.Data == nil {
		fail(w, http.StatusBadRequest, apiError{Status: "400", Title: "You need to provide a payload following the JSONAPI spec"})
		return nil, false
	}
	if d.Data.Type != "dois" {
		fail(w, http.StatusBadRequest, apiError{Status: "400", Title: fmt.Sprintf("Type %q is not dois", d.Data.Type)})
		return nil, false
	}
	if d.Data.Attributes == nil {
		d.Data.Attributes = map[string]any{}
	}
	return d.Data.Attributes, true
}

// owned splits doi into prefix and suffix and checks the repository holds
// the prefix.
func (s *Server) owned(w http.ResponseWriter, doi string) bool {
	prefix, suffix, ok := strings.Cut(doi, "/")
	if !ok || suffix == "" || !strings.HasPrefix(prefix, "10.") {
		fail(w, http.StatusUnprocessableEntity, apiError{Source: "doi", UID: doi, Title: "Is invalid"})
		return false
	}
	if !slices.Contains(s.prefixes, prefix) {
		fail(w, http.StatusForbidden, apiError{Status: "403", Title: "You are not authorized to access this resource."})
		return false
	}
	return true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		badCredentials(w)
		return
	}
	attrs, ok := payload(w, r)
	if !ok {
		return
	}
	doi, _ := attrs["doi"].(string)
	if doi == "" {
		prefix, _ := attrs["prefix"].(string)
		if prefix == "" {
			fail(w, http.StatusUnprocessableEntity, apiError{Source: "doi", Title: "Can't be blank"})
			return
		}
		s.mu.Lock()
		s.seq++
		doi = fmt.Sprintf("%s/gen-%04d", prefix, s.seq)
		s.mu.Unlock()
	}
	doi = key(doi)
	if !s.owned(w, doi) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.dois[doi]; exists {
		fail(w, http.StatusUnprocessableEntity, apiError{Source: "doi", UID: doi, Title: "This DOI has already been taken"})
		return
	}
	d := &DOI{DOI: doi, State: Draft, Attributes: map[string]any{}}
	if !s.apply(w, d, attrs) {
		return
	}
	d.Created = time.Now()
	d.Updated = d.Created
	s.dois[doi] = d
	answer(w, http.StatusCreated, d)
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		badCredentials(w)
		return
	}
	doi := key(r.PathValue("doi"))
	if !s.owned(w, doi) {
		return
	}
	attrs, ok := payload(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, exists := s.dois[doi]
	status := http.StatusOK
	if !exists {
		d, status = &DOI{DOI: doi, State: Draft, Attributes: map[string]any{}, Created: time.Now()}, http.StatusCreated
	}
	next := d.clone()
	if !s.apply(w, &next, attrs) {
		return
	}
	next.Updated = time.Now()
	s.dois[doi] = &next
	answer(w, status, &next)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	doi := key(r.PathValue("doi"))
	s.mu.Lock()
	d, ok := s.dois[doi]
	var c DOI
	if ok {
		c = d.clone()
	}
	s.mu.Unlock()
	if !ok || (c.State != Findable && !s.authorized(r)) {
		fail(w, http.StatusNotFound, apiError{Status: "404", Title: "The resource you are looking for doesn't exist."})
		return
	}
	answer(w, http.StatusOK, &c)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		badCredentials(w)
		return
	}
	doi := key(r.PathValue("doi"))
	if !s.owned(w, doi) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dois[doi]
	switch {
	case !ok:
		fail(w, http.StatusNotFound, apiError{Status: "404", Title: "The resource you are looking for doesn't exist."})
	case d.State != Draft:
		fail(w, http.StatusMethodNotAllowed, apiError{Status: "405", Title: "Method not allowed"})
	default:
		delete(s.dois, doi)
		w.WriteHeader(http.StatusNoContent)
	}
}

// apply merges attrs into d and moves its state by attrs' event, answering
// 422 (and leaving d unusable) when the result is not allowed.
func (s *Server) apply(w http.ResponseWriter, d *DOI, attrs map[string]any) bool {
	event, _ := attrs["event"].(string)
	for k, v := range attrs {
		switch k {
		case "doi", "prefix", "suffix", "event", "state", "identifier":
			continue
		}
		d.Attributes[k] = v
	}
	switch event {
	case "":
	case "publish":
		if d.State == Draft || d.State == Registered {
			d.State = Findable
		}
	case "register":
		if d.State == Findable {
			fail(w, http.StatusUnprocessableEntity, apiError{Source: "event", UID: d.DOI, Title: "Cannot transition from findable via register"})
			return false
		}
		d.State = Registered
	case "hide":
		if d.State != Findable {
			fail(w, http.StatusUnprocessableEntity, apiError{Source: "event", UID: d.DOI, Title: "Cannot transition from " + d.State + " via hide"})
			return false
		}
		d.State = Registered
	default:
		fail(w, http.StatusUnprocessableEntity, apiError{Source: "event", UID: d.DOI, Title: fmt.Sprintf("Event %q is not publish, register or hide", event)})
		return false
	}
	if d.State != Draft {
		if errs := validate(d); len(errs) > 0 {
			fail(w, http.StatusUnprocessableEntity, errs...)
			return false
		}
	}
	return true
}

// resourceTypes are the Metadata Schema 4.5 values of resourceTypeGeneral.
var resourceTypes = []string{"Audiovisual", "Book", "BookChapter", "Collection", "ComputationalNotebook",
	"ConferencePaper", "ConferenceProceeding", "DataPaper", "Dataset", "Dissertation", "Event", "Image",
	"Instrument", "InteractiveResource", "Journal", "JournalArticle", "Model", "OutputManagementPlan",
	"PeerReview", "PhysicalObject", "Preprint", "Report", "Service", "Software", "Sound", "Standard",
	"StudyRegistration", "Text", "Workflow", "Other"}

// validate lists what a registered or findable DOI lacks.
func validate(d *DOI) []apiError {
	var errs []apiError
	miss := func(source, title string) {
		errs = append(errs, apiError{Source: source, UID: d.DOI, Title: title})
	}
	if u, _ := d.Get("url").(string); u == "" {
		miss("url", "Can't be blank")
	} else if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		miss("url", "Is not a valid URL")
	}
	if cs, _ := d.Get("creators").([]any); len(cs) == 0 {
		miss("creators", "DOI "+d.DOI+": Creators can't be blank")
	} else {
		for i := range cs {
			if n, _ := d.Get(fmt.Sprintf("creators.%d.name", i)).(string); strings.TrimSpace(n) == "" {
				miss("creators", fmt.Sprintf("DOI %s: Creator %d has no name", d.DOI, i+1))
			}
		}
	}
	if ts, _ := d.Get("titles").([]any); len(ts) == 0 {
		miss("titles", "DOI "+d.DOI+": Titles can't be blank")
	} else {
		for i := range ts {
			if t, _ := d.Get(fmt.Sprintf("titles.%d.title", i)).(string); strings.TrimSpace(t) == "" {
				miss("titles", fmt.Sprintf("DOI %s: Title %d can't be blank", d.DOI, i+1))
			}
		}
	}
	switch p := d.Get("publisher").(type) {
	case string:
		if strings.TrimSpace(p) == "" {
			miss("publisher", "DOI "+d.DOI+": Publisher can't be blank")
		}
	case map[string]any:
		if n, _ := p["name"].(string); strings.TrimSpace(n) == "" {
			miss("publisher", "DOI "+d.DOI+": Publisher can't be blank")
		}
	default:
		miss("publisher", "DOI "+d.DOI+": Publisher can't be blank")
	}
	switch y := d.Get("publicationYear").(type) {
	case float64:
		if y < 1000 || y > 9999 || y != float64(int(y)) {
			miss("publicationYear", "DOI "+d.DOI+": Publication year is invalid")
		}
	case string:
		if n, err := strconv.Atoi(y); err != nil || n < 1000 || n > 9999 {
			miss("publicationYear", "DOI "+d.DOI+": Publication year is invalid")
		}
	default:
		miss("publicationYear", "DOI "+d.DOI+": Publication year can't be blank")
	}
	if rt, _ := d.Get("types.resourceTypeGeneral").(string); rt == "" {
		miss("types", "DOI "+d.DOI+": Resource type general can't be blank")
	} else if !slices.Contains(resourceTypes, rt) {
		miss("types", fmt.Sprintf("DOI %s: Resource type general %q is not a DataCite value", d.DOI, rt))
	}
	if rs, ok := d.Get("relatedIdentifiers").([]any); ok {
		for i := range rs {
			for _, f := range []string{"relatedIdentifier", "relatedIdentifierType", "relationType"} {
				if v, _ := d.Get(fmt.Sprintf("relatedIdentifiers.%d.%s", i, f)).(string); v == "" {
					miss("relatedIdentifiers", fmt.Sprintf("DOI %s: Related identifier %d has no %s", d.DOI, i+1, f))
				}
			}
		}
	}
	return errs
}

// answer writes d as a JSON:API document.
func answer(w http.ResponseWriter, status int, d *DOI) {
	attrs := map[string]any{}
	for k, v := range d.Attributes {
		attrs[k] = v
	}
	prefix, suffix, _ := strings.Cut(d.DOI, "/")
	attrs["doi"], attrs["prefix"], attrs["suffix"], attrs["state"] = d.DOI, prefix, suffix, d.State
	attrs["created"], attrs["updated"] = d.Created.UTC().Format(time.RFC3339), d.Updated.UTC().Format(time.RFC3339)
	w.Header().Set("Content-Type", "application/vnd.api+json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"id": d.DOI, "type": "dois", "attributes": attrs}})
}
