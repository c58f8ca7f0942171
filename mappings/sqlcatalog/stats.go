package sqlcatalog

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// ObjectStatistics counts objects and their bytes by format, filtered by format
// and by dateUploaded (fromDate inclusive, toDate exclusive); with q.Replicas,
// only the replicas held: objects whose authoritative member node is not this
// node (WithNodeID; without it, every object counts) and whose bytes are here
// (a record the CN role registered has none).
func (c *Catalog) ObjectStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.ObjectStats, error) {
	where, args := statsWhere("format_id", q.FormatID, "date_uploaded", q)
	if q.Replicas {
		where, args = andWhere(where, "authoritative_mn <> ? AND blob_key <> ''"), append(args, c.nodeID)
	}
	rows, err := c.reader(ctx).QueryContext(ctx, c.d.q(`SELECT format_id, COUNT(*), COALESCE(SUM(size), 0) FROM objects`+where+
		` GROUP BY format_id ORDER BY format_id`), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: object statistics: %w", err)
	}
	defer rows.Close()
	st := &adapter.ObjectStats{Formats: []adapter.FormatStats{}}
	for rows.Next() {
		var f adapter.FormatStats
		if err := rows.Scan(&f.FormatID, &f.Objects, &f.Bytes); err != nil {
			return nil, err
		}
		st.Objects += f.Objects
		st.Bytes += f.Bytes
		st.Formats = append(st.Formats, f)
	}
	return st, rows.Err()
}

// EventStatistics counts logged events by event and hour, day or month.
func (c *Catalog) EventStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.EventStats, error) {
	bucket, layout := int64(24*time.Hour/time.Millisecond), "2006-01-02"
	switch q.Period {
	case "hour":
		bucket, layout = int64(time.Hour/time.Millisecond), "2006-01-02T15:00Z"
	case "month":
		layout = "2006-01"
	default:
		q.Period = "day"
	}
	where, args := statsWhere("event", q.Event, "date_logged", q)
	rows, err := c.db.QueryContext(ctx, c.d.q(fmt.Sprintf(`SELECT event, date_logged / %d, COUNT(*) FROM events%s
		GROUP BY event, date_logged / %d`, bucket, where, bucket)), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: event statistics: %w", err)
	}
	defer rows.Close()
	counts := map[[2]string]int64{}
	for rows.Next() {
		var (
			event string
			n, k  int64
		)
		if err := rows.Scan(&event, &k, &n); err != nil {
			return nil, err
		}
		period := time.UnixMilli(k * bucket).UTC().Format(layout)
		counts[[2]string{event, period}] += n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	st := &adapter.EventStats{Period: q.Period, Counts: []adapter.EventCount{}}
	for k, n := range counts {
		st.Counts = append(st.Counts, adapter.EventCount{Event: k[0], Period: k[1], Count: n})
	}
	sort.Slice(st.Counts, func(i, j int) bool {
		a, b := st.Counts[i], st.Counts[j]
		return a.Period < b.Period || (a.Period == b.Period && a.Event < b.Event)
	})
	return st, nil
}

func statsWhere(exactCol, exact, dateCol string, q adapter.StatsQuery) (string, []any) {
	var conds []string
	var args []any
	if exact != "" {
		conds, args = append(conds, exactCol+" = ?"), append(args, exact)
	}
	if !q.FromDate.IsZero() {
		conds, args = append(conds, dateCol+" >= ?"), append(args, millis(q.FromDate))
	}
	if !q.ToDate.IsZero() {
		conds, args = append(conds, dateCol+" < ?"), append(args, millis(q.ToDate))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// andWhere adds cond to a WHERE clause that statsWhere made.
func andWhere(where, cond string) string {
	if where == "" {
		return " WHERE " + cond
	}
	return where + " AND " + cond
}
