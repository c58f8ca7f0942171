// Package httpapi is the http mapping: a legacy repository's REST API,
// described entirely by the upstream's options, as a store. It implements
// node.Blobs (object bytes) and node.Lister (a listing to harvest, and Stat for
// one object), every request going through the upstream's client (metrics,
// breaker, retries of GET and HEAD).
//
// Each operation is a request template: a method, a URL relative to baseURL
// (concatenated, so it starts with /) and headers. Placeholders, in URLs and
// header values:
//
//	{key}        the Blobs key as one path segment (a / becomes %2F; the empty
//	             key and keys with a . or .. segment, which a server decoding
//	             %2F would resolve, are refused); in a URL, before its ?
//	{key.query}  the key escaped for a query parameter; in a URL, after its ?
//	{key.blob}   the key in d1bridge's own fan-out layout, h[0:2]/h[2:4]/name,
//	             h the key's SHA-256 and name the key, or ~h when the key is
//	             not a plain file name (upstream.BlobName): for a file server
//	             d1bridge writes to, whatever the keys; before a URL's ?
//	{page} {offset} {cursor}   list: the page number, item offset or the
//	             upstream's next-page token, by list.paging
//	{pageSize}   list: list.pageSize
//	{since}      list.since: the modified-since date, RFC 3339 in UTC
//
// The pid option is a template too, with {key} unescaped.
//
// Answers (stat, list) are JSON or XML (format). A field is read at a path:
// "." for the item itself, "header:Name" for an answer header (stat only),
// else dotted segments: in JSON object members and array indexes (a.b.0.c);
// in XML, from the root element, child elements by local name, an index among
// them, and a last @attribute (records.record, checksum.@algorithm). Sizes are
// whole numbers, dates RFC 3339, HTTP dates (RFC 1123) or dateLayout.
//
// Stat and list answers are read whole, up to 64 MiB, within the upstream's
// timeout; get and put stream for as long as bytes flow.
//
// Get streams the upstream's answer as it comes; a 404 is NotFound. Put
// streams the bytes (chunked) and is as atomic as the upstream's PUT (nginx
// writes a temporary file and renames it); when the PUT gets no answer, Put
// deletes the key, which the upstream may hold all the same. Delete treats 404
// as done. Without
// put or delete in the options, Put and Delete answer NotImplemented; without
// stat or list, Stat and List do.
//
// Options (upstreams[].options):
//
//	format:      json (default) or xml, the answers of stat and list
//	dateLayout:  a Go time layout for dates that are not RFC 3339 or HTTP dates
//	headers:     sent with every request (name: value)
//	headerFiles: headers whose values are in files (name: path), for secrets
//	pid:         the DataONE identifier of an object, a template ({key} when unset)
//	checksumAlgorithm: the algorithm of fields.checksum when the answer does not say
//	fields:      where each object's fields are: key, pid, dataset, size,
//	             checksum, checksumAlgorithm, formatId, rightsHolder, fileName,
//	             modified, uploaded; each a path, all optional but key (for list)
//	get:         {method (GET), url, headers}: required
//	put, delete: {method (PUT, DELETE), url, headers}
//	stat:        {method (GET), url, headers, item (the object's path in the
//	             answer; the whole answer when unset), fields (instead of fields)}
//	list:        {method (GET), url, headers, items (required: the path of the
//	             item list), paging (none, page, offset, cursor or nextURL),
//	             pageSize, firstPage (page paging; 1), next (cursor and nextURL:
//	             the path of the next page's token or URL; empty or absent ends
//	             the list), since (a query parameter template with {since},
//	             appended when harvesting changes), where (path: value; other
//	             items are skipped), fields (instead of fields)}
//
// Datasets: when the list's fields name dataset (the id of the record the
// object belongs to, such as its parent dataset's), the store is harvested as
// datasets (node.GroupRecords), not object by object: each dataset version
// becomes a DataONE package of its objects, named by the dataset's id and
// their fileName (the key when absent), with generated science metadata;
// pid is then not used. Objects without a dataset are left out. Every pass
// lists the whole store (a dataset must come whole), so list.since is not
// used either.
//
// Paging page and offset end at a page of fewer than pageSize items (so
// pageSize must not exceed the upstream's largest page); cursor and nextURL end
// when next is empty. A nextURL must be on baseURL's scheme and host.
package httpapi

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"golang.org/x/net/http/httpguts"
)

