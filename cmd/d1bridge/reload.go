package main

import (
	"crypto/tls"
	"log/slog"
	"slices"

	"github.com/d1bridge/d1bridge/adapter/rest"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
	"github.com/d1bridge/d1bridge/metrics"
)

// reloaded is what a reload applies.
type reloaded struct {
	engine *engine
	cfg    *config.Config // the configuration in effect after it
	tls    *tls.Config    // the certificate, key and client CAs read again; nil without TLS
	// applied are the keys changed since the running configuration and
	// applied; restart those that differ from the started one and wait for
	// a restart.
	applied, restart []string
}

// reload reads the configuration again and compares it, key by key, with the
// configuration started (what needs a restart) and the one running (what is
// applied now). Keys that need new listeners, stores or upstream clients keep
// their started values until a restart; with TLS on, the certificate, key and
// client CAs are read again even when their paths are the same (a renewed
// certificate).
func reload(started, running *config.Config, path string, getenv func(string) string, n *mappings.Nodes, m *metrics.Metrics, log *slog.Logger, uploads *rest.Uploads) (*reloaded, error) {
	cfg, err := loadConfig(path, getenv)
	if err != nil {
		return nil, err
	}
	tlsSwap := started.TLS.Cert != "" && cfg.TLS.Cert != ""
	applies := func(key string) bool {
		if key == "node.id" || under(key, "tls") && !tlsSwap || slices.Contains(queueKeys, key) {
			return false
		}
		return slices.ContainsFunc(reloadable, func(p string) bool { return under(key, p) })
	}
	rl := &reloaded{}
	for _, k := range config.Changed(started, cfg) {
		if !applies(k) {
			rl.restart = append(rl.restart, k)
		}
	}
	for _, k := range config.Changed(running, cfg) {
		if applies(k) {
			rl.applied = append(rl.applied, k)
		}
	}
	if tlsSwap {
		if rl.tls, err = tlsConfig(cfg); err != nil {
			return nil, err
		}
	} else {
		cfg.TLS = started.TLS
	}
	cfg.Listen, cfg.DataDir, cfg.Catalog, cfg.Metrics, cfg.Node.ID, cfg.Limits =
		started.Listen, started.DataDir, started.Catalog, started.Metrics, started.Node.ID, started.Limits
	if rl.engine, err = newEngine(cfg, n, m, log, uploads); err != nil {
		return nil, err
	}
	rl.cfg = cfg
	return rl, nil
}
