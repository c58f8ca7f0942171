package adapter_test

import (
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

func TestCheckIdentifierAccepts(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"URL characters": "doi:10.5063/F1QN64NZ?v=2#frag+100%25:x",
		"slash":          "/",
		"question mark":  "?",
		"hash":           "#",
		"plus":           "+",
		"percent":        "%",
		"colon":          ":",
		"XML specials":   `a&b<c>"d"'e'`,
		"non-ASCII":      "données-ü-標識子-🙂",
		"zero-width":     "a\u200bb", // not whitespace in Unicode
		"800 ASCII":      strings.Repeat("a", adapter.MaxIdentifierLength),
		"800 non-ASCII":  strings.Repeat("é", adapter.MaxIdentifierLength), // characters, not bytes
	}
	for name, id := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := adapter.CheckIdentifier(id); err != nil {
				t.Fatalf("CheckIdentifier(%q): %v", id, err)
			}
			// What CheckIdentifier accepts, the schema accepts too.
			xsdtest.Validate(t, encode(t, &adapter.Identifier{Value: id}, 2))
		})
	}
}

func TestCheckIdentifierRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, id, want string
	}{
		{"empty", "", "empty"},
		{"801 characters", strings.Repeat("a", adapter.MaxIdentifierLength+1), "801 characters"},
		{"801 non-ASCII characters", strings.Repeat("é", adapter.MaxIdentifierLength+1), "801 characters"},
		{"space", "knb 1", "whitespace"},
		{"leading space", " knb.1", "whitespace"},
		{"trailing newline", "knb.1\n", "whitespace"},
		{"tab", "knb\t1", "whitespace"},
		{"newline", "knb\n1", "whitespace"},
		{"carriage return", "knb\r1", "whitespace"},
		{"NBSP", "knb\u00a01", "whitespace"},
		{"narrow NBSP", "knb\u202f1", "whitespace"},
		{"em space", "knb\u20031", "whitespace"},
		{"ideographic space", "knb\u30001", "whitespace"},
		{"line separator", "knb\u20281", "whitespace"},
		{"next line", "knb\u00851", "whitespace"},
		{"invalid UTF-8", "knb\xff1", "UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := adapter.CheckIdentifier(c.id)
			if err == nil {
				t.Fatalf("CheckIdentifier(%q) accepted it", c.id)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
