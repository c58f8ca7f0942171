package datacite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// errorLimit bounds how much of an error answer is read.
const errorLimit = 64 << 10

// answer is DataCite's refusal: its status and the JSON:API errors it gave
// ({"errors": [{"status", "source", "uid", "title"}]}). It is the cause of the
// exception, logged, never rendered; its text is in the description.
type answer struct {
	Status int
	Errors []apiError
	Body   string // when the body was not a JSON:API error document
}

type apiError struct {
	Status string `json:"status,omitempty"`
	Source string `json:"source,omitempty"`
	UID    string `json:"uid,omitempty"`
	Title  string `json:"title"`
}

func (a *answer) Error() string { return fmt.Sprintf("HTTP %d: %s", a.Status, a.text()) }

// text is the errors as one line: "source: title; title".
func (a *answer) text() string {
	if len(a.Errors) == 0 {
		if a.Body == "" {
			return http.StatusText(a.Status)
		}
		return a.Body
	}
	parts := make([]string, 0, len(a.Errors))
	for _, e := range a.Errors {
		t := e.Title
		if e.Source != "" {
			t = e.Source + ": " + t
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, "; ")
}

// refused turns an answer that is not a success into a ServiceFailure that
// names DataCite and quotes its errors, and closes the body.
func (s *Service) refused(resp *http.Response, what string) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, errorLimit))
	a := &answer{Status: resp.StatusCode}
	var d struct {
		Errors []apiError `json:"errors"`
	}
	if json.Unmarshal(b, &d) == nil && len(d.Errors) > 0 {
		a.Errors = d.Errors
	} else {
		a.Body = strings.Join(strings.Fields(string(b)), " ")
		if len(a.Body) > 200 {
			a.Body = a.Body[:200] + "…"
		}
	}
	name := s.c.Name()
	switch st := resp.StatusCode; {
	case st == http.StatusUnauthorized:
		return adapter.Wrap(adapter.ServiceFailure, a, "DataCite (upstream %q) refused the repository's credentials (HTTP 401) when %s: %s", name, what, a.text())
	case st == http.StatusForbidden:
		return adapter.Wrap(adapter.ServiceFailure, a, "DataCite (upstream %q) did not allow %s (HTTP 403; does the repository hold prefix %s?): %s", name, what, s.prefix, a.text())
	case st == http.StatusTooManyRequests:
		return adapter.Wrap(adapter.ServiceFailure, a, "DataCite (upstream %q) is overloaded (HTTP 429) and refused %s", name, what)
	case st >= 500:
		return adapter.Wrap(adapter.ServiceFailure, a, "DataCite (upstream %q) failed (HTTP %d) when %s: %s", name, st, what, a.text())
	}
	return adapter.Wrap(adapter.ServiceFailure, a, "DataCite (upstream %q) refused %s (HTTP %d): %s", name, what, resp.StatusCode, a.text())
}

// unreachable is a transport failure (or an open breaker) as a ServiceFailure
// that names DataCite.
func (s *Service) unreachable(err error, what string) error {
	e := adapter.AsException(s.c.Error(err, what))
	return adapter.Wrap(adapter.ServiceFailure, e, "DataCite: %s", e.Description)
}

// taken reports whether err is DataCite saying the DOI already exists.
func taken(err error) bool {
	var a *answer
	if !errors.As(err, &a) {
		return false
	}
	for _, e := range a.Errors {
		if strings.Contains(strings.ToLower(e.Title), "already been taken") {
			return true
		}
	}
	return false
}
