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
// no whitespace. The error says what is wrong, for an InvalidRequest.
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
	return nil
}
