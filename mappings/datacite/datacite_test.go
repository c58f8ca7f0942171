package datacite

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/datacite/datacitetest"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

const (
	testRepo     = "EXAMPLE.D1BRIDGE"
	testPassword = "s3cret"
	testPrefix   = "10.5072"
	testMNBase   = "https://repo.example.org/d1/mn"
)

// upstreamConfig is a datacite upstream named "doi" at baseURL with options
// (YAML), with short timeouts.
func upstreamConfig(t testing.TB, baseURL, options string) config.Upstream {
	t.Helper()
	u := config.Upstream{Name: "doi", Type: config.UpstreamDataCite, BaseURL: baseURL,
		DialTimeout: time.Second, HeaderTimeout: 2 * time.Second, Timeout: 500 * time.Millisecond,
		Retry:   config.Retry{Max: 2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		Breaker: config.Breaker{Failures: 3, OpenFor: 300 * time.Millisecond}}
	if options != "" {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(options), &doc); err != nil {
			t.Fatal(err)
		}
		u.Options = *doc.Content[0]
	}
	return u
}

// defaultOptions are the options of the test repository, plus extra lines.
func defaultOptions(extra ...string) string {
	return strings.Join(append([]string{"prefix: " + testPrefix, "shoulder: d1b.", "username: " + testRepo,
		"password: " + testPassword, "publisher: Example Repository"}, extra...), "\n")
}

