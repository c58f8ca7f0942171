package config

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// KeyPaths are every key a configuration file may set, derived from the yaml
// tags of Config: "node", "node.baseURL", "upstreams[].breaker.failures" (a
// list of mappings has "[]" for its items). Keys under a yaml.Node (upstreams[].options)
// belong to the mapping and are not listed; the node itself is.
func KeyPaths() []string {
	var out []string
	var walk func(t reflect.Type, key string)
	walk = func(t reflect.Type, key string) {
		switch {
		case t == yamlNodeType:
		case t.Kind() == reflect.Pointer:
			walk(t.Elem(), key)
			return
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct && t.Elem() != yamlNodeType:
			walk(t.Elem(), key+"[]")
			return
		case t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(textUnmarshalerType):
			if key != "" {
				out = append(out, strings.TrimSuffix(key, "[]"))
			}
			for i := range t.NumField() {
				k, inline, ok := yamlKey(t.Field(i))
				if !ok {
					continue
				}
				child := key
				if !inline {
					child = strings.TrimPrefix(key+"."+k, ".")
				}
				walk(t.Field(i).Type, child)
			}
			return
		}
		if key != "" {
			out = append(out, strings.TrimSuffix(key, "[]"))
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return out
}

// index is a list index in a key path: "[2]".
var index = regexp.MustCompile(`\[[0-9]+\]`)

// Suggest is the known key closest to key (a path such as "node.baseurl" or
// "upstreams[1].breker.failures"), with key's list indexes, or "" when none is
// close: the smallest edit distance, case ignored, over KeyPaths, at most a
// third of key's last segment (and at least 2).
func Suggest(key string) string {
	norm := strings.ToLower(index.ReplaceAllString(key, "[]"))
	last := norm[strings.LastIndexAny(norm, ".]")+1:]
	best, bestD := "", max(2, len(last)/3)+1
	for _, k := range KeyPaths() {
		if d := editDistance(norm, strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	// Put key's own indexes back, in order.
	idx := index.FindAllString(key, -1)
	var b strings.Builder
	for part, rest, found := strings.Cut(best, "[]"); ; part, rest, found = strings.Cut(rest, "[]") {
		b.WriteString(part)
		if !found {
			break
		}
		if len(idx) > 0 {
			b.WriteString(idx[0])
			idx = idx[1:]
		} else {
			b.WriteString("[]")
		}
	}
	return b.String()
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Changed lists the key paths whose values differ between a and b, walking
// Config by its yaml tags, so that a key added later is covered: a leaf key
// ("node.name"), an item's key when two lists of mappings have the same length
// ("upstreams[0].timeout"), else the list ("upstreams"); a yaml.Node
// (upstreams[].options) is compared by content, not by its place in the file.
func Changed(a, b *Config) []string {
	var out []string
	var walk func(x, y reflect.Value, key string)
	walk = func(x, y reflect.Value, key string) {
		t := x.Type()
		switch {
		case t == yamlNodeType:
			if !sameNode(x.Addr().Interface().(*yaml.Node), y.Addr().Interface().(*yaml.Node)) {
				out = append(out, key)
			}
		case t.Kind() == reflect.Pointer:
			if x.IsNil() || y.IsNil() {
				if x.IsNil() != y.IsNil() {
					out = append(out, key)
				}
				return
			}
			walk(x.Elem(), y.Elem(), key)
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			if x.Len() != y.Len() {
				out = append(out, key)
				return
			}
			for i := range x.Len() {
				walk(x.Index(i), y.Index(i), key+"["+strconv.Itoa(i)+"]")
			}
		case t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(textUnmarshalerType):
			for i := range t.NumField() {
				k, inline, ok := yamlKey(t.Field(i))
				if !ok {
					continue
				}
				child := key
				if !inline {
					child = strings.TrimPrefix(key+"."+k, ".")
				}
				walk(x.Field(i), y.Field(i), child)
			}
		default:
			if !reflect.DeepEqual(x.Interface(), y.Interface()) {
				out = append(out, key)
			}
		}
	}
	walk(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "")
	return out
}

// sameNode compares two YAML nodes by kind, tag and values, not by position,
// style or comments.
func sameNode(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Value != b.Value || a.ShortTag() != b.ShortTag() && a.Kind != 0 {
		return false
	}
	if a.Kind == yaml.AliasNode {
		return sameNode(a.Alias, b.Alias)
	}
	return slices.EqualFunc(a.Content, b.Content, sameNode)
}
