package httpapi

import (
	"cmp"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/metrics"
)

// upstreamConfig is an http upstream named legacy at baseURL with the given
// options (YAML), with short timeouts and a breaker that opens after 3 failures.
func upstreamConfig(t testing.TB, baseURL, options string) config.Upstream {
	t.Helper()
	return mappingtest.UpstreamConfig(t, config.UpstreamHTTP, "legacy", baseURL, options)
}

// open builds a store and its client, closed when t ends.
func open(t testing.TB, u config.Upstream, m *metrics.Metrics) *Store {
	t.Helper()
	return mappingtest.Open(t, u, m, New)
}

// legacy is a fake institutional repository with a REST API of its own, in
// JSON under /api/ and in XML (ISO-8859-1, namespaced) under /xml/:
//
//	GET    /api/records?page=N&per_page=M[&modified_since=RFC3339]
//	       {"records": [...], "next": N+1 or null, "links": {"next": URL}}
//	GET    /api/records/{id}            {"record": {...}}
//	GET    /api/records/{id}/content    the bytes
//	PUT    /api/records/{id}/content    stores them (a new record if need be)
//	DELETE /api/records/{id}/content    removes the record
//	GET    /xml/records?limit=M[&offset=N | &token=T]
//	       <response><records><record id="..">..</record></records>
//	       <resumptionToken>T</resumptionToken></response>
//	GET    /xml/records/{id}            <record id="..">..</record>
//
// Records are listed in the order they were made; per_page and limit are
// capped at maxPage.
type legacy struct {
	*httptest.Server
	mu      sync.Mutex
	records map[string]*record
	order   []string
	queries []string // the raw queries of list requests
}

type record struct {
	// dataset is the id of the dataset the record belongs to; "" for none.
	id, title, owner, mime, fileName, dataset string
	content                                   []byte
	updated, created                          time.Time
}

// maxPage is the fake's largest page.
const maxPage = 500

// epoch is when the fake's first record changed.
var epoch = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

// newLegacy serves n records, r00000..: record i changed at epoch + i
// minutes, in dataset set-(i mod 3), but every fifth record (i mod 5 = 4) in
// none.
func newLegacy(t testing.TB, n int) *legacy {
	t.Helper()
	l := &legacy{records: map[string]*record{}}
	for i := range n {
		id := fmt.Sprintf("r%05d", i)
		l.add(&record{id: id, title: fmt.Sprintf("Survey %d", i), owner: fmt.Sprintf("CN=owner%d,DC=example", i%7),
			mime: []string{"text/csv", "application/json"}[i%2], fileName: fmt.Sprintf("zürich-%d.csv", i),
			content: fmt.Appendf(nil, "content of %s\n", id),
			updated: epoch.Add(time.Duration(i) * time.Minute), created: epoch.Add(-time.Duration(i) * time.Hour),
			dataset: datasetOf(i)})
	}
	l.Server = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.Close)
	return l
}

// datasetOf is the dataset of the fake's record i.
func datasetOf(i int) string {
	if i%5 == 4 {
		return ""
	}
	return fmt.Sprintf("set-%d", i%3)
}

func (l *legacy) add(r *record) {
	if _, ok := l.records[r.id]; !ok {
		l.order = append(l.order, r.id)
	}
	l.records[r.id] = r
}

func (r *record) json() map[string]any {
	sum := md5.Sum(r.content)
	out := map[string]any{"id": r.id, "title": r.title, "size": len(r.content), "md5": hex.EncodeToString(sum[:]),
		"mime": r.mime, "owner": r.owner, "updated": r.updated.Format(time.RFC3339), "created": r.created.Format(time.RFC3339),
		"file_name": r.fileName}
	if r.dataset != "" {
		out["parent"] = map[string]any{"dataset": r.dataset}
	}
	return out
}

// xmlDateLayout is how the XML API writes dates.
const xmlDateLayout = "2006-01-02 15:04:05"

func (r *record) xml() string {
	sum := sha256.Sum256(r.content)
	collection := ""
	if r.dataset != "" {
		collection = fmt.Sprintf(`<collection id="%s"/>`, r.dataset)
	}
	return fmt.Sprintf(`<record id="%s"><title>%s</title><file name="%s" size="%d" type="%s"/>`+
		`<checksum algorithm="SHA-256">%x</checksum><owner>%s</owner><updated>%s</updated>%s</record>`,
		r.id, r.title, r.fileName, len(r.content), r.mime, sum, r.owner, r.updated.Format(xmlDateLayout), collection)
}

