package importer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// Entry is what a manifest says of one item; empty fields take the defaults.
type Entry struct {
	Path         string
	PID          string
	FormatID     string
	RightsHolder string
	Access       *adapter.AccessPolicy
	line         int
}

// manifestFields are the columns (CSV) or keys (JSON lines) of a manifest.
var manifestFields = []string{"path", "pid", "formatId", "rightsHolder", "access"}

// LoadManifest reads a manifest: CSV with a header row naming its columns
// (path is required; pid, formatId, rightsHolder and access may be left out
// or empty), or JSON lines ({"path": …, "pid": …, …} one a line), told apart
// by the first character. access is a list of permission:subject rules
// separated by ";", such as "read:public;write:CN=Jane,O=Example,C=US".
// Entries are keyed by path; a path listed twice is an error.
func LoadManifest(file string) (map[string]*Entry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	first, _ := br.Peek(512)
	first = bytes.TrimLeft(bytes.TrimPrefix(first, []byte("\ufeff")), " \t\r\n")
	var entries []*Entry
	if len(first) > 0 && first[0] == '{' {
		entries, err = jsonLines(br)
	} else {
		entries, err = csvRows(br)
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", file, err)
	}
	out := make(map[string]*Entry, len(entries))
	var errs []error
	for _, e := range entries {
		if e.Path == "" {
			errs = append(errs, fmt.Errorf("line %d: no path", e.line))
		} else if prev, ok := out[e.Path]; ok {
			errs = append(errs, fmt.Errorf("line %d: path %q is listed on line %d too", e.line, e.Path, prev.line))
		}
		out[e.Path] = e
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", file, err)
	}
	return out, nil
}

func csvRows(r io.Reader) ([]*Entry, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("the header row: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		known := false
		for _, f := range manifestFields {
			if strings.EqualFold(h, f) {
				col[f], known = i, true
			}
		}
		if !known {
			return nil, fmt.Errorf("the header names the column %q; the columns are %s", h, strings.Join(manifestFields, ", "))
		}
	}
	if _, ok := col["path"]; !ok {
		return nil, errors.New("the header has no path column")
	}
	var out []*Entry
	var errs []error
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		get := func(f string) string {
			if i, ok := col[f]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		e, err := newEntry(line, get("path"), get("pid"), get("formatId"), get("rightsHolder"), get("access"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

func jsonLines(r io.Reader) ([]*Entry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var out []*Entry
	var errs []error
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var v struct {
			Path         string `json:"path"`
			PID          string `json:"pid"`
			FormatID     string `json:"formatId"`
			RightsHolder string `json:"rightsHolder"`
			Access       string `json:"access"`
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %v (the keys are %s)", line, err, strings.Join(manifestFields, ", ")))
			continue
		}
		e, err := newEntry(line, v.Path, v.PID, v.FormatID, v.RightsHolder, v.Access)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

func newEntry(line int, path, pid, formatID, rightsHolder, access string) (*Entry, error) {
	e := &Entry{Path: path, PID: pid, FormatID: formatID, RightsHolder: rightsHolder, line: line}
	if access != "" {
		ap, err := ParseAccess(access)
		if err != nil {
			return nil, fmt.Errorf("line %d: access: %w", line, err)
		}
		e.Access = ap
	}
	return e, nil
}

// ParseAccess reads permission:subject rules separated by ";" (read,
// write or changePermission, then the subject, which may hold ":" and ",").
func ParseAccess(s string) (*adapter.AccessPolicy, error) {
	ap := &adapter.AccessPolicy{}
	for _, rule := range strings.Split(s, ";") {
		rule = strings.TrimSpace(rule)
		if rule == "" {
			continue
		}
		perm, subject, ok := strings.Cut(rule, ":")
		subject = strings.TrimSpace(subject)
		p := adapter.Permission(strings.TrimSpace(perm))
		if !ok || subject == "" {
			return nil, fmt.Errorf("rule %q is not permission:subject", rule)
		}
		if p != adapter.PermRead && p != adapter.PermWrite && p != adapter.PermChangePermission {
			return nil, fmt.Errorf("rule %q: the permission is read, write or changePermission", rule)
		}
		ap.Allow = append(ap.Allow, adapter.AccessRule{Subject: []string{subject}, Permission: []adapter.Permission{p}})
	}
	if len(ap.Allow) == 0 {
		return nil, nil
	}
	if err := adapter.CheckAccessPolicy(ap); err != nil {
		return nil, err
	}
	return ap, nil
}
