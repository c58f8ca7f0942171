package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/cmd/d1bridge/internal/backup"
	"github.com/d1bridge/d1bridge/cmd/d1bridge/internal/d1client"
	"github.com/d1bridge/d1bridge/cmd/d1bridge/internal/importer"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/s3"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/mattn/go-isatty"
	"github.com/prometheus/client_golang/prometheus"
)

// importCmd is `d1bridge import`: it creates the objects of its sources on a
// running member node through the node's own create operation (MNStorage.
// create over HTTP), so that each object is checked (identifier, system
// metadata, format, checksum, size) and logged exactly as any client's
// create is, whatever store the node runs on. A SOURCE is a directory (its
// tree), urls:FILE (a list of URLs, one a line) or s3://UPSTREAM/PREFIX
// (the objects under PREFIX in the bucket of the configuration's s3
// upstream UPSTREAM). The summary goes to stdout, progress to stderr.
func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := newFlags("import")
	path := flags.String("config", "", "YAML configuration file: the node's base URL, signing key, client certificate and s3 upstreams")
	nodeURL := flags.String("node", "", "the member node's base URL (default: the configuration's node.baseURL + /mn)")
	token := flags.String("token", "", "the bearer token to create with")
	tokenFile := flags.String("token-file", "", "a `FILE` holding the bearer token")
	subject := flags.String("subject", "", "create as this subject, with a token signed by auth.signingKey")
	certFile := flags.String("cert", "", "a client certificate to present (default node.clientCert)")
	keyFile := flags.String("key", "", "its key (default node.clientKey)")
	caFile := flags.String("ca", "", "trust the node's certificate from these authorities (PEM `FILE`) besides the system's")
	manifest := flags.String("manifest", "", "system metadata by path: CSV with a header (path,pid,formatId,rightsHolder,access) or JSON lines")
	pidScheme := flags.String("pid", importer.PIDPath, "the pid of an object the manifest names none for: path (its path in the source), name (its file name) or checksum (its digest)")
	pidPrefix := flags.String("pid-prefix", "", "put `PREFIX` before every default pid")
	rightsHolder := flags.String("rights-holder", "", "the rights holder of objects the manifest names none for (default: --subject, else the subject the node sees)")
	access := flags.String("access", "", "the access rules of objects the manifest names none for, such as 'read:public;write:CN=Jane,O=Example' (default: the rights holder only)")
	algorithm := flags.String("checksum", "SHA-256", "the checksum algorithm of new objects")
	jobs := flags.Int("jobs", 4, "uploads at once")
	progress := flags.String("progress", "auto", "auto (a bar on a terminal, else lines), bar or lines")
	every := flags.Duration("progress-interval", 10*time.Second, "how often a progress line is printed when not on a terminal")
	fromExport := flags.String("from-export", "", "bring back the export in `DIR` (d1bridge export) into the stopped node of --config, with its system metadata exactly as exported: the same as d1bridge restore DIR")
	force := flags.Bool("force", false, "with --from-export: add to a catalog that holds objects, as restore --force does")
	if help, err := parseFlags(flags, args, stdout); help || err != nil {
		if help {
			fmt.Fprint(stdout, importHelp)
		}
		return err
	}
	if *fromExport != "" {
		// Through create, dates, serial versions and chains would be the node's
		// own; an export is brought back exactly, into the catalog, as restore does.
		if flags.NArg() > 0 || backup.Kind(*fromExport) != "export" {
			return fmt.Errorf("import: --from-export takes one export directory (with hashstore.yaml) and no SOURCE")
		}
		restoreArgs := []string{"--config", *path}
		if *force {
			restoreArgs = append(restoreArgs, "--force")
		}
		return restoreCmd(ctx, append(restoreArgs, *fromExport), getenv, stdout, stderr)
	}
	if flags.NArg() == 0 {
		return errors.New("import: no SOURCE: give a directory, urls:FILE or s3://UPSTREAM/PREFIX (d1bridge import --help)")
	}
	switch *pidScheme {
	case importer.PIDPath, importer.PIDName, importer.PIDChecksum:
	default:
		return fmt.Errorf("import: --pid is path, name or checksum, not %q", *pidScheme)
	}
	if alg, ok := adapter.CanonicalAlgorithm(*algorithm); ok {
		*algorithm = alg
	} else {
		return fmt.Errorf("import: --checksum: no algorithm %q (%s)", *algorithm, strings.Join(adapter.ChecksumAlgorithms, ", "))
	}
	if *jobs < 1 {
		return fmt.Errorf("import: --jobs must be at least 1, got %d", *jobs)
	}
	cfg, err := loadConfig(*path, getenv)
	if err != nil {
		return err
	}
	defaultAccess, err := importer.ParseAccess(*access)
	if err != nil {
		return fmt.Errorf("import: --access: %w", err)
	}
	if *progress != "auto" && *progress != "bar" && *progress != "lines" {
		return fmt.Errorf("import: --progress is auto, bar or lines, not %q", *progress)
	}
	var entries map[string]*importer.Entry
	if *manifest != "" {
		if entries, err = importer.LoadManifest(*manifest); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}
	cred := cliCredential{token: *token, tokenFile: *tokenFile, subject: *subject, cert: *certFile, key: *keyFile, ca: *caFile}
	node, err := cliNodeClient(cfg, *nodeURL, "mn", cred, *jobs)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if err := node.Ping(ctx); err != nil {
		return fmt.Errorf("import: the node at %s does not answer ping (--node names it): %s", node.Base, cliExceptionText(err))
	}
	items, err := importSources(ctx, cfg, flags.Args(), *manifest)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	holder := cliFirstSet(*rightsHolder, *subject)
	if holder == "" {
		if holder, err = node.Whoami(ctx); err != nil {
			return fmt.Errorf("import: asking the node who the credential is (give --rights-holder): %s", cliExceptionText(err))
		}
		if holder == adapter.SubjectPublic {
			return errors.New("import: the node sees no credential (public): give --token, --token-file or --subject, or the rights holder with --rights-holder")
		}
	}
	tty := *progress == "bar" || *progress == "auto" && cliIsTerminal(stderr)
	fmt.Fprintf(stderr, "importing %d objects into %s\n", len(items), node.Base)
	sum := importer.Run(ctx, importer.Options{
		Node: node, Items: items, Manifest: entries, Jobs: *jobs,
		Defaults: importer.Defaults{PIDScheme: *pidScheme, PIDPrefix: *pidPrefix, RightsHolder: holder,
			Access: defaultAccess, Algorithm: *algorithm, Formats: adapter.OfficialFormats()},
		Progress: importer.NewProgress(stderr, tty, *every, items),
	})
	sum.Print(stdout)
	switch {
	case ctx.Err() != nil:
		return errors.New("import: interrupted; run it again to go on (what is there is skipped)")
	case len(sum.Failures) > 0:
		return fmt.Errorf("import: %d failed (see the summary)", len(sum.Failures))
	}
	return nil
}

