// Command d1bridge serves the DataONE member node and coordinating node REST
// contract in front of existing stores; with no configuration it runs both roles
// on an embedded store.
//
// Usage:
//
//	d1bridge [serve] [--config FILE]
//	d1bridge token --subject S [--config FILE] [--lifetime D] [--new-key FILE]
//	d1bridge import [flags] SOURCE...
//	d1bridge register --cn URL [--config FILE]
//	d1bridge backup [--config FILE] [--verify=false] DIR
//	d1bridge restore [--config FILE] [--force] DIR
//	d1bridge export [--config FILE] DIR
//	d1bridge probe [URL]
//	d1bridge config check FILE
//	d1bridge version
//	d1bridge help
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
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
	if len(args) > 0 && isHelp(args[0]) {
		usage(stdout)
		return nil
	}
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "version":
		if len(args) > 0 && isHelp(args[0]) {
			commandUsage(stdout, "version", nil)
			return nil
		}
		fmt.Fprintln(stdout, "d1bridge", version)
		return nil
	case "config":
		if len(args) > 0 && isHelp(args[len(args)-1]) {
			commandUsage(stdout, "config check", nil)
			return nil
		}
		if len(args) != 2 || args[0] != "check" {
			return errors.New("usage: d1bridge config check FILE")
		}
		return checkConfig(args[1], getenv, stdout)
	case "token":
		return tokenCmd(args, getenv, stdout, os.Stderr)
	case "import":
		return importCmd(ctx, args, getenv, stdout, os.Stderr)
	case "register":
		return registerCmd(ctx, args, getenv, stdout, os.Stderr)
	case "backup":
		return backupCmd(ctx, args, getenv, stdout, os.Stderr)
	case "restore":
		return restoreCmd(ctx, args, getenv, stdout, os.Stderr)
	case "export":
		return exportCmd(ctx, args, getenv, stdout, os.Stderr)
	case "probe":
		return probeCmd(ctx, args, stdout, os.Stderr)
	case "serve":
		fs := newFlags("serve")
		path := fs.String("config", "", "YAML configuration file (default: none; the defaults and the environment)")
		if help, err := parseFlags(fs, args, stdout); help || err != nil {
			return err
		}
		if fs.NArg() > 0 {
			// A node on the defaults instead of the file meant would start quietly.
			return fmt.Errorf("serve: unexpected argument %q (did you mean --config %[1]s?)", fs.Arg(0))
		}
		cfg, err := loadConfig(*path, getenv)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, *path, getenv)
	}
	return fmt.Errorf("unknown command %q (d1bridge help)", cmd)
}

// newLogger writes cfg's format at cfg's level, with each request's id.
func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	if cfg.Format == config.LogText {
		return slog.New(adapter.LogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(adapter.LogHandler(slog.NewJSONHandler(w, opts)))
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
// applied, as serve would see it), all in one report: its keys, every file it
// names read as serve reads it (token keys, signing key, TLS certificate, key
// and client CAs), and, once the keys are valid, the options of its upstreams,
// as their mappings would decode them at start (secret files read; no
// upstream contacted).
func checkConfig(path string, getenv func(string) string, stdout io.Writer) error {
	cfg, envErr := config.Load(path, getenv)
	if cfg == nil {
		return envErr // the file itself does not read
	}
	invalid := cfg.Validate()
	errs := []error{envErr, invalid, checkFiles(cfg)}
	if invalid == nil && envErr == nil {
		errs = append(errs, mappings.Check(cfg))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	fmt.Fprintln(stdout, path+": ok")
	return nil
}

// checkFiles reads every file cfg names that serve reads at start, as serve
// reads it, and reports each problem, naming its key.
func checkFiles(cfg *config.Config) error {
	var errs []error
	for i, p := range cfg.Auth.TokenKeys {
		if _, err := auth.LoadTokenKeys([]string{p}); err != nil {
			errs = append(errs, fmt.Errorf("auth.tokenKeys[%d]: %w", i, err))
		}
	}
	if cfg.Auth.SigningKey != "" {
		if _, err := auth.LoadIssuer(cfg.Auth.SigningKey, cfg.Node.ID, cfg.Auth.TokenLifetime); err != nil {
			errs = append(errs, fmt.Errorf("auth.signingKey: %w", err))
		}
	}
	if cfg.TLS.Cert != "" && cfg.TLS.Key != "" { // else Validate says so
		_, err := tlsConfig(cfg)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
