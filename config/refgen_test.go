package config

// The generator of REFERENCE.md: every key of the configuration with its type,
// default, environment variable and meaning. Keys, types, defaults and
// variables come from the types themselves, walked by their yaml tags the way
// KeyPaths and applyEnv walk them; meanings come from the doc comments of the
// fields, read from the source with go/parser and go/doc. The options of the
// mappings (upstreams[].options) are read from the source of their packages
// (optionSources). reference_test.go checks the file and the comments;
// `go test ./config -run TestReference -update` rewrites it.

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// regenerate is the command that rewrites REFERENCE.md.
const regenerate = "go test ./config -run TestReference -update"

// refKey is one key of the reference.
type refKey struct {
	path    string // node.baseURL, upstreams[].retry.max, upstreams[].options.bucket
	typ     string // string, integer, duration, list of strings, mapping, ...
	def     string // the default, as YAML would write it; "" for none
	env     string // the environment variable; "" when the key cannot be set from it
	prefix  string // for a mapping: the variable its keys' variables start with
	doc     string // the field's doc comment, on one line
	goField string // Type.Field, to name the field in test failures
	section bool   // a mapping of keys, listed under its own heading
	intro   string // for a section: its type's doc comment
	goType  string // for a section: its Go type (of its items, for a list)
}

// refSection is a heading of the reference and the keys under it.
type refSection struct {
	key  refKey // the section's own key; path "" for the top level
	keys []refKey
	// options is the upstream type whose options these are ("" for Config).
	options string
}

// goDocs are the doc comments of a package's struct types and of their fields.
type goDocs struct {
	types  map[string]string            // type name: doc
	fields map[string]map[string]string // type name: field name: doc
	specs  map[string]ast.Expr          // type name: its type expression
	consts map[string]string            // constant name: its value, when a literal
	funcs  []*ast.FuncDecl
	// options are the entries of the package doc's list of options
	// ("Options (upstreams[].options):"), by key.
	options map[string]string
}

// readDocs parses the non-test Go files of dir.
func readDocs(dir string) (*goDocs, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	d := &goDocs{types: map[string]string{}, fields: map[string]map[string]string{},
		specs: map[string]ast.Expr{}, consts: map[string]string{}}
	pkg, err := doc.NewFromFiles(fset, files, "example.org/"+filepath.Base(dir), doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	for _, t := range pkg.Types {
		d.types[t.Name] = oneLine(t.Doc)
	}
	d.options = docOptions(pkg.Doc)
	for _, f := range files {
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				d.funcs = append(d.funcs, decl)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						d.specs[spec.Name.Name] = spec.Type
						st, ok := spec.Type.(*ast.StructType)
						if !ok {
							continue
						}
						keys := yamlNames(st)
						docs := map[string]string{}
						for _, field := range st.Fields.List {
							text := ""
							if field.Doc != nil {
								text = yamlWords(oneLine(field.Doc.Text()), keys)
							}
							for _, n := range field.Names {
								docs[n.Name] = text
							}
							if len(field.Names) == 0 { // embedded
								docs[embeddedName(field.Type)] = text
							}
						}
						d.fields[spec.Name.Name] = docs
						d.types[spec.Name.Name] = yamlWords(d.types[spec.Name.Name], keys)
					case *ast.ValueSpec:
						for i, n := range spec.Names {
							if i < len(spec.Values) {
								if lit, ok := spec.Values[i].(*ast.BasicLit); ok {
									d.consts[n.Name] = literal(lit)
								}
							}
						}
					}
				}
			}
		}
	}
	return d, nil
}

// yamlNames maps the Go names of a struct's fields to their yaml keys.
func yamlNames(st *ast.StructType) map[string]string {
	keys := map[string]string{}
	for _, field := range st.Fields.List {
		tag := ""
		if field.Tag != nil {
			tag, _ = strconv.Unquote(field.Tag.Value)
		}
		for _, n := range field.Names {
			sf := reflect.StructField{Name: n.Name, Tag: reflect.StructTag(tag)}
			if !ast.IsExported(n.Name) {
				sf.PkgPath = "p"
			}
			if key, inline, ok := yamlKey(sf); ok && !inline {
				keys[n.Name] = key
			}
		}
	}
	return keys
}

// yamlWords writes the Go names of fields in a doc comment as their yaml
// keys: "Cert and Key are PEM files" becomes "`cert` and `key` are PEM
// files". An upper-case name (TLS, URL) is replaced only where the comment
// starts, since elsewhere it is more likely the word.
func yamlWords(text string, keys map[string]string) string {
	words := strings.Split(text, " ")
	for i, w := range words {
		open := len(w) - len(strings.TrimLeft(w, "("))
		core := strings.TrimRight(w[open:], ".,;:)")
		key, ok := keys[core]
		if !ok || (i > 0 && strings.ToUpper(core) == core) {
			continue
		}
		words[i] = w[:open] + "`" + key + "`" + w[open+len(core):]
	}
	return strings.Join(words, " ")
}

