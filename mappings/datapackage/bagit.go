package datapackage

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// BagIt tag files (RFC 8493): bag-info.txt, read for facts, and the payload
// manifests, read for checksums.

// bagInfoLabel is one "Label: value" of a bag-info.txt, continuation lines
// joined.
type bagInfoLabel struct{ label, value string }

// parseBagInfo reads the labels of a bag-info.txt in order. A line that
// starts with a space or a tab continues the value before it.
func parseBagInfo(body []byte) ([]bagInfoLabel, error) {
	body = bytes.TrimPrefix(body, []byte("\ufeff"))
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("bag-info.txt: not UTF-8 text")
	}
	var labels []bagInfoLabel
	for n, line := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case line[0] == ' ' || line[0] == '\t':
			if len(labels) == 0 {
				return nil, fmt.Errorf("bag-info.txt line %d: a continuation line before any label", n+1)
			}
			last := &labels[len(labels)-1]
			last.value = strings.TrimSpace(last.value + " " + strings.TrimSpace(line))
		default:
			label, value, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(label) == "" {
				return nil, fmt.Errorf("bag-info.txt line %d: %q is not \"Label: value\"", n+1, truncate(line, 60))
			}
			labels = append(labels, bagInfoLabel{strings.TrimSpace(label), strings.TrimSpace(value)})
		}
	}
	return labels, nil
}

func readBagInfo(body []byte) (Facts, error) {
	labels, err := parseBagInfo(body)
	if err != nil {
		return Facts{}, err
	}
	var f Facts
	var contact Party
	for _, l := range labels {
		if l.value == "" {
			continue
		}
		// Labels are matched without regard to case: bags in the wild
		// write them every way.
		switch strings.ToLower(l.label) {
		case "title", "bag-title":
			f.Title = firstNonBlank(f.Title, l.value)
		case "external-description":
			f.Abstract = firstNonBlank(f.Abstract, l.value)
		case "source-organization":
			f.Publisher = firstNonBlank(f.Publisher, l.value)
		case "contact-name":
			if contact.Name == "" {
				email := contact.Email // Contact-Email may come first
				contact = person(l.value, "", "")
				contact.Email = email
			}
		case "contact-email":
			if contact.Email == "" {
				contact.Email = l.value
			}
		case "external-identifier":
			f.Identifier = firstNonBlank(f.Identifier, l.value)
		case "bagging-date":
			// The day the bag was made: when this version of the content
			// was last changed, not when it was published.
			if f.Modified.IsZero() {
				f.Modified = parseDate(l.value)
			}
		case "keywords":
			f.Keywords = append(f.Keywords, splitKeywords(l.value)...)
		}
	}
	if isNameable(contact) {
		f.Contact = &contact
	}
	if doi := doiOf(f.Identifier); doi != "" {
		f.Identifier = "doi:" + doi
	} else if isURL(f.Identifier) {
		f.Landing = f.Identifier
	}
	return f, nil
}

var hexDigest = regexp.MustCompile(`^[0-9a-fA-F]+$`)

// BagManifest reads a BagIt manifest-<algorithm>.txt (or tagmanifest):
// lines "<checksum> <path>", paths percent-encoded for CR, LF and % (BagIt
// 1.0). It gives each path's checksum in lowercase hex. algorithm (as in the
// file name: "md5", "sha256", …) is only named in errors.
func BagManifest(algorithm string, body []byte) (map[string]string, error) {
	name := "manifest-" + algorithm + ".txt"
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimPrefix(body, []byte("\ufeff"))))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		// The checksum, then whitespace, then the path, which may itself
		// hold spaces.
		sum, rest, ok := strings.Cut(strings.TrimLeft(line, " \t"), " ")
		if !ok {
			sum, rest, ok = strings.Cut(sum, "\t")
		}
		path := strings.TrimLeft(rest, " \t")
		if !ok || path == "" {
			return nil, fmt.Errorf("%s line %d: %q is not \"<checksum> <path>\"", name, n, truncate(line, 80))
		}
		if !hexDigest.MatchString(sum) {
			return nil, fmt.Errorf("%s line %d: checksum %q is not hexadecimal", name, n, truncate(sum, 80))
		}
		path = strings.TrimPrefix(unescapeBagPath(path), "./")
		if prev, dup := sums[path]; dup && prev != strings.ToLower(sum) {
			return nil, fmt.Errorf("%s line %d: %q is listed twice with different checksums", name, n, path)
		}
		sums[path] = strings.ToLower(sum)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return sums, nil
}

// unescapeBagPath undoes BagIt 1.0's encoding of a manifest path: %0A, %0D
// and %25 (in either case). Any other % stays as it is: older bags wrote
// paths unencoded.
func unescapeBagPath(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			switch strings.ToUpper(p[i+1 : i+3]) {
			case "0A":
				b.WriteByte('\n')
				i += 2
				continue
			case "0D":
				b.WriteByte('\r')
				i += 2
				continue
			case "25":
				b.WriteByte('%')
				i += 2
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// truncate shortens s for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