// Options are the upstream's options for an http store.
type Options struct {
	Format            string            `yaml:"format"`
	DateLayout        string            `yaml:"dateLayout"`
	Headers           map[string]string `yaml:"headers"`
	HeaderFiles       map[string]string `yaml:"headerFiles"`
	PID               string            `yaml:"pid"`
	ChecksumAlgorithm string            `yaml:"checksumAlgorithm"`
	Fields            Fields            `yaml:"fields"`
	Get               *Request          `yaml:"get"`
	Put               *Request          `yaml:"put"`
	Delete            *Request          `yaml:"delete"`
	Stat              *Stat             `yaml:"stat"`
	List              *List             `yaml:"list"`
}

// Request is one operation's request template.
type Request struct {
	// Method is the request's HTTP method (default GET for get, stat and
	// list, PUT for put, DELETE for delete).
	Method string `yaml:"method"`
	// URL is the request's URL after baseURL, starting with /, with
	// placeholders: {key}, {key.query} and {key.blob} for an object; for
	// list, {page}, {offset} or {cursor} (by paging) and {pageSize}.
	URL string `yaml:"url"`
	// Headers are sent with this request besides options.headers (name:
	// value); values may hold the URL's placeholders.
	Headers map[string]string `yaml:"headers"`
}

// Fields are the paths of an object's fields in an answer. Dataset is the id
// of the dataset the object belongs to: in the list's fields, it makes the
// store harvested as datasets (GroupsDatasets).
type Fields struct {
	// Key is the path of the object's key, what get, put and delete put in
	// {key}; required for list.
	Key string `yaml:"key"`
	// PID is the path of the object's DataONE identifier (instead of
	// options.pid).
	PID string `yaml:"pid"`
	// Dataset is the path of the id of the dataset the object belongs to;
	// in the list's fields it makes the store harvested as datasets.
	Dataset string `yaml:"dataset"`
	// Size is the path of the object's size, in bytes.
	Size string `yaml:"size"`
	// Checksum is the path of the object's checksum value.
	Checksum string `yaml:"checksum"`
	// ChecksumAlgorithm is the path of its algorithm (else
	// options.checksumAlgorithm).
	ChecksumAlgorithm string `yaml:"checksumAlgorithm"`
	// FormatID is the path of the object's DataONE format id.
	FormatID string `yaml:"formatId"`
	// RightsHolder is the path of the object's rights holder.
	RightsHolder string `yaml:"rightsHolder"`
	// FileName is the path of the object's file name (in a dataset, its path
	// in the package).
	FileName string `yaml:"fileName"`
	// Modified is the path of the date the object last changed.
	Modified string `yaml:"modified"`
	// Uploaded is the path of the date the object was first stored.
	Uploaded string `yaml:"uploaded"`
}

// Stat describes one object.
type Stat struct {
	Request `yaml:",inline"`
	// Item is the path of the object in the answer; the whole answer when
	// unset.
	Item string `yaml:"item"`
	// Fields, when set, are read from stat's answer instead of
	// options.fields.
	Fields *Fields `yaml:"fields"`
}