func open(t testing.TB, u config.Upstream, m *metrics.Metrics) *Service {
	t.Helper()
	c := upstream.New(u, m)
	t.Cleanup(c.Close)
	s, err := New(u, c, testMNBase, "d1bridge test node")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start is a fake DataCite and a service over it.
func start(t testing.TB, extra ...string) (*datacitetest.Server, *Service) {
	t.Helper()
	f := datacitetest.Start(t, testRepo, testPassword, testPrefix)
	return f, open(t, upstreamConfig(t, f.URL, defaultOptions(extra...)), nil)
}

func wantFailure(t *testing.T, err error, desc ...string) {
	t.Helper()
	e := adapter.AsException(err)
	if err == nil || e.Kind != adapter.ServiceFailure {
		t.Fatalf("got %v, want a ServiceFailure", err)
	}
	for _, d := range desc {
		if !strings.Contains(e.Description, d) {
			t.Errorf("description %q does not say %q", e.Description, d)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte(testPassword+"\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tc := range []struct {
		name, options, err string
		check              func(t *testing.T, s *Service)
	}{
		{name: "defaults", options: "prefix: 10.5072\nusername: R\npassword: p", check: func(t *testing.T, s *Service) {
			if !s.AutoPublish() || s.publisher != "d1bridge test node" || s.landing != testMNBase+"/v2/object/{pid}" || s.shoulder != "" {
				t.Errorf("defaults: autoPublish %v, publisher %q, landing %q, shoulder %q", s.AutoPublish(), s.publisher, s.landing, s.shoulder)
			}
		}},
		{name: "everything", options: defaultOptions("autoPublish: false", "landingPage: https://search.example.org/view/{pid}"),
			check: func(t *testing.T, s *Service) {
				if s.AutoPublish() || s.publisher != "Example Repository" || s.landingPage("doi:10.5072/a") != "https://search.example.org/view/doi:10.5072%2Fa" {
					t.Errorf("autoPublish %v, publisher %q, landing page %q", s.AutoPublish(), s.publisher, s.landingPage("doi:10.5072/a"))
				}
			}},
		{name: "password file", options: "prefix: 10.5072\nusername: R\npasswordFile: " + pw, check: func(t *testing.T, s *Service) {
			if s.pass != testPassword {
				t.Errorf("password %q", s.pass)
			}
		}},
		{name: "unknown option", options: defaultOptions("bucket: x"), err: "field bucket not found"},
		{name: "no prefix", options: "username: R\npassword: p", err: `options.prefix "" is not a DOI prefix`},
		{name: "bad prefix", options: "prefix: 11.5072\nusername: R\npassword: p", err: "is not a DOI prefix"},
		{name: "bad shoulder", options: "prefix: 10.5072\nshoulder: a b\nusername: R\npassword: p", err: "options.shoulder"},
		{name: "dot segment in shoulder", options: "prefix: 10.5072\nshoulder: a/../b\nusername: R\npassword: p", err: `has a "." or ".." segment`},
		{name: "upper-case shoulder", options: "prefix: 10.5072\nshoulder: FK2.\nusername: R\npassword: p", check: func(t *testing.T, s *Service) {
			if s.shoulder != "fk2." || !s.Owns("doi:10.5072/fk2.abcd-efgh") {
				t.Errorf("shoulder %q: DOIs are written in lower case", s.shoulder)
			}
		}},
		{name: "no username", options: "prefix: 10.5072\npassword: p", err: "options.username"},
		{name: "no password", options: "prefix: 10.5072\nusername: R", err: "options.password or options.passwordFile is required"},
		{name: "both passwords", options: "prefix: 10.5072\nusername: R\npassword: p\npasswordFile: " + pw, err: "keep one"},
		{name: "missing password file", options: "prefix: 10.5072\nusername: R\npasswordFile: /nonexistent/pw", err: "options.passwordFile"},
		{name: "empty password file", options: "prefix: 10.5072\nusername: R\npasswordFile: " + empty, err: "options.passwordFile " + empty + " is empty"},
		{name: "every problem at once", options: "shoulder: a b",
			err: `datacite: upstream "doi": options.prefix "" is not a DOI prefix such as 10.5072` + "\n" +
				`datacite: upstream "doi": options.shoulder "a b" may hold at most 64 of A-Z a-z 0-9 . _ - / (no leading or double /)` + "\n" +
				`datacite: upstream "doi": options.username (the DataCite repository id) is required` + "\n" +
				`datacite: upstream "doi": options.password or options.passwordFile is required`},
		{name: "landing page without pid", options: defaultOptions("landingPage: https://x.example.org/"), err: "has no {pid}"},
		{name: "relative landing page", options: defaultOptions("landingPage: /view/{pid}"), err: "not an absolute http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := upstreamConfig(t, "https://api.test.datacite.org", tc.options)
			s, err := New(u, upstream.New(u, nil), testMNBase, "d1bridge test node")
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want an error saying %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.check != nil:
				tc.check(t, s)
			}
		})
	}
}

func TestOwns(t *testing.T) {
	t.Parallel()
	_, s := start(t)
	for id, want := range map[string]bool{
		"doi:10.5072/d1b.abcd-1234": true,
		"doi:10.5072/d1b.a/b-c":     true,
		// One spelling per DOI: DataCite compares without case, PIDs exactly.
		"DOI:10.5072/D1B.ABCD-1234": false,
		"DOI:10.5072/d1b.abcd-1234": false,
		"doi:10.5072/d1b.ABCD-1234": false,
		// No segment that a cleaned path would climb out of /dois/ with.
		"doi:10.5072/d1b./../x": false,
		"doi:10.5072/d1b.x/./y": false,
		"doi:10.5072/d1b.x//y":  false,
		"doi:10.5072/d1b.x/":    false,
		"doi:10.5072/d1b.":      false, // the shoulder alone
		"doi:10.5072/other":     false,
		"doi:10.9999/d1b.abcd":  false,
		"10.5072/d1b.abcd":      false,
		"urn:uuid:1234":         false,
	} {
		if got := s.Owns(id); got != want {
			t.Errorf("Owns(%q) = %v, want %v", id, got, want)
		}
	}
}

// sysmeta is the system metadata of a small data object.
func sysmeta(pid string) *adapter.SystemMetadata {
	up := adapter.NewTime(time.Date(2024, 5, 17, 10, 0, 0, 0, time.UTC))
	return &adapter.SystemMetadata{Identifier: pid, FormatID: "text/csv", Size: 42,
		Checksum:     adapter.Checksum{Algorithm: "SHA-256", Value: "00"},
		RightsHolder: "CN=Jane Doe A123,O=Example U,C=US,DC=cilogon,DC=org", SeriesID: "urn:series:1",
		Obsoletes: "urn:uuid:old", DateUploaded: up, DateSysMetadataModified: up, FileName: "table.csv"}
}

// TestLifecycle: mint a draft, register its metadata, publish it; the fake
// holds what was sent, and every call carried the credentials.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test")
	f := datacitetest.Start(t, testRepo, testPassword, testPrefix)
	s := open(t, upstreamConfig(t, f.URL, defaultOptions()), m)
	ctx := t.Context()

	doi, err := s.Mint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doi, "doi:10.5072/d1b.") || len(doi) != len("doi:10.5072/d1b.")+9 || !s.Owns(doi) {
		t.Fatalf("minted %q", doi)
	}
	d, ok := f.DOI(doi)
	if !ok || d.State != datacitetest.Draft || len(d.Attributes) != 0 {
		t.Fatalf("after Mint the fake holds %+v (%v)", d, ok)
	}

	sm := sysmeta(doi)
	if err := s.Register(ctx, doi, node.IDMetadata{Meta: sm}, false); err != nil {
		t.Fatal(err)
	}
	d, _ = f.DOI(doi)
	if d.State != datacitetest.Draft {
		t.Errorf("state %s after registering metadata, want draft", d.State)
	}
	landing := testMNBase + "/v2/object/doi:10.5072%2F" + strings.TrimPrefix(doi, "doi:10.5072/")
	for path, want := range map[string]string{
		"url":                                        landing,
		"creators.0.name":                            "Jane Doe A123",
		"titles.0.title":                             "table.csv",
		"publisher":                                  "Example Repository",
		"publicationYear":                            "2024",
		"types.resourceTypeGeneral":                  "Dataset",
		"types.resourceType":                         "Data",
		"identifiers.0.identifier":                   "https://doi.org/" + strings.TrimPrefix(doi, "doi:"),
		"identifiers.0.identifierType":               "DOI",
		"identifiers.1.identifier":                   "urn:series:1",
		"formats.0":                                  "text/csv",
		"sizes.0":                                    "42 bytes",
		"dates.0.date":                               "2024-05-17",
		"dates.0.dateType":                           "Issued",
		"relatedIdentifiers.0.relationType":          "IsNewVersionOf",
		"relatedIdentifiers.0.relatedIdentifier":     testMNBase + "/v2/object/urn:uuid:old",
		"relatedIdentifiers.0.relatedIdentifierType": "URL",
	} {
		if got := d.String(path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}

	// A science metadata title wins over the file name; publishing makes it findable.
	if err := s.Register(ctx, doi, node.IDMetadata{Meta: sm, Title: "Soil cores of the North Slope"}, true); err != nil {
		t.Fatal(err)
	}
	d, _ = f.DOI(doi)
	if d.State != datacitetest.Findable || d.String("titles.0.title") != "Soil cores of the North Slope" {
		t.Errorf("after publishing: state %s, title %q", d.State, d.String("titles.0.title"))
	}
	// Updating a findable DOI keeps it findable.
	sm.ObsoletedBy = "doi:10.5072/d1b.next"
	if err := s.Register(ctx, doi, node.IDMetadata{Meta: sm}, false); err != nil {
		t.Fatal(err)
	}
	d, _ = f.DOI(doi)
	if d.State != datacitetest.Findable || d.String("relatedIdentifiers.1.relatedIdentifier") != "10.5072/d1b.next" ||
		d.String("relatedIdentifiers.1.relatedIdentifierType") != "DOI" || d.String("relatedIdentifiers.1.relationType") != "IsPreviousVersionOf" {
		t.Errorf("after an update: state %s, related %v", d.State, d.Get("relatedIdentifiers"))
	}
	// A findable DOI cannot be discarded.
	wantFailure(t, s.Discard(ctx, doi), "HTTP 405")

	var events []string
	for _, r := range f.Requests() {
		events = append(events, r.Method+" "+r.Event)
	}
	if got := strings.Join(events, ","); got != "POST ,PUT ,PUT publish,PUT ,DELETE " {
		t.Errorf("requests %s", got)
	}
	if n := upstreamCalls(t, reg, "DataCite.updateDOI", "ok"); n != 3 {
		t.Errorf("DataCite.updateDOI ok calls counted: %v, want 3", n)
	}
}