const importHelp = `
Sources:
  DIR                    every file under the directory (pid: its path relative to DIR)
  urls:FILE              the http(s) URLs in FILE, one a line (pid: the URL)
  s3://UPSTREAM/PREFIX   the objects under PREFIX in the bucket of the configuration's
                         s3 upstream UPSTREAM (pid: the key less PREFIX)

An object the node already holds under its pid with the same checksum is skipped, so an
import that stopped can be run again; one held with another checksum is a failure and is
left as it is. Objects are created through the node's create operation, as any client's.
`

// importSources lists the items of every source.
func importSources(ctx context.Context, cfg *config.Config, sources []string, manifest string) ([]importer.Item, error) {
	var items []importer.Item
	var get func(context.Context, string) (io.ReadCloser, error)
	for _, src := range sources {
		var list []importer.Item
		var err error
		switch {
		case strings.HasPrefix(src, "urls:"):
			if get == nil {
				get = importURLGetter()
			}
			list, err = importer.URLs(strings.TrimPrefix(src, "urls:"), get)
		case strings.HasPrefix(src, "s3://"):
			list, err = importBucketItems(ctx, cfg, strings.TrimPrefix(src, "s3://"))
		default:
			fi, serr := os.Stat(src)
			switch {
			case serr != nil:
				err = serr
			case !fi.IsDir():
				err = fmt.Errorf("%s is not a directory (a list of URLs is urls:%s)", src, src)
			default:
				list, err = importer.Tree(src, manifest)
			}
		}
		if err != nil {
			return nil, err
		}
		items = append(items, list...)
	}
	return items, nil
}

// importMetrics are the metrics of the upstream clients an import uses
// (reading URLs and buckets); nobody scrapes them.
var importMetrics = sync.OnceValue(func() *metrics.Metrics { return metrics.New(prometheus.NewRegistry(), version) })