// List pages through the objects.
type List struct {
	Request `yaml:",inline"`
	// Items is the path of the item list in the answer (. for the whole
	// answer); required.
	Items string `yaml:"items"`
	// Paging is how the list goes on: none (default), page, offset, cursor
	// or nextURL.
	Paging string `yaml:"paging"`
	// PageSize is the number of items a page holds ({pageSize}); required
	// with paging page or offset, where a shorter page is the last.
	PageSize int `yaml:"pageSize"`
	// FirstPage is the number of the first page, for paging page (default
	// 1).
	FirstPage *int `yaml:"firstPage"`
	// Next is the path of the next page's token (paging cursor) or URL
	// (nextURL, on baseURL's host); empty or absent ends the list.
	Next string `yaml:"next"`
	// Since is a query parameter template with {since} (an RFC 3339 date)
	// appended when a harvest asks only for what changed.
	Since string `yaml:"since"`
	// Where keeps only the items whose value at each path is the one given
	// (path: value); other items are skipped.
	Where map[string]string `yaml:"where"`
	// Fields, when set, are read from the list's items instead of
	// options.fields.
	Fields *Fields `yaml:"fields"`
}

const (
	formatJSON = "json"
	formatXML  = "xml"
)

// Paging modes of list.
const (
	pagingNone    = "none"
	pagingPage    = "page"
	pagingOffset  = "offset"
	pagingCursor  = "cursor"
	pagingNextURL = "nextURL"
)

// Store is a legacy repository's API as a node.Blobs and node.Lister. It is
// safe for concurrent use.
type Store struct {
	c           *upstream.Client
	base        *url.URL // baseURL, without a trailing /
	format      string
	dateLayout  string
	headers     http.Header // sent with every request
	pid         template    // nil: the key
	checksumAlg string      // when the answer does not say
	get         *request
	put, del    *request // nil: refused
	stat        *statOp  // nil: refused
	list        *listOp  // nil: refused
	answerLimit int64    // maxAnswer
}

var (
	_ node.Blobs  = (*Store)(nil)
	_ node.Lister = (*Store)(nil)
)

// request is an operation's compiled request template.
type request struct {
	op      string // the option's name: the metrics' operation, and errors
	method  string
	url     template
	headers []header
}

type header struct {
	name  string
	value template
}

type statOp struct {
	request
	item     path // zero: the whole answer
	fields   *fieldSet
	readBody bool // false when every field is a header
}

type listOp struct {
	request
	items    path
	paging   string
	pageSize int
	first    int      // page paging: the first page's number
	next     path     // cursor, nextURL
	since    template // nil: the upstream cannot filter
	where    []condition
	fields   *fieldSet
}

// condition keeps the items whose field at p is want.
type condition struct {
	p    path
	want string
}

// New opens the store u describes, sending every request through c. It does
// not contact the upstream.
func New(u config.Upstream, c *upstream.Client) (*Store, error) {
	s, err := parse(u)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// GroupsDatasets tells whether u's options name each object's dataset in the
// list's fields: such a store is harvested as datasets (node.GroupRecords),
// not object by object. Options that do not decode group nothing
// (CheckOptions reports them).
func GroupsDatasets(u config.Upstream) bool {
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return false
	}
	return groupsDatasets(o)
}

// groupsDatasets: the list's own fields, or the shared ones when it has
// none, name dataset.
func groupsDatasets(o Options) bool {
	if o.List == nil {
		return false
	}
	if o.List.Fields != nil {
		return o.List.Fields.Dataset != ""
	}
	return o.Fields.Dataset != ""
}

// CheckOptions reports every problem of u's options and baseURL that New
// would fail on (templates, paths, headers...). It reads headerFiles.
func CheckOptions(u config.Upstream) error {
	_, err := parse(u)
	return err
}

// parse decodes u's options and compiles them into a store without its
// upstream client.
func parse(u config.Upstream) (*Store, error) {
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	s, err := compile(u, o)
	if err != nil {
		return nil, upstream.OptionProblems("http", u, err)
	}
	return s, nil
}

// compiler collects every problem of the options.
type compiler struct{ errs []error }