// upstreamCalls is d1bridge_upstream_requests_total of upstream doi for op
// and outcome.
func upstreamCalls(t *testing.T, reg *prometheus.Registry, op, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "d1bridge_upstream_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["upstream"] == "doi" && l["operation"] == op && l["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestDiscard(t *testing.T) {
	t.Parallel()
	f, s := start(t)
	doi, err := s.Mint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(t.Context(), doi); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.DOI(doi); ok {
		t.Error("the draft is still there")
	}
	if err := s.Discard(t.Context(), doi); err != nil {
		t.Errorf("discarding it again: %v", err)
	}
	if err := s.Discard(t.Context(), "urn:uuid:x"); err != nil {
		t.Errorf("discarding a non-DOI: %v", err)
	}
}

// TestMintRetriesTakenSuffix: a suffix DataCite already holds is drawn again;
// after mintAttempts refusals Mint fails.
func TestMintRetriesTakenSuffix(t *testing.T) {
	t.Parallel()
	f, s := start(t)
	var posts atomic.Int32
	taken := func(limit int32) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost || posts.Add(1) > limit {
				return false
			}
			w.Header().Set("Content-Type", jsonAPI)
			w.WriteHeader(http.StatusUnprocessableEntity)
			w.Write([]byte(`{"errors":[{"source":"doi","uid":"10.5072/x","title":"This DOI has already been taken"}]}`))
			return true
		}
	}
	f.Fault(taken(2))
	doi, err := s.Mint(t.Context())
	if err != nil || posts.Load() != 3 {
		t.Fatalf("Mint after two taken suffixes: %q %v (%d POSTs)", doi, err, posts.Load())
	}
	posts.Store(0)
	f.Fault(taken(100))
	_, err = s.Mint(t.Context())
	wantFailure(t, err, `DataCite (upstream "doi") refused minting a DOI (HTTP 422): doi: This DOI has already been taken`)
	if posts.Load() != mintAttempts {
		t.Errorf("%d POSTs, want %d", posts.Load(), mintAttempts)
	}
}

