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
	if len(id) <= MaxIdentifierLength && VisibleASCII(id) {
		return nil // most identifiers: one pass over the bytes decides
	}
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

// VisibleASCII reports a non-empty s of printable ASCII without space: no
// whitespace, control character or non-ASCII byte.
func VisibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return s != ""
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

// pathSafe are the characters the DataONE Python client leaves bare in a path
// segment (d1_common.const.URL_PATH_ELEMENT_SAFE_CHARS), besides the
// unreserved ones that Python's quote never escapes (API.md §1.2).
const pathSafe = ":@$!()',~*&="

// EscapeIdentifier encodes an identifier as one path segment, as the DataONE
// Python client does: every byte other than A-Z a-z 0-9 - . _ ~ and pathSafe becomes %XX
// (so '/' is %2F, ' ' %20, '+' %2B, and UTF-8 bytes are escaped one by one).
func EscapeIdentifier(id string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(id))
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', strings.IndexByte(pathSafe, c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