func (l *legacy) serve(w http.ResponseWriter, req *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := strings.Split(strings.Trim(req.URL.EscapedPath(), "/"), "/")
	for i := range p {
		p[i], _ = url.PathUnescape(p[i]) // ids may hold a /
	}
	switch {
	case len(p) == 2 && p[1] == "records" && req.Method == http.MethodGet:
		l.queries = append(l.queries, req.URL.RawQuery)
		l.list(w, req, p[0] == "xml")
	case len(p) == 3 && p[0] == "api" && req.Method == http.MethodGet:
		if r := l.records[p[2]]; r != nil {
			writeJSON(w, map[string]any{"record": r.json()})
			return
		}
		w.WriteHeader(http.StatusNotFound)
		writeJSON(w, map[string]any{"error": "no such record"})
	case len(p) == 3 && p[0] == "xml" && req.Method == http.MethodGet:
		if r := l.records[p[2]]; r != nil {
			w.Header().Set("Content-Type", "application/xml")
			io.WriteString(w, r.xml())
			return
		}
		http.Error(w, "<error>no such record</error>", http.StatusNotFound)
	case len(p) == 4 && p[3] == "content":
		l.content(w, req, p[2])
	default:
		http.Error(w, "no such endpoint", http.StatusBadRequest)
	}
}

func (l *legacy) content(w http.ResponseWriter, req *http.Request, id string) {
	r := l.records[id]
	switch req.Method {
	case http.MethodGet:
		if r == nil {
			http.Error(w, "no such record", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", r.mime)
		w.Header().Set("Content-Length", strconv.Itoa(len(r.content)))
		w.Write(r.content)
	case http.MethodPut:
		l.mu.Unlock() // not while the body streams in
		b, err := io.ReadAll(req.Body)
		l.mu.Lock()
		if err != nil {
			return // the client went away: nothing is stored
		}
		now := time.Now().UTC().Truncate(time.Second)
		l.add(&record{id: id, title: id, owner: "uploader", mime: req.Header.Get("Content-Type"), fileName: id,
			content: b, updated: now, created: now})
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		if r == nil {
			http.Error(w, "no such record", http.StatusNotFound)
			return
		}
		delete(l.records, id)
		l.order = slices.DeleteFunc(l.order, func(s string) bool { return s == id })
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (l *legacy) list(w http.ResponseWriter, req *http.Request, inXML bool) {
	q := req.URL.Query()
	var ids []string
	since, _ := time.Parse(time.RFC3339, q.Get("modified_since"))
	for _, id := range l.order {
		if !l.records[id].updated.Before(since) {
			ids = append(ids, id)
		}
	}
	size, _ := strconv.Atoi(cmp.Or(q.Get("per_page"), q.Get("limit")))
	size = min(max(size, 1), maxPage)
	var from int
	switch {
	case q.Has("page"):
		page, _ := strconv.Atoi(q.Get("page"))
		from = (page - 1) * size
	case q.Has("token"):
		b, _ := base64.RawURLEncoding.DecodeString(q.Get("token"))
		from, _ = strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
	default:
		from, _ = strconv.Atoi(q.Get("offset"))
	}
	from = min(max(from, 0), len(ids))
	to := min(from+size, len(ids))
	if inXML {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="ISO-8859-1"?>` + "\n" +
			`<response xmlns="http://legacy.example.org/ns"><records>`)
		for _, id := range ids[from:to] {
			b.WriteString(l.records[id].xml())
		}
		b.WriteString("</records>")
		if to < len(ids) {
			fmt.Fprintf(&b, "<resumptionToken>%s</resumptionToken>", base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "offset:%d", to)))
		}
		b.WriteString("</response>")
		w.Header().Set("Content-Type", "application/xml; charset=ISO-8859-1")
		w.Write(latin1(b.String()))
		return
	}
	items := []map[string]any{}
	for _, id := range ids[from:to] {
		items = append(items, l.records[id].json())
	}
	out := map[string]any{"records": items, "next": nil, "links": map[string]any{}}
	if to < len(ids) {
		page := from/size + 2
		out["next"] = page
		nq := req.URL.Query()
		nq.Set("page", strconv.Itoa(page))
		out["links"] = map[string]any{"next": "/api/records?" + nq.Encode()}
	}
	writeJSON(w, out)
}

// listQueries are the queries of the list requests so far.
func (l *legacy) listQueries() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.queries)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// latin1 encodes s, whose characters are all below U+0100, in ISO-8859-1.
func latin1(s string) []byte {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		b = append(b, byte(r))
	}
	return b
}
