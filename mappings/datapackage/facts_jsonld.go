package datapackage

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Readers of the schema.org JSON-LD documents: a science-on-schema.org
// Dataset and an RO-Crate's ro-crate-metadata.json, whose root data entity is
// a schema.org Dataset too. They read the JSON as it is written (compacted,
// as both guides ask), not through a JSON-LD processor.

// jsonNode is a JSON object of a JSON-LD document.
type jsonNode = map[string]any

// jsonGraph is a JSON-LD document's nodes, and those that have an @id by it,
// to resolve references such as {"@id": "#alice"}.
type jsonGraph struct {
	nodes []jsonNode
	byID  map[string]jsonNode
}

func parseJSONLD(format string, body []byte) (jsonGraph, error) {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return jsonGraph{}, fmt.Errorf("%s: not valid JSON: %w", format, err)
	}
	var nodes []jsonNode
	switch doc := doc.(type) {
	case jsonNode:
		if graph, ok := doc["@graph"]; ok {
			list, ok := graph.([]any)
			if !ok {
				return jsonGraph{}, fmt.Errorf("%s: @graph is not a list", format)
			}
			for _, v := range list {
				if n, ok := v.(jsonNode); ok {
					nodes = append(nodes, n)
				}
			}
		} else {
			nodes = []jsonNode{doc}
		}
	case []any:
		for _, v := range doc {
			if n, ok := v.(jsonNode); ok {
				nodes = append(nodes, n)
			}
		}
	default:
		return jsonGraph{}, fmt.Errorf("%s: the document is a JSON %T, not an object", format, doc)
	}
	g := jsonGraph{nodes: nodes, byID: map[string]jsonNode{}}
	for _, n := range nodes {
		if id := jsonString(n["@id"]); id != "" {
			if _, dup := g.byID[id]; !dup {
				g.byID[id] = n
			}
		}
	}
	return g, nil
}

func readSchemaOrg(body []byte) (Facts, error) {
	const format = "schema.org JSON-LD"
	g, err := parseJSONLD(format, body)
	if err != nil {
		return Facts{}, err
	}
	for _, n := range g.nodes {
		if hasType(n, "Dataset") {
			return g.datasetFacts(n), nil
		}
	}
	return Facts{}, fmt.Errorf("%s: no node of @type Dataset", format)
}

func readROCrate(body []byte) (Facts, error) {
	const format = "RO-Crate"
	g, err := parseJSONLD(format, body)
	if err != nil {
		return Facts{}, err
	}
	// The metadata descriptor names the root data entity by "about"; "./"
	// is what crates almost always call it.
	rootID := "./"
	for _, name := range []string{roCrateName, "ro-crate-metadata.jsonld"} {
		if desc, ok := g.byID[name]; ok {
			if about := jsonString(idOf(desc["about"])); about != "" {
				rootID = about
			}
			break
		}
	}
	root, ok := g.byID[rootID]
	if !ok {
		return Facts{}, fmt.Errorf("%s: no root data entity %q in @graph", format, rootID)
	}
	return g.datasetFacts(root), nil
}

// datasetFacts reads a schema.org Dataset node.
func (g jsonGraph) datasetFacts(ds jsonNode) Facts {
	f := Facts{
		Title:     jsonString(ds["name"]),
		Abstract:  jsonString(ds["description"]),
		Published: parseDate(jsonString(ds["datePublished"])),
		Modified:  parseDate(jsonString(ds["dateModified"])),
		Landing:   jsonString(ds["url"]),
		Publisher: g.name(ds["publisher"]),
	}
	creators := jsonList(ds["creator"])
	if len(creators) == 0 {
		creators = jsonList(ds["author"]) // RO-Crate's word for it
	}
	for _, c := range creators {
		if p := g.party(c); isNameable(p) {
			f.Creators = append(f.Creators, p)
		}
	}
	if kw, ok := ds["keywords"].(string); ok {
		f.Keywords = splitKeywords(kw)
	} else {
		for _, k := range jsonList(ds["keywords"]) {
			if v := firstNonBlank(jsonString(k), g.name(k)); v != "" {
				f.Keywords = append(f.Keywords, v)
			}
		}
	}
	for _, l := range jsonList(ds["license"]) {
		if s, ok := l.(string); ok {
			f.License = clean(s)
		} else if n, ok := g.resolve(l).(jsonNode); ok {
			f.License = firstNonBlank(jsonString(n["name"]), jsonString(n["url"]), jsonString(n["@id"]))
			f.LicenseURL = firstNonBlank(jsonString(n["url"]), jsonString(n["@id"]))
		}
		if f.LicenseURL == "" && isURL(f.License) {
			f.LicenseURL = f.License
		}
		if !isURL(f.LicenseURL) {
			f.LicenseURL = ""
		}
		if f.License != "" {
			break
		}
	}
	for _, id := range jsonList(ds["identifier"]) {
		v := jsonString(id)
		if n, ok := id.(jsonNode); ok {
			// A PropertyValue: its value, else its url.
			v = firstNonBlank(jsonString(n["value"]), jsonString(n["url"]), jsonString(n["@id"]))
		}
		if v != "" {
			f.Identifier = v
			break
		}
	}
	if f.Identifier == "" {
		if id := jsonString(ds["@id"]); doiOf(id) != "" {
			f.Identifier = id
		}
	}
	if doi := doiOf(f.Identifier); doi != "" {
		f.Identifier = "doi:" + doi
	}
	return f
}

