package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// probeKey is the key the readiness probe asks stat (or get) about when the
// options have no list: a key nothing is stored under.
const probeKey = "d1bridge-readiness-probe"

// Ping checks, for readiness, that the repository answers the requests
// serving needs, with the store's headers and credentials (the probe):
//
//   - with list, the first page must answer and read as the options describe;
//   - else with stat, stat of probeKey must answer, an object or NotFound
//     (a 404 says the API is there and found no such object);
//   - else get of probeKey likewise, its body left unread.
//
// A refusal (401, 403), a failure (5xx), no answer, or an answer the options
// do not describe is not ready; the error names the upstream.
func (s *Store) Ping(ctx context.Context) error {
	what := "the readiness probe"
	var err error
	switch {
	case s.list != nil:
		what = "the readiness probe (the first page of list)"
		_, _, err = s.List(ctx, time.Time{}, "")
	case s.stat != nil:
		what = fmt.Sprintf("the readiness probe (stat of %q)", probeKey)
		_, err = s.Stat(ctx, probeKey)
		err = answered(err)
	default:
		what = fmt.Sprintf("the readiness probe (get of %q)", probeKey)
		rc, gerr := s.Get(ctx, probeKey)
		if gerr == nil {
			rc.Close()
		}
		err = answered(gerr)
	}
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "%s: %s", what, description(err))
	}
	return nil
}

// answered drops a NotFound: the upstream answered the probe.
func answered(err error) error {
	var e *adapter.Exception
	if errors.As(err, &e) && e.Kind == adapter.NotFound {
		return nil
	}
	return err
}

// description is an exception's description, else the error.
func description(err error) string {
	var e *adapter.Exception
	if errors.As(err, &e) && e.Description != "" {
		return e.Description
	}
	return err.Error()
}
