package rest

import (
	"math/rand/v2"
	"mime"
	"testing"
)

// printableAttachment makes what mime.FormatMediaType does of every name it
// takes, and leaves the others to it.
func TestPrintableAttachmentIsMimes(t *testing.T) {
	names := []string{"a", "data.csv", "d1load/20261126T064730-889838/1", "urn:uuid:1b8d-4f", `say "hi"\now`,
		"with space.txt", "a=b;c", "tab\there", "ünïcode.csv", "nul\x00", "", "~!#$%&'*+-.^_`|", "(x)<y>@[z]?{}"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(0x1e + rng.IntN(0x62)) // printable ASCII, and 0x1e, 0x1f, 0x7f
		}
		names = append(names, string(b))
	}
	taken := 0
	for _, name := range names {
		got, ok := printableAttachment(name)
		if !ok {
			continue
		}
		taken++
		if want := mime.FormatMediaType("attachment", map[string]string{"filename": name}); got != want {
			t.Fatalf("%q: %q, mime makes %q", name, got, want)
		}
	}
	if taken < len(names)/2 {
		t.Fatalf("took %d of %d names", taken, len(names))
	}
}
