package config

import "time"

// Limits bound what one client, slow or hostile, can hold of the node:
// connections, handlers, and the staged bytes of uploads. Every limit has a
// default; a change takes effect at the next restart.
type Limits struct {
	// IdleTimeout closes a keep-alive connection that sends no new request for
	// this long.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// MaxHeaderBytes is the largest request header block (request line and
	// headers) accepted; a larger one is answered 431. A bearer token needs a
	// few KiB.
	MaxHeaderBytes int `yaml:"maxHeaderBytes"`
	// BodyStallTimeout is the longest wait for the next bytes of a request
	// body: an upload whose bytes stop flowing for this long is ended and what
	// it staged is discarded. It bounds the gap between reads, not the whole
	// upload, so a slow link may take hours over a large object as long as
	// its bytes keep coming.
	BodyStallTimeout time.Duration `yaml:"bodyStallTimeout"`
	// MaxUploads bounds the object uploads (create and update, MN and CN) in
	// flight on the node; one more is refused at once with
	// InsufficientResources.
	MaxUploads int `yaml:"maxUploads"`
	// MaxUploadsPerClient bounds the uploads in flight from one client address
	// (the address trusted proxies forward, else the peer's); at most
	// maxUploads.
	MaxUploadsPerClient int `yaml:"maxUploadsPerClient"`
}

// DefaultLimits are the limits with no configuration.
func DefaultLimits() Limits {
	return Limits{
		IdleTimeout:         2 * time.Minute,
		MaxHeaderBytes:      64 << 10,
		BodyStallTimeout:    time.Minute,
		MaxUploads:          64,
		MaxUploadsPerClient: 8,
	}
}

// minHeaderBytes is the smallest maxHeaderBytes accepted: enough for a
// DataONE request with a bearer token and a long identifier in its path.
const minHeaderBytes = 4 << 10

func (l *Limits) validate(p *problems) {
	if l.IdleTimeout <= 0 {
		p.addf("limits.idleTimeout", "must be greater than 0, got %s", l.IdleTimeout)
	}
	if l.MaxHeaderBytes < minHeaderBytes {
		p.addf("limits.maxHeaderBytes", "must be at least %d, got %d", minHeaderBytes, l.MaxHeaderBytes)
	}
	if l.BodyStallTimeout <= 0 {
		p.addf("limits.bodyStallTimeout", "must be greater than 0, got %s", l.BodyStallTimeout)
	}
	if l.MaxUploads < 1 {
		p.addf("limits.maxUploads", "must be at least 1, got %d", l.MaxUploads)
	}
	switch {
	case l.MaxUploadsPerClient < 1:
		p.addf("limits.maxUploadsPerClient", "must be at least 1, got %d", l.MaxUploadsPerClient)
	case l.MaxUploads >= 1 && l.MaxUploadsPerClient > l.MaxUploads:
		p.addf("limits.maxUploadsPerClient", "must be at most limits.maxUploads (%d), got %d", l.MaxUploads, l.MaxUploadsPerClient)
	}
}