// docOptions reads the list of options a mapping's package doc gives after
// a line starting "Options (upstreams[].options)": indented entries
// "name: text" (or "a, b: text"), their text continued on lines indented
// further. "…; or nameFile, a file holding it" documents nameFile too.
func docOptions(pkgDoc string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(pkgDoc, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Options (upstreams[].options)") })
	if start < 0 {
		return out
	}
	var names []string
	var text []string
	flush := func() {
		t := oneLine(strings.Join(text, " "))
		for _, n := range names {
			out[n] = t
		}
		if _, alt, ok := strings.Cut(t, "; or "); ok {
			alt, _, _ = strings.Cut(alt, ",")
			if alt = strings.TrimSpace(alt); alt != "" && !strings.Contains(alt, " ") {
				out[alt] = t
			}
		}
		names, text = nil, nil
	}
	for _, l := range lines[start+1:] {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, "\t") {
			break
		}
		body := l[1:]
		if body != "" && body[0] != ' ' {
			if head, rest, ok := strings.Cut(body, ":"); ok && !strings.ContainsAny(head, "{}()") {
				flush()
				for _, n := range strings.Split(head, ",") {
					names = append(names, strings.TrimSpace(n))
				}
				text = append(text, rest)
				continue
			}
		}
		text = append(text, body)
	}
	flush()
	return out
}

// embeddedName is the field name of an embedded type.
func embeddedName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// literal is a basic literal's value as an operator writes it.
func literal(lit *ast.BasicLit) string {
	if lit.Kind == token.STRING {
		if s, err := strconv.Unquote(lit.Value); err == nil {
			return s
		}
	}
	return lit.Value
}

// oneLine joins a doc comment's lines.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// configReference walks Config by its yaml tags: every key, with its default
// from Default (and UpstreamDefaults for the items of upstreams).
func configReference(d *goDocs) []refSection {
	itemDefaults := map[reflect.Type]reflect.Value{
		reflect.TypeFor[Upstream](): reflect.ValueOf(UpstreamDefaults(Upstream{})),
	}
	var sections []refSection
	var walk func(v reflect.Value, key refKey)
	walk = func(v reflect.Value, sec refKey) {
		t := v.Type()
		i := len(sections)
		sections = append(sections, refSection{key: sec})
		for fi := range t.NumField() {
			f := t.Field(fi)
			name, inline, ok := yamlKey(f)
			if !ok {
				continue
			}
			fv := v.Field(fi)
			if inline {
				panic("refgen: inline fields in Config are not supported") // none today
			}
			k := refKey{
				path:    strings.TrimPrefix(sec.path+"."+name, "."),
				goField: t.Name() + "." + f.Name,
				doc:     d.fields[t.Name()][f.Name],
			}
			if sec.prefix != "" {
				k.env = sec.prefix + "_" + envName(name)
			}
			ft := f.Type
			switch {
			case ft == yamlNodeType:
				k.typ, k.env = "mapping", ""
			case isEnvScalar(ft) || isEnvList(ft):
				k.typ, k.def = typeName(ft), formatValue(fv)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				k.typ, k.env, k.section = "list of mappings", "", true
				k.intro, k.goType = d.types[ft.Elem().Name()], ft.Elem().Name()
				k.def = formatValue(fv)
				item := reflect.New(ft.Elem()).Elem()
				if dv, ok := itemDefaults[ft.Elem()]; ok {
					item = dv
				}
				sections[i].keys = append(sections[i].keys, k)
				k.path += "[]"
				walk(item, k)
				continue
			case ft.Kind() == reflect.Struct:
				k.typ, k.section, k.prefix, k.env = "mapping", true, k.env, ""
				k.intro, k.goType = d.types[ft.Name()], ft.Name()
				sections[i].keys = append(sections[i].keys, k)
				walk(fv, k)
				continue
			default:
				k.typ, k.env = ft.String(), ""
			}
			sections[i].keys = append(sections[i].keys, k)
		}
	}
	walk(reflect.ValueOf(Default()).Elem(), refKey{prefix: envRoot})
	return sections
}

// typeName is how the reference names a type the environment can set.
func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem()) + "s"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "integer"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	}
	return t.String()
}

// formatValue writes a default as YAML would read it.
func formatValue(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return formatDuration(time.Duration(v.Int()))
	case v.Kind() == reflect.Slice:
		if v.Len() == 0 {
			return ""
		}
		items := make([]string, v.Len())
		for i := range v.Len() {
			items[i] = formatValue(v.Index(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case v.Kind() == reflect.String:
		return quoteIfNeeded(v.String())
	}
	return fmt.Sprint(v.Interface())
}

// formatDuration is d in Go syntax without zero units: 1m, not 1m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	for _, zero := range []string{"0s", "0m"} {
		if strings.HasSuffix(s, zero) && len(s) > len(zero) && !strings.HasSuffix(s, "."+zero) {
			unit := s[len(s)-len(zero):]
			rest := strings.TrimSuffix(s, zero)
			if r := rest[len(rest)-1]; r >= 'a' && r <= 'z' || unit == "0m" && r == 'h' {
				s = rest
			}
		}
	}
	return s
}

// quoteIfNeeded quotes a string that YAML would read otherwise, or that holds
// a comma or a bracket (an item of a flow list).
func quoteIfNeeded(s string) string {
	switch {
	case s == "":
		return ""
	case strings.ContainsAny(s, ",[]{}\"'") || strings.Contains(s, ": ") || strings.Contains(s, " #") ||
		strings.TrimSpace(s) != s || strings.ContainsAny(s[:1], "&*!|>%@`-?#:("):
		return strconv.Quote(s)
	}
	return s
}
