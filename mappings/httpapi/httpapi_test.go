package httpapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// TestOptions: good options open; each bad one fails at New with a message
// that names the option.
func TestOptions(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("Bearer x\r\n"), 0o600)
	const get = `get: {url: "/o/{key}"}` + "\n"
	for _, tc := range []struct {
		name, baseURL, options, wantErr string
	}{
		{"get only", "http://h/api/", get, ""},
		{"everything", "https://h", jsonOptions + `headers: {X-A: b}
headerFiles: {Authorization: ` + tokenFile + `}
list: {url: "/r?page={page}&n={pageSize}", paging: page, pageSize: 10, firstPage: 0, items: records,
  since: "since={since}", where: {kind: file}}`, ""},
		{"xml", "http://h", xmlOptions + `list: {url: "/x?t={cursor}", paging: cursor, next: token, items: a.b}`, ""},
		{"no options", "http://h", "", `http: upstream "legacy": options.get: required`},
		{"unknown option", "http://h", get + "lsit: {}", "field lsit not found"},
		{"unknown placeholder", "http://h", `get: {url: "/o/{kye}"}`,
			`options.get.url: unknown placeholder {kye}; this template can use {key}, {key.query}, {key.blob}`},
		{"key in a query", "http://h", `get: {url: "/o?id={key}"}`,
			`options.get.url: "/o?id={key}": {key} is escaped for a path, not for the query: use {key.query} after the ?`},
		{"blob key in a query", "http://h", get + `put: {url: "/o?f={key.blob}"}`, `options.put.url: "/o?f={key.blob}": {key.blob} is escaped for a path`},
		{"query key in a path", "http://h", get + `delete: {url: "/o/{key.query}"}`,
			`options.delete.url: "/o/{key.query}": {key.query} is escaped for a query, not for the path: use {key} before the ?`},
		{"unclosed placeholder", "http://h", `get: {url: "/o/{key"}`, `options.get.url: "/o/{key" has a { without its }`},
		{"relative url", "http://h", `get: {url: "o/{key}"}`, `options.get.url: "o/{key}" must start with /`},
		{"no url", "http://h", `get: {method: GET}`, "options.get.url: required"},
		{"bad method", "http://h", `get: {url: "/{key}", method: "GE T"}`, `options.get.method: "GE T" is not an HTTP method`},
		{"bad header name", "http://h", get + `put: {url: "/{key}", headers: {"a b": c}}`, `options.put.headers: "a b" is not a header name`},
		{"header file missing", "http://h", get + `headerFiles: {Authorization: /nonexistent}`, "options.headerFiles.Authorization: open /nonexistent"},
		{"format", "http://h", get + "format: yaml", `options.format: "yaml" is not json or xml`},
		{"date layout", "http://h", get + "dateLayout: dd.mm.yyyy", `options.dateLayout: "dd.mm.yyyy" is not a Go time layout`},
		{"checksum algorithm", "http://h", get + "checksumAlgorithm: CRC32", `options.checksumAlgorithm: "CRC32" is not one of MD5`},
		{"checksum without algorithm", "http://h", get + "fields: {key: id, checksum: md5}",
			"options.fields.checksum: needs its algorithm: options.checksumAlgorithm, or fields.checksumAlgorithm"},
		{"two pids", "http://h", get + "pid: 'x:{key}'\nfields: {pid: doi}", "options.pid: options.pid and options.fields.pid are both set"},
		{"pid placeholder", "http://h", get + "pid: 'x:{cursor}'", `options.pid: unknown placeholder {cursor}; this template can use {key}`},
		{"empty path segment", "http://h", get + "fields: {key: a..b}", `options.fields.key: "a..b" has an empty segment`},
		{"attribute midway", "http://h", get + "fields: {key: a.@b.c}", `options.fields.key: "a.@b.c": an attribute (@b) can only be the last segment`},
		{"list without items", "http://h", get + `list: {url: /r, fields: {key: id}}`, `http: upstream "legacy": options.list.items: required`},
		{"list without key", "http://h", get + `list: {url: /r, items: .}`, "options.fields.key: required for list"},
		{"list header field", "http://h", get + `list: {url: /r, items: ., fields: {key: "header:X-Id"}}`,
			`options.list.fields.key: "header:X-Id": a list item has no headers of its own`},
		{"paging", "http://h", get + `list: {url: /r, items: ., paging: pages, fields: {key: id}}`, `options.list.paging: "pages" is not none, page, offset, cursor or nextURL`},
		{"page without placeholder", "http://h", get + `list: {url: /r, items: ., paging: page, pageSize: 5, fields: {key: id}}`,
			"options.list.url: paging page needs {page} in the URL"},
		{"page without size", "http://h", get + `list: {url: "/r?p={page}", items: ., paging: page, fields: {key: id}}`,
			"options.list.pageSize: required with paging page"},
		{"placeholder of another paging", "http://h", get + `list: {url: "/r?p={offset}", items: ., paging: page, pageSize: 5, fields: {key: id}}`,
			"options.list.url: unknown placeholder {offset}; this template can use {pageSize}, {page}"},
		{"cursor without next", "http://h", get + `list: {url: "/r?c={cursor}", items: ., paging: cursor, fields: {key: id}}`,
			"options.list.next: required with paging cursor: the path of the next page's token"},
		{"next without cursor", "http://h", get + `list: {url: "/r", items: ., next: n, fields: {key: id}}`,
			"options.list.next: only for paging cursor or nextURL"},
		{"since without placeholder", "http://h", get + `list: {url: "/r", items: ., since: "from=today", fields: {key: id}}`,
			`options.list.since: "from=today" has no {since}`},
		{"firstPage without page", "http://h", get + `list: {url: "/r", items: ., firstPage: 0, fields: {key: id}}`,
			"options.list.firstPage: only for paging page"},
		{"head stat reading a body", "http://h", get + `stat: {method: HEAD, url: "/{key}", fields: {size: size}}`,
			`options.stat.fields.size: "size": a HEAD answer has no body; read a header (header:Name)`},
		{"not http", "ftp://h", get, `baseURL "ftp://h" is not an http(s) URL`},
		{"query in base", "http://h/?a=1", get, "must have no query, fragment or credentials"},
		{"credentials in base", "http://u:p@h/", get, "must have no query, fragment or credentials"},
		{"every problem at once, each naming the upstream", "ftp://h", "format: csv\nlist: {url: r}",
			`http: upstream "legacy": baseURL "ftp://h" is not an http(s) URL` + "\n" +
				`http: upstream "legacy": options.format: "csv" is not json or xml` + "\n" +
				`http: upstream "legacy": options.get: required: the request that reads an object's bytes` + "\n" +
				`http: upstream "legacy": options.list.url: "r" must start with /`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := mappingtest.CheckNew(t, upstreamConfig(t, tc.baseURL, tc.options), New, tc.wantErr)
			if tc.name == "everything" && (s.headers.Get("Authorization") != "Bearer x" || s.list.first != 0) {
				t.Errorf("header %q, first page %d", s.headers.Get("Authorization"), s.list.first)
			}
		})
	}
}

