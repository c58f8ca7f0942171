package adapter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIdentifierLength is the schema's limit (NonEmptyNoWhitespaceString800).
const MaxIdentifierLength = 800

// CheckIdentifier applies the schema's rule for identifiers: 1 to 800 characters,
// no whitespace, no control character, and only characters XML 1.0 can carry.
// The error says what is wrong, for an InvalidRequest.
func CheckIdentifier(id string) error {
	n := utf8.RuneCountInString(id)
	switch {
	case !utf8.ValidString(id):
		return fmt.Errorf("identifier is not valid UTF-8")
	case n == 0:
		return fmt.Errorf("identifier is empty")
	case n > MaxIdentifierLength:
		return fmt.Errorf("identifier has %d characters; at most %d are allowed", n, MaxIdentifierLength)
	case strings.IndexFunc(id, unicode.IsSpace) >= 0:
		return fmt.Errorf("identifier %q contains whitespace, which identifiers may not", id)
	}
	if i := strings.IndexFunc(id, IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("identifier %q contains the control character U+%04X, which identifiers may not", id, r)
	}
	if i := strings.IndexFunc(id, notXMLChar); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("identifier %q contains U+%04X, which is not a character XML 1.0 can carry", id, r)
	}
	return nil
}

// notXMLChar reports the noncharacters U+FFFE and U+FFFF, which valid UTF-8
// can hold but XML 1.0 cannot (its Char production): an identifier holding one
// could never be written in a document intact.
func notXMLChar(r rune) bool { return r == 0xFFFE || r == 0xFFFF }

// IsControl reports a C0 control character, DEL or a C1 control character: none
// belongs in an identifier or a subject (most cannot even be written in XML 1.0).
func IsControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f)
}
