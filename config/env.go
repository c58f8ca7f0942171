package config

import (
	"encoding"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the name of every environment variable Load reads.
const EnvPrefix = "D1BRIDGE_"

// envRoot is the name the top-level keys are appended to, with "_".
const envRoot = "D1BRIDGE"

// fileSuffix marks the variant of a variable whose value names a file holding
// the value.
const fileSuffix = "_FILE"

var (
	durationType        = reflect.TypeFor[time.Duration]()
	yamlNodeType        = reflect.TypeFor[yaml.Node]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// applyEnv overrides v from the environment, v being addressable and name the
// variable for v itself (envRoot for the whole Config). It walks structs by
// their yaml keys, sets scalars and lists of scalars, allocates a nil pointer
// only when a variable below it is set, and skips what the environment cannot
// express: maps, interfaces, yaml.Node and slices of structs. It reports
// whether anything was set, and every problem met.
func applyEnv(v reflect.Value, name string, getenv func(string) string) (set bool, errs []error) {
	t := v.Type()
	switch {
	case t == yamlNodeType:
		return false, nil
	case isEnvScalar(t) || isEnvList(t):
		raw, source, ok, err := lookupEnv(name, getenv)
		if err != nil {
			return false, []error{err}
		}
		if !ok {
			return false, nil
		}
		if err := setFromString(v, raw); err != nil {
			return false, []error{fmt.Errorf("%s: %w", source, err)}
		}
		return true, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			key, inline, ok := yamlKey(t.Field(i))
			if !ok {
				continue
			}
			child := name
			if !inline {
				child = name + "_" + envName(key)
			}
			s, e := applyEnv(v.Field(i), child, getenv)
			set = set || s
			errs = append(errs, e...)
		}
		return set, errs
	case reflect.Pointer:
		if !v.IsNil() {
			return applyEnv(v.Elem(), name, getenv)
		}
		p := reflect.New(t.Elem())
		set, errs = applyEnv(p.Elem(), name, getenv)
		if set && len(errs) == 0 {
			v.Set(p)
		}
		return set, errs
	default:
		return false, nil
	}
}

// yamlKey returns the key yaml uses for f, whether f is inlined into its parent,
// and false when yaml ignores f.
func yamlKey(f reflect.StructField) (key string, inline, ok bool) {
	tag := f.Tag.Get("yaml")
	if tag == "-" {
		return "", false, false
	}
	key, opts, _ := strings.Cut(tag, ",")
	inline = slices.Contains(strings.Split(opts, ","), "inline")
	// Like yaml, read an unexported field only when it is an inlined embedded
	// struct: its exported fields are still settable.
	if !f.IsExported() && !(f.Anonymous && inline) {
		return "", false, false
	}
	if inline {
		return "", true, true
	}
	if key == "" {
		key = strings.ToLower(f.Name)
	}
	return key, false, true
}

// envName upper-cases a yaml key, replacing what cannot appear in a portable
// variable name with "_".
func envName(key string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		default:
			return '_'
		}
	}, key)
}

// isEnvScalar reports whether one variable can hold a value of type t.
func isEnvScalar(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// isEnvList reports whether t is a list the environment can hold: a slice of
// scalars other than bytes.
func isEnvList(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && isEnvScalar(t.Elem())
}

// lookupEnv reads name, or the file named by name_FILE. An empty variable counts
// as unset. source describes where the value came from, for error messages; a
// value read from a file is never quoted in them, since it may be a secret.
func lookupEnv(name string, getenv func(string) string) (raw, source string, ok bool, err error) {
	fileName := name + fileSuffix
	val, file := getenv(name), getenv(fileName)
	switch {
	case val != "" && file != "":
		return "", "", false, fmt.Errorf("%s and %s are both set; set only one", name, fileName)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", "", false, fmt.Errorf("%s: %w", fileName, err)
		}
		return strings.TrimRight(string(b), "\r\n"), fmt.Sprintf("%s (%s)", fileName, file), true, nil
	case val != "":
		return val, fmt.Sprintf("%s=%q", name, val), true, nil
	}
	return "", "", false, nil
}

// setFromString parses raw into v, which must be addressable and of a type
// accepted by isEnvScalar or isEnvList.
func setFromString(v reflect.Value, raw string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(raw))
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Bool:
		switch strings.ToLower(raw) {
		case "true", "1":
			v.SetBool(true)
		case "false", "0":
			v.SetBool(false)
		default:
			return errors.New("not a boolean (true, false, 1 or 0)")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t == durationType {
			d, err := time.ParseDuration(raw)
			if err != nil {
				return errors.New("not a duration such as 30s or 1m30s")
			}
			v.SetInt(int64(d))
			return nil
		}
		n, err := strconv.ParseInt(raw, 10, t.Bits())
		if err != nil {
			return numberError(err, "an integer")
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(raw, 10, t.Bits())
		if err != nil {
			return numberError(err, "a non-negative integer")
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(raw, t.Bits())
		if err != nil {
			return numberError(err, "a number")
		}
		v.SetFloat(f)
	case reflect.Slice:
		items, err := splitList(raw)
		if err != nil {
			return err
		}
		s := reflect.MakeSlice(t, len(items), len(items))
		for i, item := range items {
			if err := setFromString(s.Index(i), item); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		v.Set(s)
	default:
		return fmt.Errorf("cannot set a %s from the environment", t)
	}
	return nil
}

func numberError(err error, what string) error {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%s out of range", what)
	}
	return fmt.Errorf("not %s", what)
}

// splitList splits a list value: comma-separated items with surrounding spaces
// trimmed or, when the value starts with "[", a YAML flow sequence, for items
// that contain commas (LDAP distinguished names):
//
//	mn, cn
//	["CN=Jane Admin,O=Example,DC=org", "CN=Joe Admin,O=Example,DC=org"]
func splitList(raw string) ([]string, error) {
	if s := strings.TrimSpace(raw); strings.HasPrefix(s, "[") {
		var items []string
		if err := yaml.Unmarshal([]byte(s), &items); err != nil {
			return nil, errors.New(`not a list in YAML flow form (["a", "b"])`)
		}
		return items, nil
	}
	items := strings.Split(raw, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items, nil
}
