package rest

import (
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/gin-gonic/gin"
)

// The status page at / is for people: plain server-rendered HTML with inline
// CSS and no script. What it shows is public: the node document's identity,
// counts, the upstreams' states, the background work, and recent events on
// objects the public may read.
//
// It is cheap to serve whatever the rate of views: the page's content is built
// at most once every statusTTL (the upstream checks it makes are network calls),
// and the object counts, which count the catalog, at most once every statsTTL;
// viewers in between share the last build. The events are the last
// statusEvents of the past statusEventWindow, read through the log's date index.

//go:embed status.html.tmpl
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"bytes":    humanBytes,
	"duration": humanDuration,
	"time":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
}).Parse(statusHTML))

const (
	statusTTL         = 5 * time.Second
	statsTTL          = 30 * time.Second
	statusEvents      = 20
	statusEventWindow = 24 * time.Hour
	// statusTimeout bounds one build: a slow upstream check shows as an error.
	statusTimeout = 5 * time.Second
)

// statusView is what the template renders.
type statusView struct {
	Node      NodeInfo
	MN, CN    bool // the roles served
	Roles     []string
	Services  []string
	Version   string
	GoVersion string
	Started   time.Time
	Uptime    time.Duration
	Built     time.Time

	CatalogUp    bool
	CatalogError string

	// Stats is nil when the node keeps no statistics (or they failed: StatsError).
	Stats      *adapter.ObjectStats
	StatsAt    time.Time
	StatsError string

	Upstreams []Upstream

	// Events are the last events on objects the public may read; EventCounts
	// count every event of the window by type (numbers only, no identifiers).
	Events      []statusEvent
	EventCounts []adapter.EventCount
	EventsError string
	EventWindow time.Duration

	Requests, RequestErrors uint64

	Work metrics.Progress
}

// statusEvent is the public part of a log record: never its subject, address
// or user agent.
type statusEvent struct {
	Time              time.Time
	Event, Identifier string
}

// statusCache holds the last build.
type statusCache struct {
	mu      sync.Mutex
	view    *statusView
	stats   *adapter.ObjectStats
	statsAt time.Time
	statErr string
}

// status serves GET and HEAD /.
func (e *engine) status(c *gin.Context) {
	start := time.Now()
	v := e.statusView(c.Request.Context())
	var b strings.Builder
	status := http.StatusOK
	if err := statusTemplate.Execute(&b, v); err != nil {
		e.log.Error("status page", "err", err)
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString("the status page could not be rendered\n")
	}
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", fmt.Sprintf("max-age=%d", int(statusTTL/time.Second)))
	if c.Request.Method == http.MethodHead {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(b.Len()))
		c.Status(status)
		c.Writer.WriteHeaderNow()
	} else {
		c.Data(status, "text/html; charset=utf-8", []byte(b.String()))
	}
	e.log.LogAttrs(c, requestLevel(status), "request", slog.String("op", "status"), slog.String("method", c.Request.Method),
		slog.String("path", c.Request.URL.EscapedPath()), slog.Int("status", status),
		slog.Float64("duration_seconds", time.Since(start).Seconds()))
}

