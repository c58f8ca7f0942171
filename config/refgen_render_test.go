package config

// Rendering REFERENCE.md from the sections the generator reads.

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// reference builds the sections of REFERENCE.md: Config's, then each
// mapping's options.
func reference() ([]refSection, error) {
	d, err := readDocs(".")
	if err != nil {
		return nil, err
	}
	sections := configReference(d)
	for _, src := range optionSources {
		sec, err := optionsReference(src)
		if err != nil {
			return nil, err
		}
		sections = append(sections, sec)
	}
	return sections, nil
}

// renderReference writes REFERENCE.md.
func renderReference(sections []refSection) []byte {
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from the config types and their doc comments (and those of the
mappings' options) by config/refgen*_test.go; do not edit. Regenerate with
` + "`" + regenerate + "`" + `. -->

Every key d1bridge reads, with its type, its default, the environment variable
that sets it, and its meaning. The operator's guide is [OPERATING.md](OPERATING.md);
ready-made files are in [examples/](examples/).

Values are applied in layers: the defaults below, then the YAML file given with
` + "`--config FILE`" + `, then the environment, then one validation that reports every
problem (` + "`d1bridge config check FILE`" + ` prints them without starting). The file is
read strictly: an unknown key is an error that names the closest known key.

**Environment.** A key is set by ` + "`D1BRIDGE_`" + ` plus its path, upper-cased, with
` + "`_`" + ` between the levels (` + "`node.baseURL`" + `: ` + "`D1BRIDGE_NODE_BASEURL`" + `). Every variable
also has a ` + "`_FILE`" + ` form naming a file whose content, less trailing newlines, is the
value (` + "`D1BRIDGE_CATALOG_DSN_FILE=/run/secrets/dsn`" + `): use it for secrets. Setting
both forms is an error; an empty variable counts as unset. Booleans are ` + "`true`" + `,
` + "`false`" + `, ` + "`1`" + ` or ` + "`0`" + `; durations use Go syntax (` + "`30s`" + `, ` + "`1m30s`" + `, ` + "`18h`" + `); lists
are comma-separated (` + "`mn,cn`" + `), or a YAML flow sequence when items hold commas
(` + "`[\"CN=a,DC=org\", \"CN=b,DC=org\"]`" + `). Keys inside a list of mappings (` + "`upstreams[]`" + `,
` + "`nodes[]`" + `) and the mappings' ` + "`options`" + ` have no variable: they are set in the file only.

Sizes are in bytes and durations in Go syntax everywhere. An empty default cell
means the empty string or list.

`)
	// Contents.
	b.WriteString("Sections:")
	for i, s := range sections {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " [%s](#%s)", heading(s), anchor(heading(s)))
	}
	b.WriteString(".\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", heading(s))
		switch {
		case s.options != "":
			fmt.Fprintf(&b, "The `options` of an upstream of `type: %s` (`%s`), decoded strictly: an unknown option is an error. File only. Meanings come from the fields' doc comments, else from the list of options in the package's doc.", s.options, s.key.goField)
			if s.key.intro != "" {
				b.WriteString(" " + s.key.intro)
			}
			b.WriteString("\n")
		case s.key.path == "":
			b.WriteString("The top-level keys. The sections below are mappings under these keys.\n")
		default:
			intro := s.key.intro
			if rest, ok := strings.CutPrefix(intro, s.key.goType+" "); ok {
				if p, ok := strings.CutSuffix(s.key.path, "[]"); ok {
					intro = "An item of `" + p + "` " + rest
				} else {
					intro = "`" + s.key.path + "` " + rest
				}
			}
			if intro == "" {
				intro = s.key.doc
			}
			b.WriteString(intro)
			if s.key.prefix == "" {
				b.WriteString(" File only.")
			}
			b.WriteString("\n")
		}
		if s.options != "" {
			b.WriteString("\n| key | type | default | meaning |\n|---|---|---|---|\n")
		} else {
			b.WriteString("\n| key | type | default | environment | meaning |\n|---|---|---|---|---|\n")
		}
		for _, k := range s.keys {
			key := "`" + k.path + "`"
			if k.section {
				key = "[" + key + "](#" + anchor("`"+k.path+strings.Repeat("[]", boolInt(k.typ == "list of mappings"))+"`") + ")"
			}
			def := ""
			if k.def != "" {
				def = "`" + k.def + "`"
			}
			env := "file only"
			if k.env != "" {
				env = "`" + k.env + "`"
			} else if k.prefix != "" {
				env = "see its keys"
			}
			cells := []string{key, k.typ, def}
			if s.options == "" {
				cells = append(cells, env)
			}
			meaning := k.doc
			if meaning == "" && s.options != "" {
				// An option without a doc comment (undocumentedOptions):
				// point at its parent, whose entry in the package's list
				// of options describes it.
				meaning = "(no doc comment yet)"
				if i := strings.LastIndex(k.path, "."); i > 0 && k.path[:i] != "upstreams[].options" {
					meaning = "See `" + strings.TrimSuffix(k.path[:i], "[]") + "`."
				}
			}
			cells = append(cells, meaning)
			for i := range cells {
				cells[i] = strings.ReplaceAll(cells[i], "|", `\|`)
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
		}
	}
	return b.Bytes()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// heading is a section's title.
func heading(s refSection) string {
	switch {
	case s.options != "":
		return "`upstreams[].options`, type " + s.options
	case s.key.path == "":
		return "Top level"
	}
	return "`" + s.key.path + "`"
}

// anchor is the fragment GitHub gives a heading.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// refKeyPaths are the paths of Config's keys in the reference, as KeyPaths
// writes them.
func refKeyPaths(sections []refSection) []string {
	var out []string
	for _, s := range sections {
		if s.options != "" {
			continue
		}
		for _, k := range s.keys {
			out = append(out, k.path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
