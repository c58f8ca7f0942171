// Package xsdtest validates DataONE documents against the official XML schemas, for
// tests. It runs xmllint (libxml2-utils) over the schemas in adapter/schemas, with
// the project's XML catalog so that the schema imports resolve offline.
//
// The schema is chosen by the root element: the types v1, v1.1 and v2.0 namespaces
// select dataoneTypes.xsd, dataoneTypes_v1.1.xsd and dataoneTypes_v2.0.xsd; an
// <error> root in no namespace selects dataoneErrors.xsd. Any other root is an error.
package xsdtest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// schemaByNS maps a root element's namespace to its schema file.
var schemaByNS = map[string]string{
	"http://ns.dataone.org/service/types/v1":   "dataoneTypes.xsd",
	"http://ns.dataone.org/service/types/v1.1": "dataoneTypes_v1.1.xsd",
	"http://ns.dataone.org/service/types/v2.0": "dataoneTypes_v2.0.xsd",
}

const errorsSchema = "dataoneErrors.xsd"

// errSetup marks a problem of the test machine (no xmllint, no schemas), as opposed
// to an invalid document.
var errSetup = errors.New("xsdtest: cannot validate")

// xmllint's exit statuses that are not a validity error.
const (
	xmllintParseError   = 1 // the document is not well-formed
	xmllintSchemaBroken = 5 // the schema itself does not compile
)

// maxShown caps how much of a failing document is printed.
const maxShown = 16 << 10

// Validate reports a test error, with xmllint's message and the document, when doc
// does not validate against its DataONE schema. When the machine cannot validate
// (xmllint missing), the test fails at once; it is never skipped.
func Validate(t testing.TB, doc []byte) {
	t.Helper()
	err := Check(doc)
	switch {
	case err == nil:
	case errors.Is(err, errSetup):
		t.Fatal(err)
	default:
		shown := doc
		more := ""
		if len(shown) > maxShown {
			shown, more = shown[:maxShown], fmt.Sprintf("\n... (%d more bytes)", len(doc)-maxShown)
		}
		t.Errorf("%v\ndocument:\n%s%s", err, shown, more)
	}
}

// Check validates doc against the DataONE schema its root element selects. It
// returns nil when doc is valid, and otherwise an error with xmllint's message.
func Check(doc []byte) error {
	env, err := setup()
	if err != nil {
		return err
	}
	name, err := schemaFor(doc)
	if err != nil {
		return err
	}
	xsd := filepath.Join(env.dir, name)
	cmd := exec.Command(env.xmllint, "--nonet", "--noout", "--schema", xsd, "-")
	cmd.Env = env.vars
	cmd.Stdin = bytes.NewReader(doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return fmt.Errorf("%w: running %s: %v", errSetup, env.xmllint, err)
		}
		msg := strings.TrimSpace(stderr.String())
		if exit.ExitCode() == xmllintSchemaBroken {
			return fmt.Errorf("%w: the schema %s does not compile (is adapter/schemas/catalog.xml intact?):\n%s", errSetup, xsd, msg)
		}
		if exit.ExitCode() == xmllintParseError {
			return fmt.Errorf("document is not well-formed XML (xmllint):\n%s", msg)
		}
		return fmt.Errorf("document does not validate against %s (xmllint exit %d):\n%s", name, exit.ExitCode(), msg)
	}
	return nil
}

// schemaFor names the schema file of doc from its root element.
func schemaFor(doc []byte) (string, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return "", errors.New("document has no root element")
		}
		if err != nil {
			return "", fmt.Errorf("document is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Space == "" {
			if se.Name.Local == "error" {
				return errorsSchema, nil
			}
			return "", fmt.Errorf("root element <%s> has no namespace and is not <error>: no DataONE schema for it", se.Name.Local)
		}
		if f, ok := schemaByNS[se.Name.Space]; ok {
			return f, nil
		}
		return "", fmt.Errorf("root element <%s> is in namespace %q: no DataONE schema for it", se.Name.Local, se.Name.Space)
	}
}

// env is what every xmllint run needs, found once per test binary.
type env struct {
	xmllint string   // path of the executable
	dir     string   // absolute path of adapter/schemas
	vars    []string // the process environment with XML_CATALOG_FILES set
}

var setup = sync.OnceValues(func() (env, error) {
	bin, err := exec.LookPath("xmllint")
	if err != nil {
		return env{}, fmt.Errorf("%w: xmllint is not on PATH (%v); run the project's test script .ci/test, which installs libxml2-utils", errSetup, err)
	}
	dir, err := schemasDir()
	if err != nil {
		return env{}, err
	}
	// XML_CATALOG_FILES is a space-separated list of URIs: a file URI keeps a
	// path with spaces in one piece.
	catalog := (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(dir, "catalog.xml"))}).String()
	vars := append(os.Environ(), "XML_CATALOG_FILES="+catalog)
	return env{xmllint: bin, dir: dir, vars: vars}, nil
})

// schemasDir locates adapter/schemas: next to this package's source, or, when the
// binary was built with -trimpath, under the module root above the working directory.
func schemasDir() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "schemas")
		if isSchemasDir(dir) {
			return dir, nil
		}
		tried = append(tried, dir)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir := filepath.Join(d, "adapter", "schemas")
				if isSchemasDir(dir) {
					return dir, nil
				}
				tried = append(tried, dir)
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("%w: the DataONE schemas (adapter/schemas) were not found; tried %q", errSetup, tried)
}

func isSchemasDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "catalog.xml"))
	return err == nil
}
