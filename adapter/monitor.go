package adapter

import "context"

// StatsQuery selects what the monitoring endpoints count.
type StatsQuery struct {
	FormatID         string // exact; empty: every format
	FromDate, ToDate Time   // objects: dateUploaded; events: dateLogged; fromDate <= t < toDate
	Event            string // events only; empty: every event
	Period           string // events only: hour, day (default) or month
	// Replicas counts only the replicas held: objects another node is
	// authoritative for whose bytes are here (objects only; the replication
	// policy's spaceAllocated).
	Replicas bool
}

// ObjectStats counts stored objects, in all and by format.
type ObjectStats struct {
	Objects int64         `json:"objects"`
	Bytes   int64         `json:"bytes"`
	Formats []FormatStats `json:"formats"`
}

type FormatStats struct {
	FormatID string `json:"formatId"`
	Objects  int64  `json:"objects"`
	Bytes    int64  `json:"bytes"`
}

// EventStats counts logged events by event and period.
type EventStats struct {
	Period string       `json:"period"`
	Counts []EventCount `json:"counts"`
}

type EventCount struct {
	Event  string `json:"event"`
	Period string `json:"period"` // the period's start, e.g. 2026-11-21 for a day
	Count  int64  `json:"count"`
}

// MNMonitor is the optional tier behind the monitoring endpoints.
type MNMonitor interface {
	ObjectStatistics(ctx context.Context, q StatsQuery) (*ObjectStats, error)
	EventStatistics(ctx context.Context, q StatsQuery) (*EventStats, error)
}