// statusView is the last build, or a new one when it is older than statusTTL.
// One build runs at a time; a viewer that goes away does not cut it short.
func (e *engine) statusView(ctx context.Context) *statusView {
	sc := &e.statusCache
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.view != nil && time.Since(sc.view.Built) < statusTTL {
		return sc.view
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusTimeout)
	defer cancel()
	o := e.opts
	v := &statusView{Node: o.Node, MN: e.mn != nil, CN: e.cn != nil, Version: o.Version, GoVersion: runtime.Version(), Built: time.Now(),
		EventWindow: statusEventWindow, Work: o.Metrics.Progress()}
	if v.Started = o.Metrics.Started(); !v.Started.IsZero() {
		v.Uptime = time.Since(v.Started).Round(time.Second)
	}
	for _, op := range o.Metrics.Operations() {
		v.Requests += op.Requests
		v.RequestErrors += op.Errors
	}
	if e.mn != nil {
		v.Roles = append(v.Roles, "member node (MN)")
		for _, s := range e.mn.capabilities().Services.Service {
			if !slices.Contains(v.Services, s.Name) {
				v.Services = append(v.Services, s.Name)
			}
		}
	}
	if e.cn != nil {
		v.Roles = append(v.Roles, "coordinating node (CN)")
	}
	v.CatalogUp = true
	if err := e.ping(ctx); err != nil {
		v.CatalogUp, v.CatalogError = false, adapter.AsException(err).Description
	}
	v.Upstreams = e.upstreams(ctx)
	// A CN-only node counts and logs through its CN node.
	h := e.mn
	if h == nil && e.cn != nil {
		h = e.cn.mnHandlers
	}
	if h != nil && h.monitor != nil {
		if time.Since(sc.statsAt) > statsTTL {
			st, err := h.monitor.ObjectStatistics(ctx, adapter.StatsQuery{})
			sc.stats, sc.statErr, sc.statsAt = st, "", time.Now()
			if err != nil {
				sc.stats, sc.statErr = nil, adapter.AsException(err).Description
			}
		}
		v.Stats, v.StatsAt, v.StatsError = sc.stats, sc.statsAt, sc.statErr
	}
	if h != nil {
		v.Events, v.EventCounts, v.EventsError = e.recentEvents(ctx, h)
	}
	sc.view = v
	return v
}

// ping checks the node serving the MN role, else the CN's.
func (e *engine) ping(ctx context.Context) error {
	switch {
	case e.opts.MN != nil:
		return e.opts.MN.Ping(ctx)
	case e.opts.CN != nil:
		return e.opts.CN.Ping(ctx)
	}
	return nil
}

// recentEvents are the last statusEvents events of the window on objects the
// public may read (the records an anonymous getLogRecords answers), newest
// first, and the window's events counted by type. Events on other objects
// show only in the counts: an identifier can itself say what its owner has
// not published.
func (e *engine) recentEvents(ctx context.Context, h *mnHandlers) ([]statusEvent, []adapter.EventCount, string) {
	public := adapter.PublicSession()
	from := adapter.NewTime(time.Now().Add(-statusEventWindow))
	q := adapter.LogQuery{FromDate: from, ReadableBy: e.opts.Authorizer.ReadableBy(public)}
	if len(q.ReadableBy) == 0 { // only a trusted session reads everything; the public never is one
		q.ReadableBy = []string{adapter.SubjectPublic}
	}
	// The first call counts the window's records, the second reads its tail.
	head, err := h.node.LogRecords(ctx, public, q)
	if err != nil {
		return nil, nil, adapter.AsException(err).Description
	}
	q.Start, q.Count = max(head.Total-statusEvents, 0), statusEvents
	log, err := h.node.LogRecords(ctx, public, q)
	if err != nil {
		return nil, nil, adapter.AsException(err).Description
	}
	out := make([]statusEvent, 0, len(log.LogEntry))
	for i := len(log.LogEntry) - 1; i >= 0; i-- {
		le := log.LogEntry[i]
		out = append(out, statusEvent{Time: le.DateLogged.Time, Event: le.Event, Identifier: le.Identifier})
	}
	var counts []adapter.EventCount
	if h.monitor != nil {
		st, err := h.monitor.EventStatistics(ctx, adapter.StatsQuery{FromDate: from, Period: "month"})
		if err != nil {
			return out, nil, adapter.AsException(err).Description
		}
		byEvent := map[string]int64{}
		for _, c := range st.Counts {
			byEvent[c.Event] += c.Count
		}
		for ev, n := range byEvent {
			counts = append(counts, adapter.EventCount{Event: ev, Count: n})
		}
		sort.Slice(counts, func(i, j int) bool { return counts[i].Event < counts[j].Event })
	}
	return out, counts, ""
}

// humanBytes is n in binary units: "0 B", "1.5 KiB", "3.2 GiB".
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, unit := float64(n), 0
	for f >= 1024 && unit < 6 {
		f, unit = f/1024, unit+1
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[unit-1])
}

// humanDuration is d rounded to what a person reads: "3d 4h", "2h 5m", "41s".
func humanDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %ds", d/time.Minute, d%time.Minute/time.Second)
	case d >= time.Second:
		return fmt.Sprintf("%.0fs", d.Seconds())
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}
