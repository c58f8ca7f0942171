package dataone

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/d1bridge/d1bridge/adapter"
	"golang.org/x/sync/errgroup"
)

// Listings with forward none (see the package documentation): the upstream
// sees the bridge, which it may trust with every object and event, so its
// answer is filtered for the bridge, not for the caller.
//
//   - A caller the front trusts (readableBy nil) gets the upstream's answer.
//   - A caller with no credential (readableBy only public) gets the answer the
//     upstream gives the public: the call goes without the bridge's
//     credential. One call, exact totals and paging.
//   - Any other caller (authenticated, not trusted) gets the upstream's whole
//     answer for the query's own filters, read as the bridge page by page,
//     kept only where readableBy may read the object (its system metadata,
//     read as the bridge), then paged by the front: exact totals, at the cost
//     of one system metadata call per distinct object that matches the
//     filters, and at most maxFilteredScan entries, beyond which the call is a
//     ServiceFailure asking for narrower filters.

// listing is how a listing is asked of the upstream.
type listing int

const (
	listAsBridge  listing = iota // trusted, or forward is not none: the identity identify gives
	listAsPublic                 // no credential: without the bridge's credential
	listAndFilter                // authenticated, not trusted: as the bridge, filtered by the front
)

// Bounds of a filtered listing.
const (
	maxFilteredScan = 10000 // entries read from the upstream for one filtered listing
	scanPage        = 1000  // entries asked per upstream page
	metaWorkers     = 8     // system metadata calls at once
)

// listingFor is how to ask a listing for s, whose listing the front filters
// for readableBy (nil: not at all).
func (n *Node) listingFor(s *adapter.Session, readableBy []string) listing {
	if n.o.Forward != ForwardNone {
		return listAsBridge
	}
	if readableBy == nil && s != nil && len(s.Subjects) > 0 && s.Subject != adapter.SubjectPublic {
		return listAsBridge
	}
	for _, x := range readableBy {
		if x != adapter.SubjectPublic {
			return listAndFilter
		}
	}
	return listAsPublic
}

// readable reports whether one of subjects may read the object sm describes:
// its rights holder, or a subject of an access rule (any permission implies
// read).
func readable(sm *adapter.SystemMetadata, subjects []string) bool {
	if slices.Contains(subjects, sm.RightsHolder) {
		return true
	}
	if sm.AccessPolicy == nil {
		return false
	}
	for _, rule := range sm.AccessPolicy.Allow {
		if len(rule.Permission) == 0 {
			continue
		}
		for _, x := range rule.Subject {
			if slices.Contains(subjects, x) {
				return true
			}
		}
	}
	return false
}

// readableSet reads, as the bridge, the system metadata of each of ids and
// says which of them readableBy may read. An object the upstream no longer
// has (NotFound) is not readable; any other failure fails the listing.
func (n *Node) readableSet(ctx context.Context, ids []string, readableBy []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(metaWorkers)
	for _, id := range ids {
		g.Go(func() error {
			sm, err := n.SystemMetadata(gctx, nil, id)
			ok := err == nil && readable(sm, readableBy)
			if err != nil && !adapter.IsKind(err, adapter.NotFound) {
				return err
			}
			mu.Lock()
			out[id] = ok
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// scan reads every page of a listing from the upstream as the bridge: page
// is called with a start and must return the entries from it (at most
// scanPage) and the total; scan stops at the total or at a short page.
func scan[T any](ctx context.Context, n *Node, what string, page func(ctx context.Context, start int) ([]T, int, error)) ([]T, error) {
	var all []T
	for start := 0; ; {
		got, total, err := page(ctx, start)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
		start += len(got)
		if len(got) == 0 || start >= total {
			return all, nil
		}
		if start >= maxFilteredScan {
			return nil, adapter.Errorf(adapter.ServiceFailure,
				"%s of upstream %q holds more than %d entries, too many to filter for a caller the node does not trust; narrow the query (dates, format, identifier, event)",
				what, n.c.Name(), maxFilteredScan)
		}
	}
}

// window is entries[start:start+count], within bounds.
func window[T any](entries []T, start, count int) []T {
	start = min(max(start, 0), len(entries))
	end := min(start+max(count, 0), len(entries))
	return entries[start:end]
}

// filteredObjects answers listObjects for an authenticated caller the front
// does not trust.
func (n *Node) filteredObjects(ctx context.Context, q adapter.ListQuery) (*adapter.ObjectList, error) {
	all, err := scan(ctx, n, "the object list", func(ctx context.Context, start int) ([]adapter.ObjectInfo, int, error) {
		pq := q
		pq.Start, pq.Count = start, scanPage
		var l adapter.ObjectList
		err := n.call(ctx, nil, request{op: "MNRead.listObjects", method: http.MethodGet, path: "/object",
			query: listQuery(pq), what: "the object list"}, &l)
		return l.ObjectInfo, l.Total, err
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(all))
	for _, o := range all {
		ids = append(ids, o.Identifier)
	}
	ok, err := n.readableSet(ctx, ids, q.ReadableBy)
	if err != nil {
		return nil, err
	}
	kept := slices.DeleteFunc(all, func(o adapter.ObjectInfo) bool { return !ok[o.Identifier] })
	page := window(kept, q.Start, q.Count)
	return &adapter.ObjectList{Slice: adapter.Slice{Start: q.Start, Count: len(page), Total: len(kept)}, ObjectInfo: page}, nil
}

// filteredLog answers getLogRecords for an authenticated caller the front
// does not trust: the records of the objects it may read.
func (n *Node) filteredLog(ctx context.Context, q adapter.LogQuery) (*adapter.Log, error) {
	all, err := scan(ctx, n, "the event log", func(ctx context.Context, start int) ([]adapter.LogEntry, int, error) {
		pq := q
		pq.Start, pq.Count = start, scanPage
		var l adapter.Log
		err := n.call(ctx, nil, request{op: "MNCore.getLogRecords", method: http.MethodGet, path: "/log", v1: q.PIDsOnly,
			query: logQuery(pq), what: "the event log"}, &l)
		return l.LogEntry, l.Total, err
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	seen := map[string]bool{}
	for _, e := range all {
		if !seen[e.Identifier] {
			seen[e.Identifier] = true
			ids = append(ids, e.Identifier)
		}
	}
	ok, err := n.readableSet(ctx, ids, q.ReadableBy)
	if err != nil {
		return nil, err
	}
	kept := slices.DeleteFunc(all, func(e adapter.LogEntry) bool { return !ok[e.Identifier] })
	page := window(kept, q.Start, q.Count)
	return &adapter.Log{Slice: adapter.Slice{Start: q.Start, Count: len(page), Total: len(kept)}, LogEntry: page}, nil
}
