package config

// The mappings' options in REFERENCE.md, read from their packages' source.

import (
	"fmt"
	"go/ast"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// An optionSource is the options struct one type of upstream decodes.
type optionSource struct {
	upstreamType string // config.Upstream.Type
	dir          string // the package, relative to config/
	typeName     string // the struct decoded with upstream.DecodeOptions
}

// optionSources are the mappings whose options the reference lists.
var optionSources = []optionSource{
	{UpstreamS3, "../mappings/s3", "Options"},
	{UpstreamWebDAV, "../mappings/webdav", "Options"},
	{UpstreamHTTP, "../mappings/httpapi", "Options"},
	{UpstreamDataONE, "../mappings/dataone", "Options"},
	{UpstreamDataCite, "../mappings/datacite", "Options"},
	{UpstreamFiles, "../mappings", "treeOptions"},
	{UpstreamOAIPMH, "../mappings/oaipmh", "Options"},
	{UpstreamSitemap, "../mappings/sitemap", "Options"},
	{UpstreamOCFL, "../mappings", "ocflOptions"},
}

// optionsReference lists the keys of one mapping's options, read from its
// source: types from the field types, defaults from a DefaultOptions function
// returning a literal of the struct, if the package has one.
func optionsReference(src optionSource) (refSection, error) {
	d, err := readDocs(src.dir)
	if err != nil {
		return refSection{}, err
	}
	if _, ok := d.specs[src.typeName].(*ast.StructType); !ok {
		return refSection{}, fmt.Errorf("%s: no struct type %s", src.dir, src.typeName)
	}
	defaults := literalDefaults(d, src.typeName)
	pkg := filepath.Base(src.dir)
	sec := refSection{options: src.upstreamType, key: refKey{
		path: "upstreams[].options", typ: "mapping", section: true,
		goField: pkg + "." + src.typeName, intro: d.types[src.typeName],
	}}
	seen := map[string]string{} // struct type: the key that lists its keys
	var walk func(typeName, prefix string, top bool) error
	walk = func(typeName, prefix string, top bool) error {
		st := d.specs[typeName].(*ast.StructType)
		for _, field := range st.Fields.List {
			tag := ""
			if field.Tag != nil {
				tag, _ = strconv.Unquote(field.Tag.Value)
			}
			names := field.Names
			if len(names) == 0 {
				names = []*ast.Ident{ast.NewIdent(embeddedName(field.Type))}
			}
			for _, n := range names {
				sf := reflect.StructField{Name: n.Name, Tag: reflect.StructTag(tag), Anonymous: len(field.Names) == 0}
				if !ast.IsExported(n.Name) {
					sf.PkgPath = pkg
				}
				name, inline, ok := yamlKey(sf)
				if !ok {
					continue
				}
				if inline {
					if err := walk(embeddedName(field.Type), prefix, false); err != nil {
						return err
					}
					continue
				}
				k := refKey{
					path:    prefix + "." + name,
					goField: pkg + "." + typeName + "." + n.Name,
					doc:     d.fields[typeName][n.Name],
				}
				if k.doc == "" && top {
					k.doc = d.options[name]
				}
				if top {
					k.def = defaults[n.Name]
				}
				typ, inner := astType(d, field.Type)
				k.typ = typ
				if inner == "" {
					sec.keys = append(sec.keys, k)
					continue
				}
				if first, ok := seen[inner]; ok {
					k.doc = strings.TrimSpace(k.doc + " The keys of `" + first + "`.")
					sec.keys = append(sec.keys, k)
					continue
				}
				seen[inner] = k.path
				sec.keys = append(sec.keys, k)
				sub := k.path
				if strings.HasPrefix(typ, "list of") {
					sub += "[]"
				}
				if err := walk(inner, sub, false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(src.typeName, "upstreams[].options", true); err != nil {
		return refSection{}, err
	}
	return sec, nil
}

// astType names the type of an options field, and the struct type of the
// package whose keys go under it ("" for a leaf).
func astType(d *goDocs, e ast.Expr) (name, inner string) {
	switch e := e.(type) {
	case *ast.StarExpr:
		return astType(d, e.X)
	case *ast.ArrayType:
		n, in := astType(d, e.Elt)
		if in != "" {
			return "list of mappings", in
		}
		return "list of " + n + "s", ""
	case *ast.MapType:
		n, _ := astType(d, e.Value)
		return "mapping of " + n + "s", ""
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "time" && e.Sel.Name == "Duration" {
			return "duration", ""
		}
		return fmt.Sprintf("%s", e.Sel.Name), ""
	case *ast.Ident:
		switch e.Name {
		case "string":
			return "string", ""
		case "bool":
			return "boolean", ""
		case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
			return "integer", ""
		case "float32", "float64":
			return "number", ""
		}
		if spec, ok := d.specs[e.Name]; ok {
			if _, ok := spec.(*ast.StructType); ok {
				return "mapping", e.Name
			}
			return astType(d, spec)
		}
		return e.Name, ""
	}
	return fmt.Sprintf("%T", e), ""
}

// literalDefaults reads the defaults of typeName's fields from a function of
// the package that returns a keyed literal of it (DefaultOptions), resolving
// the package's constants.
func literalDefaults(d *goDocs, typeName string) map[string]string {
	out := map[string]string{}
	for _, fn := range d.funcs {
		if fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Default") || fn.Body == nil ||
			fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
			continue
		}
		if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); !ok || id.Name != typeName {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			ret, ok := n.(*ast.ReturnStmt)
			if !ok || len(ret.Results) != 1 {
				return true
			}
			lit, ok := ret.Results[0].(*ast.CompositeLit)
			if !ok {
				return true
			}
			for _, elt := range lit.Elts {
				kv, ok := elt.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, ok := kv.Key.(*ast.Ident)
				if !ok {
					continue
				}
				switch v := kv.Value.(type) {
				case *ast.BasicLit:
					out[key.Name] = quoteIfNeeded(literal(v))
				case *ast.Ident:
					if c, ok := d.consts[v.Name]; ok {
						out[key.Name] = quoteIfNeeded(c)
					} else if v.Name == "true" || v.Name == "false" {
						out[key.Name] = v.Name
					}
				}
			}
			return false
		})
	}
	return out
}