func (c *compiler) bad(opt, format string, a ...any) {
	c.errs = append(c.errs, fmt.Errorf("options.%s: %s", opt, fmt.Sprintf(format, a...)))
}

func compile(u config.Upstream, o Options) (*Store, error) {
	var c compiler
	base, err := url.Parse(u.BaseURL)
	switch {
	case err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "":
		c.errs = append(c.errs, fmt.Errorf("baseURL %q is not an http(s) URL", u.BaseURL))
	case base.RawQuery != "" || base.Fragment != "" || base.User != nil:
		c.errs = append(c.errs, fmt.Errorf("baseURL %q must have no query, fragment or credentials (use the url templates, and headerFiles for an Authorization header)", u.BaseURL))
	default:
		base.Path, base.RawPath = strings.TrimSuffix(base.Path, "/"), strings.TrimSuffix(base.RawPath, "/")
	}
	s := &Store{base: base, dateLayout: o.DateLayout, headers: http.Header{}, answerLimit: maxAnswer}

	switch o.Format {
	case "", formatJSON:
		s.format = formatJSON
	case formatXML:
		s.format = formatXML
	default:
		c.bad("format", "%q is not json or xml", o.Format)
	}
	if l := o.DateLayout; l != "" {
		ref := time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)
		if t, err := time.Parse(l, ref.Format(l)); err != nil || t.Year() != 2006 {
			c.bad("dateLayout", "%q is not a Go time layout with a year (such as 2006-01-02 15:04:05)", l)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.Headers)) {
		c.literalHeader(s.headers, "headers", name, o.Headers[name])
	}
	for _, name := range slices.Sorted(maps.Keys(o.HeaderFiles)) {
		b, err := os.ReadFile(o.HeaderFiles[name])
		if err != nil {
			c.bad("headerFiles."+name, "%v", err)
			continue
		}
		c.literalHeader(s.headers, "headerFiles", name, strings.TrimRight(string(b), "\r\n"))
	}
	if o.PID != "" {
		if o.Fields.PID != "" {
			c.bad("pid", "options.pid and options.fields.pid are both set; keep one")
		}
		if s.pid, err = parseTemplate(o.PID, []string{"key"}); err != nil {
			c.bad("pid", "%v", err)
		}
	}
	if o.ChecksumAlgorithm != "" {
		var ok bool
		if s.checksumAlg, ok = adapter.CanonicalAlgorithm(o.ChecksumAlgorithm); !ok {
			c.bad("checksumAlgorithm", "%q is not one of %s", o.ChecksumAlgorithm, strings.Join(adapter.ChecksumAlgorithms, ", "))
		}
	}

	if o.Get == nil {
		c.bad("get", "required: the request that reads an object's bytes")
	} else {
		s.get = c.request("get", *o.Get, http.MethodGet, keyPlaceholders)
	}
	if o.Put != nil {
		s.put = c.request("put", *o.Put, http.MethodPut, keyPlaceholders)
	}
	if o.Delete != nil {
		s.del = c.request("delete", *o.Delete, http.MethodDelete, keyPlaceholders)
	}
	fields := c.fields("fields", o.Fields, o)
	if o.Stat != nil {
		s.stat = c.statOp(*o.Stat, o, fields)
	}
	if o.List != nil {
		s.list = c.listOp(*o.List, o, fields)
	} else if u.Harvest.Interval > 0 {
		c.bad("list", "required when harvest.interval is set: harvesting pages through it")
	}
	if !groupsDatasets(o) && (o.Fields.Dataset != "" || o.Stat != nil && o.Stat.Fields != nil && o.Stat.Fields.Dataset != "") {
		c.bad("fields.dataset", "only the list's fields group objects into datasets: set list, and dataset in its fields")
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// literalHeader adds a header without placeholders to h.
func (c *compiler) literalHeader(h http.Header, opt, name, value string) {
	switch {
	case !httpguts.ValidHeaderFieldName(name):
		c.bad(opt, "%q is not a header name", name)
	case !httpguts.ValidHeaderFieldValue(value):
		c.bad(opt+"."+name, "the value has characters a header cannot carry")
	default:
		h.Set(name, value)
	}
}

// request compiles one operation's request, whose templates may use allowed.
func (c *compiler) request(opt string, r Request, method string, allowed []string) *request {
	out := &request{op: opt, method: method}
	if r.Method != "" {
		out.method = strings.ToUpper(r.Method)
		if !httpguts.ValidHeaderFieldName(out.method) { // a method is an HTTP token too
			c.bad(opt+".method", "%q is not an HTTP method", r.Method)
		}
	}
	var err error
	switch {
	case r.URL == "":
		c.bad(opt+".url", "required")
	case !strings.HasPrefix(r.URL, "/"):
		c.bad(opt+".url", "%q must start with / (it is appended to baseURL)", r.URL)
	default:
		if out.url, err = parseTemplate(r.URL, allowed); err != nil {
			c.bad(opt+".url", "%v", err)
		} else if _, err := url.Parse(out.url.expand(func(string) string { return "x" })); err != nil {
			c.bad(opt+".url", "%v", err)
		} else if err := out.url.misplaced(); err != nil {
			c.bad(opt+".url", "%q: %v", r.URL, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		t, err := parseTemplate(r.Headers[name], allowed)
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			c.bad(opt+".headers", "%q is not a header name", name)
		case err != nil:
			c.bad(opt+".headers."+name, "%v", err)
		default:
			out.headers = append(out.headers, header{http.CanonicalHeaderKey(name), t})
		}
	}
	return out
}

// statOp compiles stat, whose fields are its own or the shared ones.
func (c *compiler) statOp(o Stat, all Options, shared *fieldSet) *statOp {
	op := &statOp{request: *c.request("stat", o.Request, http.MethodGet, keyPlaceholders), fields: shared}
	if o.Item != "" {
		op.item = c.path("stat.item", o.Item, false)
	}
	if o.Fields != nil {
		op.fields = c.fields("stat.fields", *o.Fields, all)
	}
	op.readBody = op.item.raw != ""
	for i, p := range op.fields.paths {
		if p.raw == "" || p.header != "" {
			continue
		}
		op.readBody = true
		if op.method == http.MethodHead {
			c.bad(op.fields.opt+"."+fieldNames[i], "%q: a HEAD answer has no body; read a header (header:Name)", p.raw)
		}
	}
	return op
}

// listOp compiles list, whose fields are its own or the shared ones.
func (c *compiler) listOp(o List, all Options, shared *fieldSet) *listOp {
	op := &listOp{paging: o.Paging, pageSize: o.PageSize, first: 1}
	if op.paging == "" {
		op.paging = pagingNone
	}
	allowed := []string{"pageSize"}
	own := "" // the placeholder that moves through the pages
	switch op.paging {
	case pagingNone, pagingNextURL:
	case pagingPage, pagingOffset, pagingCursor:
		own = op.paging
		allowed = append(allowed, own)
	default:
		c.bad("list.paging", "%q is not none, page, offset, cursor or nextURL", o.Paging)
	}
	op.request = *c.request("list", o.Request, http.MethodGet, allowed)
	if own != "" && op.url != nil && !op.url.uses(own) {
		c.bad("list.url", "paging %s needs {%s} in the URL", op.paging, own)
	}
	switch {
	case o.PageSize < 0:
		c.bad("list.pageSize", "must not be negative, got %d", o.PageSize)
	case o.PageSize == 0 && (op.paging == pagingPage || op.paging == pagingOffset):
		c.bad("list.pageSize", "required with paging %s: a shorter page is the last", op.paging)
	case o.PageSize == 0 && op.url.uses("pageSize"):
		c.bad("list.pageSize", "required: the URL has {pageSize}")
	}
	if o.FirstPage != nil {
		if op.paging != pagingPage {
			c.bad("list.firstPage", "only for paging page")
		}
		op.first = *o.FirstPage
	}
	if o.Items == "" {
		c.bad("list.items", "required: the path of the item list in the answer (. for the whole answer)")
	} else {
		op.items = c.path("list.items", o.Items, false)
	}
	switch {
	case o.Next != "" && op.paging != pagingCursor && op.paging != pagingNextURL:
		c.bad("list.next", "only for paging cursor or nextURL")
	case o.Next == "" && (op.paging == pagingCursor || op.paging == pagingNextURL):
		c.bad("list.next", "required with paging %s: the path of the next page's %s", op.paging,
			map[string]string{pagingCursor: "token", pagingNextURL: "URL"}[op.paging])
	case o.Next != "":
		op.next = c.path("list.next", o.Next, true)
	}
	if o.Since != "" {
		t, err := parseTemplate(o.Since, []string{"since"})
		switch {
		case err != nil:
			c.bad("list.since", "%v", err)
		case !t.uses("since"):
			c.bad("list.since", "%q has no {since}", o.Since)
		default:
			op.since = t
		}
	}
	for _, p := range slices.Sorted(maps.Keys(o.Where)) {
		op.where = append(op.where, condition{c.path("list.where", p, false), o.Where[p]})
	}
	op.fields = shared
	if o.Fields != nil {
		op.fields = c.fields("list.fields", *o.Fields, all)
	}
	for i, p := range op.fields.paths {
		if p.header != "" {
			c.bad(op.fields.opt+"."+fieldNames[i], "%q: a list item has no headers of its own", p.raw)
		}
	}
	if op.fields.paths[fieldKey].raw == "" {
		c.bad(op.fields.opt+".key", "required for list: the path of each item's key (what get reads)")
	}
	return op
}

// path compiles one path; header paths only where the answer's headers mean
// something.
func (c *compiler) path(opt, s string, headerOK bool) path {
	p, err := parsePath(s)
	switch {
	case err != nil:
		c.bad(opt, "%v", err)
	case p.header != "" && !headerOK:
		c.bad(opt, "%q: a list item has no headers of its own", s)
	}
	return p
}

// The fields of a Found, by index into fieldSet.paths.
const (
	fieldKey = iota
	fieldPID
	fieldDataset // read early: an object whose other fields fail still names its dataset
	fieldSize
	fieldChecksum
	fieldChecksumAlgorithm
	fieldFormatID
	fieldRightsHolder
	fieldFileName
	fieldModified
	fieldUploaded
	numFields
)

var fieldNames = [numFields]string{"key", "pid", "dataset", "size", "checksum", "checksumAlgorithm",
	"formatId", "rightsHolder", "fileName", "modified", "uploaded"}

// fieldSet is where an answer keeps each field; a zero path is not given.
type fieldSet struct {
	opt   string // the option: fields, stat.fields or list.fields
	paths [numFields]path
}

func (c *compiler) fields(opt string, f Fields, all Options) *fieldSet {
	fs := &fieldSet{opt: opt}
	raw := [numFields]string{f.Key, f.PID, f.Dataset, f.Size, f.Checksum, f.ChecksumAlgorithm,
		f.FormatID, f.RightsHolder, f.FileName, f.Modified, f.Uploaded}
	for i, s := range raw {
		if s != "" {
			fs.paths[i] = c.path(opt+"."+fieldNames[i], s, true)
		}
	}
	if f.Checksum != "" && f.ChecksumAlgorithm == "" && all.ChecksumAlgorithm == "" {
		c.bad(opt+".checksum", "needs its algorithm: options.checksumAlgorithm, or %s.checksumAlgorithm", opt)
	}
	if f.PID != "" && all.PID != "" && opt != "fields" {
		c.bad(opt+".pid", "options.pid is set too; keep one")
	}
	return fs
}
