package oaipmh

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// OAI error codes with a meaning of their own.
const (
	codeNoRecordsMatch     = "noRecordsMatch"
	oaiNamespace           = "http://www.openarchives.org/OAI/2.0/"
	codeBadResumptionToken = "badResumptionToken"
)

// record is one record of a ListRecords page.
type record struct {
	id, datestamp string
	deleted       bool
	metadata      *element // nil: deleted, or no metadata
}

// Walk calls fn with each record of the endpoint changed at or after since,
// in the endpoint's order.
func (s *Source) Walk(ctx context.Context, since time.Time, fn func(*node.Dataset) error) error {
	prefix := s.prefix
	if prefix == "" {
		var err error
		if prefix, err = s.bestPrefix(ctx); err != nil {
			return err
		}
	}
	args := url.Values{"metadataPrefix": {prefix}}
	if s.set != "" {
		args.Set("set", s.set)
	}
	if !since.IsZero() {
		day, err := s.dayGranularity(ctx)
		if err != nil {
			return err
		}
		if day {
			args.Set("from", since.UTC().Format(time.DateOnly))
		} else {
			args.Set("from", since.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
	seen := map[string]bool{}
	for {
		records, token, err := s.listRecords(ctx, args)
		if err != nil {
			return err
		}
		for _, r := range records {
			if err := fn(s.dataset(ctx, r)); err != nil {
				return err
			}
		}
		if token == "" {
			return nil
		}
		if seen[token] {
			return adapter.Errorf(adapter.ServiceFailure, "upstream %q: ListRecords gave the resumption token %q twice: the walk would not end", s.c.Name(), token)
		}
		seen[token] = true
		args = url.Values{"resumptionToken": {token}}
	}
}

// listRecords asks one page of ListRecords: its records, and the resumption
// token of the next ("" after the last).
func (s *Source) listRecords(ctx context.Context, args url.Values) (records []record, token string, err error) {
	resumed := args.Has("resumptionToken")
	args.Set("verb", "ListRecords")
	err = s.call(ctx, "ListRecords", args, func(p *page) error {
		answered := false // a ListRecords element in an OAI-PMH answer
		for {
			t, off, err := p.next()
			if err == io.EOF {
				if !answered && len(p.errs) == 0 {
					// A maintenance page, a proxy's answer: taken for an empty
					// list, it would archive every dataset at the next full pass.
					return adapter.Errorf(adapter.ServiceFailure, "upstream %q: the answer to ListRecords is not an OAI-PMH ListRecords response", s.c.Name())
				}
				return nil
			}
			if err != nil {
				return err
			}
			start, ok := t.(xml.StartElement)
			if !ok {
				continue
			}
			switch depth := len(p.stack); {
			case depth == 1:
				if ns, _ := p.resolve(start.Name.Space); start.Name.Local != "OAI-PMH" || ns != oaiNamespace {
					return adapter.Errorf(adapter.ServiceFailure, "upstream %q: the answer to ListRecords is not an OAI-PMH response (its root is %s)", s.c.Name(), qname(start.Name))
				}
			case depth == 2 && start.Name.Local == "ListRecords":
				answered = true
			case depth == 3 && start.Name.Local == "record":
				p.rec.trim(off)
				r, err := p.record()
				if err != nil {
					return err
				}
				records = append(records, r)
			case depth == 3 && start.Name.Local == "resumptionToken":
				if token, err = p.text(); err != nil {
					return err
				}
			case depth > 2:
				if err := p.skip(); err != nil {
					return err
				}
			}
		}
	})
	var e *oaiError
	if errors.As(err, &e) && e.code == codeNoRecordsMatch {
		if resumed {
			// The protocol allows only badResumptionToken for a token: the
			// server lost its cursor, and the rest of the list is unknown.
			return nil, "", adapter.Errorf(adapter.ServiceFailure, "upstream %q answered noRecordsMatch to a resumption token: the list broke off; the next pass lists again", s.c.Name())
		}
		return nil, "", nil
	}
	return records, token, err
}

// record reads the record just started.
func (p *page) record() (record, error) {
	var r record
	depth := len(p.stack)
	for {
		t, off, err := p.next()
		if err != nil {
			return r, err
		}
		if len(p.stack) < depth {
			return r, nil
		}
		start, ok := t.(xml.StartElement)
		if !ok {
			continue
		}
		switch {
		case len(p.stack) == depth+1 && start.Name.Local == "header":
			for _, a := range start.Attr {
				if a.Name.Space == "" && a.Name.Local == "status" && a.Value == "deleted" {
					r.deleted = true
				}
			}
		case len(p.stack) == depth+2 && start.Name.Local == "identifier":
			if r.id, err = p.text(); err != nil {
				return r, err
			}
		case len(p.stack) == depth+2 && start.Name.Local == "datestamp":
			if r.datestamp, err = p.text(); err != nil {
				return r, err
			}
		case len(p.stack) == depth+2 && p.stack[depth].name.Local == "metadata" && r.metadata == nil:
			if r.metadata, err = p.cut(start, off); err != nil {
				return r, err
			}
		case len(p.stack) > depth+1:
			if err := p.skip(); err != nil {
				return r, err
			}
		}
	}
}

// dataset is the Dataset of record r, with the files its landing page links.
func (s *Source) dataset(ctx context.Context, r record) *node.Dataset {
	d := &node.Dataset{ID: r.id, Version: r.datestamp, Deleted: r.deleted}
	var err error
	if d.Modified, err = parseDatestamp(r.datestamp); err != nil {
		d.Problem = fmt.Errorf("record %q: datestamp %q: %w", r.id, r.datestamp, err)
	}
	if r.id == "" {
		d.Problem = errors.New("a record has no identifier")
	}
	if r.deleted || r.metadata == nil || d.Problem != nil {
		return d
	}
	m := r.metadata
	doc := &node.Document{Body: m.body, FormatID: formatOf(m)}
	d.Metadata = doc
	if doc.FormatID != "" {
		if d.Facts, err = datapackage.ReadFacts(doc.FormatID, doc.Body); err != nil {
			d.Problem = fmt.Errorf("record %q: reading its metadata (%s): %w", r.id, doc.FormatID, err)
			return d
		}
	}
	landing := d.Facts.Landing
	if landing == "" {
		landing = landingPage(m.identifiers)
		d.Facts.Landing = landing
	}
	if s.files == FilesSignposting && landing != "" {
		d.Files, d.Problem = s.signposts(ctx, landing)
	}
	return d
}

// formatOf is the DataONE format of a record's metadata: sniffed, else by
// its root's namespace when that is a format's own.
func formatOf(m *element) string {
	if f := datapackage.Sniff("", m.body); f != "" {
		return f
	}
	switch ns := m.space; {
	case ns == datapackage.FormatOAIDC, ns == datapackage.FormatISO19139:
		return ns
	case strings.HasPrefix(ns, "eml://ecoinformatics.org/eml-2."), strings.HasPrefix(ns, "https://eml.ecoinformatics.org/eml-2."):
		return ns
	}
	return ""
}

// landingPage is the first http(s) URL among a record's identifiers, else
// its first DOI's resolver URL; "" when it has neither.
func landingPage(ids []string) string {
	for _, id := range ids {
		if u, err := url.Parse(id); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			return id
		}
	}
	for _, id := range ids {
		lower := strings.ToLower(id)
		for _, p := range []string{"doi:", "info:doi/", ""} {
			if doi, ok := strings.CutPrefix(lower, p); ok && strings.HasPrefix(doi, "10.") && strings.Contains(doi, "/") {
				return "https://doi.org/" + id[len(p):]
			}
		}
	}
	return ""
}

// parseDatestamp reads an OAI datestamp: a day or a UTC second (RFC 3339,
// leniently).
func parseDatestamp(s string) (time.Time, error) {
	if len(s) == len(time.DateOnly) {
		return time.Parse(time.DateOnly, s)
	}
	return time.Parse(time.RFC3339Nano, s)
}

// bestPrefix is the metadata prefix the endpoint offers that DataONE indexes
// best.
func (s *Source) bestPrefix(ctx context.Context) (string, error) {
	offered := map[string]string{} // lower case -> as offered
	err := s.call(ctx, "ListMetadataFormats", url.Values{"verb": {"ListMetadataFormats"}}, func(p *page) error {
		for {
			t, _, err := p.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if start, ok := t.(xml.StartElement); ok && start.Name.Local == "metadataPrefix" {
				v, err := p.text()
				if err != nil {
					return err
				}
				offered[strings.ToLower(v)] = v
			}
		}
	})
	if err != nil {
		return "", err
	}
	for _, want := range preferred {
		if v, ok := offered[want]; ok {
			return v, nil
		}
	}
	return "oai_dc", nil // which OAI-PMH requires of every endpoint
}

// dayGranularity tells whether the endpoint's datestamps are days, by
// Identify.
func (s *Source) dayGranularity(ctx context.Context) (bool, error) {
	var g string
	err := s.call(ctx, "Identify", url.Values{"verb": {"Identify"}}, func(p *page) error {
		for {
			t, _, err := p.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if start, ok := t.(xml.StartElement); ok && start.Name.Local == "granularity" {
				if g, err = p.text(); err != nil {
					return err
				}
			}
		}
	})
	return g == "YYYY-MM-DD", err
}

// call asks the endpoint for verb with args and parses the answer with
// parse, within the upstream's timeout. An OAI error in the answer is an
// *oaiError when its code is noRecordsMatch, else a ServiceFailure naming
// it.
func (s *Source) call(ctx context.Context, op string, args url.Values, parse func(*page) error) error {
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	u := *s.base
	q := u.Query()
	for k, v := range args {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	what := "OAI-PMH " + op
	req, err := http.NewRequestWithContext(upstream.WithOperation(ctx, op), http.MethodGet, u.String(), nil)
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q: no valid %s request", s.c.Name(), op)
	}
	req.Header.Set("Accept", "text/xml, application/xml")
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return s.c.Error(err, what)
	}
	if resp.StatusCode != http.StatusOK {
		return s.c.Exception(resp, what)
	}
	defer resp.Body.Close()
	p := newPage(resp.Body)
	err = parse(p)
	errs := p.errs
	if err != nil && len(errs) == 0 {
		var syn *xml.SyntaxError
		switch {
		case ctx.Err() != nil:
			return s.c.Error(err, what)
		case errors.Is(err, errPageTooLarge):
			return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q: the answer to %s is larger than %d MiB", s.c.Name(), what, maxPage>>20)
		case errors.Is(err, errTooDeep):
			return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q: the answer to %s nests elements deeper than %d", s.c.Name(), what, maxDepth)
		case errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF):
			return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q: the answer to %s is not well-formed XML", s.c.Name(), what)
		}
		return s.c.Error(err, what)
	}
	if len(errs) == 1 && errs[0].code == codeNoRecordsMatch {
		return &errs[0] // an empty list; with other errors, an error
	}
	if len(errs) > 0 {
		e := errs[0]
		if e.code == codeBadResumptionToken {
			return adapter.Errorf(adapter.ServiceFailure, "upstream %q refused its own resumption token (badResumptionToken: %s): it may have expired; the next pass starts again", s.c.Name(), e.message)
		}
		var more string
		if len(errs) > 1 {
			more = fmt.Sprintf(" (and %d more errors)", len(errs)-1)
		}
		return adapter.Errorf(adapter.ServiceFailure, "upstream %q answered %s with the OAI-PMH error %s: %s%s", s.c.Name(), op, e.code, e.message, more)
	}
	return nil
}

func (e *oaiError) Error() string { return e.code + ": " + e.message }