// TestRefusals: what DataCite refuses is a ServiceFailure naming it and
// quoting its errors.
func TestRefusals(t *testing.T) {
	t.Parallel()
	f := datacitetest.Start(t, testRepo, testPassword, testPrefix)
	t.Run("credentials", func(t *testing.T) {
		s := open(t, upstreamConfig(t, f.URL, strings.Replace(defaultOptions(), "password: "+testPassword, "password: wrong", 1)), nil)
		_, err := s.Mint(t.Context())
		wantFailure(t, err, `DataCite (upstream "doi") refused the repository's credentials (HTTP 401)`, "Bad credentials.")
	})
	t.Run("prefix not held", func(t *testing.T) {
		s := open(t, upstreamConfig(t, f.URL, strings.Replace(defaultOptions(), "prefix: 10.5072", "prefix: 10.9999", 1)), nil)
		_, err := s.Mint(t.Context())
		wantFailure(t, err, "HTTP 403; does the repository hold prefix 10.9999?")
	})
	t.Run("invalid metadata", func(t *testing.T) {
		s := open(t, upstreamConfig(t, f.URL, defaultOptions()), nil)
		doi, err := s.Mint(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sm := sysmeta(doi)
		sm.RightsHolder = " "
		err = s.Register(t.Context(), doi, node.IDMetadata{Meta: sm}, true)
		wantFailure(t, err, "refused publishing "+doi+" (HTTP 422)", "Creator 1 has no name")
		if e := adapter.AsException(err); e.PID != doi {
			t.Errorf("exception pid %q", e.PID)
		}
		if d, _ := f.DOI(doi); d.State != datacitetest.Draft {
			t.Errorf("state %s after a refused publish", d.State)
		}
	})
	t.Run("not a DOI of the prefix", func(t *testing.T) {
		s := open(t, upstreamConfig(t, f.URL, defaultOptions()), nil)
		wantFailure(t, s.Register(t.Context(), "urn:uuid:x", node.IDMetadata{Meta: sysmeta("urn:uuid:x")}, false), "is not a DOI of DataCite prefix 10.5072")
	})
}

// TestFaults: DataCite failing, hanging or gone is a ServiceFailure naming
// it, within the upstream's timeout; the breaker then answers at once.
func TestFaults(t *testing.T) {
	t.Parallel()
	t.Run("500", func(t *testing.T) {
		f, s := start(t)
		f.Fault(func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
			return true
		})
		_, err := s.Mint(t.Context())
		wantFailure(t, err, `DataCite (upstream "doi") failed (HTTP 500) when minting a DOI: Internal Server Error`)
	})
	t.Run("timeout", func(t *testing.T) {
		f, s := start(t)
		f.Fault(func(w http.ResponseWriter, r *http.Request) bool {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return true
		})
		start := time.Now()
		err := s.Register(t.Context(), "doi:10.5072/d1b.x", node.IDMetadata{Meta: sysmeta("doi:10.5072/d1b.x")}, true)
		wantFailure(t, err, `DataCite: upstream "doi" did not answer in time (publishing doi:10.5072/d1b.x)`)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("took %v with a timeout of 500ms", took)
		}
	})
	t.Run("unreachable then breaker", func(t *testing.T) {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := l.Addr().String()
		l.Close()
		s := open(t, upstreamConfig(t, "http://"+addr, defaultOptions()), nil)
		for range 3 {
			_, err := s.Mint(t.Context())
			wantFailure(t, err, `DataCite: upstream "doi" is unreachable (minting a DOI)`)
		}
		_, err := s.Mint(t.Context())
		wantFailure(t, err, `DataCite: upstream "doi" is unavailable`)
	})
}