// TestHarvestNeedsList: an upstream that is harvested must say how to list it.
func TestHarvestNeedsList(t *testing.T) {
	t.Parallel()
	u := upstreamConfig(t, "http://h", `get: {url: "/{key}"}`)
	u.Harvest.Interval = time.Hour
	_, err := New(u, upstream.New(u, nil))
	if err == nil || !strings.Contains(err.Error(), `http: upstream "legacy": options.list: required when harvest.interval is set`) {
		t.Errorf("New: %v", err)
	}
}

// TestPlaceholders: how each placeholder escapes its value into a URL.
func TestPlaceholders(t *testing.T) {
	t.Parallel()
	u := upstreamConfig(t, "http://h/base/", `
get: {url: "/p/{key}?q={key.query}"}
put: {url: "/b/{key.blob}"}
list: {url: "/l?c={cursor}&n={pageSize}", paging: cursor, pageSize: 7, next: n, items: ., fields: {key: .}, since: "s={since}"}`)
	s := open(t, u, nil)
	for _, tc := range []struct {
		op   *request
		v    vars
		want string
	}{
		{s.get, vars{key: "a/b c?d#e%f+g"}, "http://h/base/p/a%2Fb%20c%3Fd%23e%25f+g?q=a%2Fb+c%3Fd%23e%25f%2Bg"},
		{s.get, vars{key: "ünï/日本"}, "http://h/base/p/%C3%BCn%C3%AF%2F%E6%97%A5%E6%9C%AC?q=%C3%BCn%C3%AF%2F%E6%97%A5%E6%9C%AC"},
		{s.put, vars{key: "plain-name.csv"}, "http://h/base/b/" + upstream.BlobName("plain-name.csv")},
		{s.put, vars{key: "../../etc/passwd"}, "http://h/base/b/" + upstream.BlobName("../../etc/passwd")},
		{&s.list.request, vars{cursor: "a b&c=d", pageSize: 7}, "http://h/base/l?c=a+b%26c%3Dd&n=7"},
	} {
		req, err := s.newRequest(t.Context(), tc.op, tc.v, "")
		if err != nil || req.URL.String() != tc.want {
			t.Errorf("%s %q: %v, %v\nwant %s", tc.op.op, tc.v.key, req.URL, err, tc.want)
		}
	}
	if !strings.HasPrefix(upstream.BlobName("../../etc/passwd")[6:], "~") {
		t.Error("an unsafe key's blob name is not its digest")
	}
	since := time.Date(2024, 5, 6, 9, 8, 7, 0, time.FixedZone("CEST", 2*3600))
	if got := s.list.since.expand(vars{since: since}.escaped); got != "s=2024-05-06T07%3A08%3A07Z" {
		t.Errorf("since: %s", got)
	}
	for _, key := range []string{"", ".", ".."} {
		if _, err := s.newRequest(t.Context(), s.get, vars{key: key}, ""); err == nil {
			t.Errorf("key %q made a request", key)
		}
	}
}
