// Command d1bridge serves the DataONE member node and coordinating node REST
// contract in front of existing stores; with no configuration it runs both roles
// on an embedded store.
//
// Usage:
//
//	d1bridge [serve] [--config FILE]
//	d1bridge version
//	d1bridge config check FILE
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/rest"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "d1bridge:", err)
		os.Exit(1)
	}
}

// run is the whole program, so tests can drive it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "d1bridge", version)
		return nil
	case "config":
		if len(args) != 2 || args[0] != "check" {
			return errors.New("usage: d1bridge config check FILE")
		}
		return checkConfig(args[1], getenv, stdout)
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		path := fs.String("config", "", "YAML configuration file")
		if err := fs.Parse(args); err != nil {
			return err
		}
		cfg, err := loadConfig(*path, getenv)
		if err != nil {
			return err
		}
		return serve(ctx, cfg)
	}
	return fmt.Errorf("unknown command %q (serve, version, config check FILE)", cmd)
}

func loadConfig(path string, getenv func(string) string) (*config.Config, error) {
	cfg, err := config.Load(path, getenv)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// checkConfig prints every problem of a configuration file (with the environment
// applied, as serve would see it).
func checkConfig(path string, getenv func(string) string, stdout io.Writer) error {
	if _, err := loadConfig(path, getenv); err != nil {
		return err
	}
	fmt.Fprintln(stdout, path+": ok")
	return nil
}

func serve(ctx context.Context, cfg *config.Config) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)

	n, err := mappings.New(cfg, log)
	if err != nil {
		return err
	}
	defer n.Close()

	authn, closeAuth, err := authenticator(cfg, log)
	if err != nil {
		return err
	}
	defer closeAuth()
	trusted := append(append(append([]string{}, cfg.Node.Subjects...), cfg.Node.Administrators...), cfg.Node.CNSubjects...)
	opts := rest.Options{
		Svc: cfg.Svc,
		Node: rest.NodeInfo{
			ID: cfg.Node.ID, Name: cfg.Node.Name, Description: cfg.Node.Description,
			BaseURL: cfg.BaseURL(), Subjects: cfg.Node.Subjects, ContactSubjects: cfg.Node.ContactSubjects,
			Replicate: cfg.Node.Replicate, Synchronize: cfg.Node.Synchronize,
		},
		Formats: adapter.OfficialFormats(),
		Authorizer: auth.NewAuthorizer(auth.Policy{Trusted: trusted, Submitters: cfg.Node.Submitters,
			CacheSize: cfg.AuthCacheSize, CacheTTL: cfg.AuthCacheTTL}),
		Sessions:      authn.Session,
		Metrics:       m,
		Logger:        log,
		MaxUploadSize: cfg.MaxUploadSize,
	}
	if cfg.HasRole(config.RoleMN) {
		opts.MN = n
	}
	if cfg.HasRole(config.RoleCN) {
		opts.CN = n
	}
	api := rest.New(opts)
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})

	mux := http.NewServeMux()
	mux.Handle("/", api)
	front := &http.Server{Addr: cfg.Listen, Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	if front.TLSConfig, err = tlsConfig(cfg); err != nil {
		return err
	}
	servers := []*http.Server{front}
	if cfg.Metrics.Listen == "" {
		mux.Handle(cfg.Metrics.Path, metricsHandler)
	} else {
		mm := http.NewServeMux()
		mm.Handle(cfg.Metrics.Path, metricsHandler)
		servers = append(servers, &http.Server{Addr: cfg.Metrics.Listen, Handler: mm})
	}

	errc := make(chan error, len(servers))
	for _, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return err
		}
		log.Info("listening", "addr", ln.Addr().String(), "baseURL", cfg.BaseURL(), "roles", cfg.Roles, "version", version)
		if srv.TLSConfig != nil {
			ln = tls.NewListener(ln, srv.TLSConfig)
		}
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("graceful shutdown: %w", err)
		}
	}
	return nil
}

// authenticator builds the session source the configuration describes.
func authenticator(cfg *config.Config, log *slog.Logger) (*auth.Authenticator, func(), error) {
	keys, err := auth.LoadTokenKeys(cfg.Auth.TokenKeys)
	if err != nil {
		return nil, nil, fmt.Errorf("auth.tokenKeys: %w", err)
	}
	o := auth.AuthenticatorOptions{TokenKeys: keys}
	if cfg.EnableSessionFromHeader {
		px := cfg.Auth.Proxy
		p := &auth.ProxyTrust{SubjectHeader: px.SubjectHeader, VerifyHeader: px.VerifyHeader,
			SecretHeader: px.SecretHeader, Secret: px.Secret}
		for _, a := range px.TrustedAddresses {
			n, _ := config.ParseCIDR(a) // validated
			p.Addresses = append(p.Addresses, n)
		}
		o.Proxy = p
	}
	closeAuth := func() {}
	if cfg.EnableAppendLdapGroups {
		l := cfg.LDAP
		dir := auth.NewLDAPDirectory(auth.LDAPOptions{
			URL: l.URL, BindDN: l.BindDN, BindPassword: l.BindPassword,
			UserBaseDN: l.UserBaseDN, UserFilter: l.UserFilter, GroupBaseDN: l.GroupBaseDN, GroupFilter: l.GroupFilter,
			GroupSubject: l.GroupSubject, MemberOf: l.MemberOf, Timeout: l.Timeout, MaxConnections: l.MaxConnections,
			CacheSize: max(cfg.AuthCacheSize, 1000), CacheTTL: l.CacheTTL, Backoff: l.Backoff,
		})
		o.Groups, o.FailOnDirectoryError = dir, l.OnError == "fail"
		closeAuth = func() { dir.Close() }
	}
	return auth.NewAuthenticator(o), closeAuth, nil
}

// tlsConfig is nil when d1bridge serves plain HTTP (behind a proxy); with
// tls.clientCAs, client certificates signed by those authorities are credentials.
func tlsConfig(cfg *config.Config) (*tls.Config, error) {
	if cfg.TLS.Cert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLS.ClientCAs != "" {
		pem, err := os.ReadFile(cfg.TLS.ClientCAs)
		if err != nil {
			return nil, fmt.Errorf("tls.clientCAs: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.clientCAs: no certificate in %s", cfg.TLS.ClientCAs)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}
