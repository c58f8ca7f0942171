package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load builds the configuration: Default, then the YAML file at path (skipped
// when path is empty), then the environment read through getenv (nil reads
// none). It does not validate; call Validate on the result.
//
// The file is decoded strictly: an unknown or repeated key is an error. File
// errors name the file, and where possible the line and the key; environment
// errors name the variable. Every environment problem is reported, joined,
// with the configuration built as far as it goes (those keys keep their file
// or default values), so that config check can report the rest too; a file
// error returns no configuration.
func Load(path string, getenv func(string) string) (*Config, error) {
	c := Default()
	if path != "" {
		if err := c.decodeFile(path); err != nil {
			return nil, err
		}
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	_, errs := applyEnv(reflect.ValueOf(c).Elem(), envRoot, getenv)
	return c, errors.Join(errs...)
}

// decodeFile decodes the YAML file at path over c. An empty file (or one holding
// only comments) changes nothing; more than one document is refused.
func (c *Config) decodeFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fileError(path, data, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return fileError(path, data, err)
	default:
		return fmt.Errorf("%s:%d: a second YAML document; the configuration is one document", path, extra.Line)
	}
}

// fileError prefixes a decoding error with the file name. A *yaml.TypeError
// (unknown keys, repeated keys, values of the wrong type) becomes one error per
// problem, each as "file:line: key: message" when the line holds a single key.
func fileError(path string, data []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", path, err)
	}
	keys := keysByLine(data)
	errs := make([]error, 0, len(te.Errors))
	for _, msg := range te.Errors {
		errs = append(errs, lineError(path, keys, msg))
	}
	return errors.Join(errs...)
}

// lineError formats one yaml.TypeError entry, which has the form "line N: msg".
func lineError(path string, keys map[int][]string, msg string) error {
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return fmt.Errorf("%s: %s", path, msg)
	}
	num, text, ok := strings.Cut(rest, ": ")
	line, err := strconv.Atoi(num)
	if !ok || err != nil {
		return fmt.Errorf("%s: %s", path, msg)
	}
	if key := unknownKey(keys[line], text); key != "" {
		if near := Suggest(key); near != "" {
			return fmt.Errorf("%s:%d: unknown key %s; did you mean %s?", path, line, key, near)
		}
		return fmt.Errorf("%s:%d: unknown key %s", path, line, key)
	}
	if key := lineKey(keys[line]); key != "" {
		return fmt.Errorf("%s:%d: %s: %s", path, line, key, text)
	}
	return fmt.Errorf("%s:%d: %s", path, line, text)
}

// unknownKey is the path of the key yaml's "field NAME not found in type T"
// is about, among the key paths of its line; "" for another message.
func unknownKey(keys []string, text string) string {
	name, ok := strings.CutPrefix(text, "field ")
	if !ok {
		return ""
	}
	if name, _, ok = strings.Cut(name, " not found in type "); !ok {
		return ""
	}
	for _, k := range keys {
		if k == name || strings.HasSuffix(k, "."+name) {
			return k
		}
	}
	return ""
}

// lineKey picks the key a line is about: the shortest of its key paths, when
// every other one lies under it (node.sbmitters for "sbmitters: [a, b]"), and
// "" when the line mixes unrelated keys.
func lineKey(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	top := slices.MinFunc(keys, func(a, b string) int { return cmp.Compare(len(a), len(b)) })
	for _, k := range keys {
		if k != top && !strings.HasPrefix(k, top+".") && !strings.HasPrefix(k, top+"[") {
			return ""
		}
	}
	return top
}

// keysByLine maps each line of a YAML document to the key paths (node.id,
// roles[1]) of the keys and scalar values written on it.
func keysByLine(data []byte) map[int][]string {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	lines := make(map[int][]string)
	add := func(line int, key string) {
		for _, k := range lines[line] {
			if k == key {
				return
			}
		}
		lines[line] = append(lines[line], key)
	}
	var walk func(n *yaml.Node, key string)
	walk = func(n *yaml.Node, key string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, key)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if key != "" {
					k = key + "." + k
				}
				add(n.Content[i].Line, k)
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, key+"["+strconv.Itoa(i)+"]")
			}
		case yaml.ScalarNode:
			if key != "" {
				add(n.Line, key)
			}
		}
	}
	walk(&root, "")
	return lines
}