// importURLGetter reads a URL through an upstream client (timeouts, retries of
// GET before the body, the breaker), as every upstream call is made.
func importURLGetter() func(context.Context, string) (io.ReadCloser, error) {
	c := upstream.New(config.Upstream{Name: "import", Type: config.UpstreamHTTP}, importMetrics())
	return func(ctx context.Context, u string) (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(upstream.WithOperation(ctx, "GET"), http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.HTTP().Do(req)
		if err != nil {
			return nil, c.Error(err, u)
		}
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			return nil, c.Exception(resp, u)
		}
		return resp.Body, nil
	}
}

// importBucketItems lists the objects under PREFIX in the bucket of the s3
// upstream named in ref (UPSTREAM/PREFIX): the upstream's store with its
// holdings set to PREFIX.
func importBucketItems(ctx context.Context, cfg *config.Config, ref string) ([]importer.Item, error) {
	name, prefix, _ := strings.Cut(ref, "/")
	var u *config.Upstream
	for i := range cfg.Upstreams {
		if cfg.Upstreams[i].Name == name {
			u = &cfg.Upstreams[i]
		}
	}
	if u == nil || u.Type != config.UpstreamS3 {
		return nil, fmt.Errorf("s3://%s: the configuration has no s3 upstream named %q", ref, name)
	}
	o := map[string]any{}
	if u.Options.Kind != 0 {
		if err := u.Options.Decode(&o); err != nil {
			return nil, fmt.Errorf("upstream %s: options: %w", name, err)
		}
	}
	o["holdings"] = prefix
	uc := *u
	if err := uc.Options.Encode(o); err != nil {
		return nil, err
	}
	store, err := s3.New(uc, upstream.New(uc, importMetrics()))
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", name, err)
	}
	items, err := importer.Bucket(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("s3://%s: listing: %s", ref, cliExceptionText(err))
	}
	return items, nil
}

// cliCredential is how a subcommand authenticates to a node.
type cliCredential struct {
	token, tokenFile, subject string
	cert, key, ca             string
}

// cliNodeClient is a client of the node's role API at raw (default: the
// configuration's base URL), with the credential: a token given, read or
// minted for the subject with auth.signingKey (again when half its
// lifetime is gone), and a client certificate (default the node's own).
func cliNodeClient(cfg *config.Config, raw, role string, cred cliCredential, conns int) (*d1client.Client, error) {
	base, err := d1client.BaseURL(cliFirstSet(raw, cfg.BaseURL()), role)
	if err != nil {
		return nil, fmt.Errorf("--node: %w", err)
	}
	tc, err := d1client.TLSConfig(cliFirstSet(cred.cert, cfg.Node.ClientCert), cliFirstSet(cred.key, cfg.Node.ClientKey), cred.ca)
	if err != nil {
		return nil, err
	}
	c := &d1client.Client{Base: base, HTTP: d1client.NewHTTP(tc, conns)}
	n := 0
	for _, s := range []string{cred.token, cred.tokenFile, cred.subject} {
		if s != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, errors.New("give one of --token, --token-file and --subject")
	case cred.token != "":
		c.Token = func() (string, error) { return cred.token, nil }
	case cred.tokenFile != "":
		b, err := os.ReadFile(cred.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		c.Token = func() (string, error) { return tok, nil }
	case cred.subject != "":
		if cfg.Auth.SigningKey == "" {
			return nil, errors.New("--subject needs auth.signingKey in the configuration to sign its token (d1bridge token --help)")
		}
		issuer, err := auth.LoadIssuer(cfg.Auth.SigningKey, cfg.Node.ID, cfg.Auth.TokenLifetime)
		if err != nil {
			return nil, fmt.Errorf("auth.signingKey: %w", err)
		}
		c.Token = cliMintTokens(issuer, cred.subject, cfg.Auth.TokenLifetime)
	}
	return c, nil
}

// cliMintTokens gives a token for subject, signing a new one when half of the
// current one's lifetime is gone.
func cliMintTokens(issuer *auth.Issuer, subject string, lifetime time.Duration) func() (string, error) {
	var mu sync.Mutex
	var tok string
	var at time.Time
	return func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if tok == "" || time.Since(at) > lifetime/2 {
			t, err := issuer.Issue(&adapter.Session{Subject: subject})
			if err != nil {
				return "", err
			}
			tok, at = t, time.Now()
		}
		return tok, nil
	}
}

// cliIsTerminal reports whether w is a terminal.
func cliIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// cliExceptionText is a DataONE error as "Name: description", or err.
func cliExceptionText(err error) string {
	var ex *adapter.Exception
	if errors.As(err, &ex) {
		return ex.Kind.String() + ": " + ex.Description
	}
	return err.Error()
}

func cliFirstSet(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