// party reads a creator: a Person or an Organization, inline or by @id, or
// a Role that wraps one (science-on-schema.org's way to order creators).
func (g jsonGraph) party(v any) Party {
	switch n := g.resolve(v).(type) {
	case string:
		return Party{Name: clean(n)}
	case jsonNode:
		if hasType(n, "Role") {
			for _, key := range []string{"creator", "author"} {
				if inner, ok := n[key]; ok {
					return g.party(inner)
				}
			}
			return Party{}
		}
		email := strings.TrimPrefix(jsonString(n["email"]), "mailto:")
		if hasType(n, "Organization") || hasType(n, "ResearchOrganization") {
			return Party{Organization: jsonString(n["name"]), Email: email}
		}
		p := person(jsonString(n["name"]), jsonString(n["givenName"]), jsonString(n["familyName"]))
		p.Email = email
		p.Organization = g.name(n["affiliation"])
		// The ORCID is the Person's @id, its identifier (a string or a
		// PropertyValue) or one of its sameAs.
		candidates := []any{n["@id"], n["url"]}
		for _, id := range jsonList(n["identifier"]) {
			if idn, ok := id.(jsonNode); ok {
				candidates = append(candidates, idn["value"], idn["url"], idn["@id"])
			} else {
				candidates = append(candidates, id)
			}
		}
		candidates = append(candidates, jsonList(n["sameAs"])...)
		for _, c := range candidates {
			if s := jsonString(c); strings.Contains(strings.ToLower(s), "orcid") || orcidPattern.MatchString(s) && !isURL(s) {
				if o := orcidURL(s); o != "" {
					p.ORCID = o
					break
				}
			}
		}
		return p
	}
	return Party{}
}

// name is the name of v: a string, or a node's (inline or by @id) name.
func (g jsonGraph) name(v any) string {
	for _, item := range jsonList(v) {
		switch n := g.resolve(item).(type) {
		case string:
			if s := clean(n); s != "" {
				return s
			}
		case jsonNode:
			if s := jsonString(n["name"]); s != "" {
				return s
			}
		}
	}
	return ""
}

// resolve is the node a reference {"@id": …} names in the graph; v itself
// when it is not a reference or names no node of the graph.
func (g jsonGraph) resolve(v any) any {
	if n, ok := v.(jsonNode); ok && len(n) == 1 {
		if target, ok := g.byID[jsonString(n["@id"])]; ok {
			return target
		}
	}
	return v
}

// idOf is a reference's @id, or v when it is a plain string.
func idOf(v any) any {
	if n, ok := v.(jsonNode); ok {
		return n["@id"]
	}
	return v
}

// hasType tells whether node n has type t of schema.org, by its bare name, a
// "schema:" prefix or the schema.org IRI.
func hasType(n jsonNode, t string) bool {
	for _, v := range jsonList(n["@type"]) {
		s, _ := v.(string)
		for _, prefix := range []string{"schema:", "http://schema.org/", "https://schema.org/"} {
			s = strings.TrimPrefix(s, prefix)
		}
		if s == t {
			return true
		}
	}
	return false
}

// jsonList is v as a list: a list, an @list object's list, one value, or
// none for null.
func jsonList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	case jsonNode:
		if list, ok := v["@list"].([]any); ok {
			return list
		}
	}
	return []any{v}
}

// jsonString is the text of v: a string, a number, a value object's
// @value, or the first such of a list; trimmed.
func jsonString(v any) string {
	switch v := v.(type) {
	case string:
		return clean(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case jsonNode:
		if val, ok := v["@value"]; ok {
			return jsonString(val)
		}
	case []any:
		for _, item := range v {
			if s := jsonString(item); s != "" {
				return s
			}
		}
	}
	return ""
}
