package config

import (
	"log/slog"
	"strings"
)

// Log says what the node logs and how. Every failed request is one line at
// warn (4xx) or error (5xx); successful requests are logged at debug.
type Log struct {
	// Level is the least severe level written: debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is json (one object per line, for collectors) or text
	// (key=value, for people reading a terminal).
	Format string `yaml:"format"`
}

// Log formats.
const (
	LogJSON = "json"
	LogText = "text"
)

// DefaultLog is info, as JSON.
func DefaultLog() Log { return Log{Level: "info", Format: LogJSON} }

// SlogLevel is Level as a slog level; Validate has checked it.
func (l Log) SlogLevel() slog.Level {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level))
	return level
}

func (l *Log) validate(p *problems) {
	var level slog.Level
	switch strings.ToLower(l.Level) {
	case "debug", "info", "warn", "error":
	default:
		if level.UnmarshalText([]byte(l.Level)) != nil || l.Level == "" {
			p.addf("log.level", "%q is not debug, info, warn or error", l.Level)
		}
	}
	if l.Format != LogJSON && l.Format != LogText {
		p.addf("log.format", "%q is not %s or %s", l.Format, LogJSON, LogText)
	}
}