func TestCreatorOf(t *testing.T) {
	t.Parallel()
	for rh, want := range map[string]creator{
		"CN=Jane Doe A123,O=Example U,C=US,DC=cilogon,DC=org": {Name: "Jane Doe A123"},
		"O=Example,CN=Smith\\, John":                          {Name: "Smith, John"},
		"uid=jdoe,o=NCEAS,dc=ecoinformatics,dc=org":           {Name: "uid=jdoe,o=NCEAS,dc=ecoinformatics,dc=org"},
		"http://orcid.org/0000-0002-1825-0097": {Name: "0000-0002-1825-0097", NameType: "Personal",
			NameIdentifiers: []nameIdentifier{{NameIdentifier: "https://orcid.org/0000-0002-1825-0097", NameIdentifierScheme: "ORCID", SchemeURI: "https://orcid.org"}}},
		"someone": {Name: "someone"},
	} {
		got := creatorOf(rh)
		if got.Name != want.Name || got.NameType != want.NameType || len(got.NameIdentifiers) != len(want.NameIdentifiers) ||
			(len(want.NameIdentifiers) == 1 && got.NameIdentifiers[0] != want.NameIdentifiers[0]) {
			t.Errorf("creatorOf(%q) = %+v, want %+v", rh, got, want)
		}
	}
}

func TestTypesOf(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]types{
		"text/csv": {ResourceTypeGeneral: "Dataset", ResourceType: "Data"},
		"https://eml.ecoinformatics.org/eml-2.2.0": {ResourceTypeGeneral: "Dataset", ResourceType: "Metadata"},
		"http://www.openarchives.org/ore/terms":    {ResourceTypeGeneral: "Collection", ResourceType: "Resource map"},
		"application/x-not-a-dataone-format":       {ResourceTypeGeneral: "Dataset"},
	} {
		if got := *typesOf(id); got != want {
			t.Errorf("typesOf(%q) = %+v, want %+v", id, got, want)
		}
	}
}

// TestExampleOptions: the options of config/examples/datacite.yaml are all
// known, and make a service once the password file exists.
func TestExampleOptions(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../../config/examples/datacite.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	u := upstreamConfig(t, "https://api.datacite.org", "")
	for _, up := range cfg.Upstreams {
		if up.Name == cfg.Identifiers {
			u = up
		}
	}
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("pw\n"), 0o600)
	for i := 0; i+1 < len(u.Options.Content); i += 2 {
		if u.Options.Content[i].Value == "passwordFile" {
			u.Options.Content[i+1].Value = pw
		}
	}
	s, err := New(u, upstream.New(u, nil), cfg.BaseURL()+"/mn", cfg.Node.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Owns("doi:10.12345/exrepo.abcd-efgh") || s.landingPage("x") != "https://search.example.org/view/x" {
		t.Errorf("the example's service: owned %q, landing %q", s.owned, s.landing)
	}
}
