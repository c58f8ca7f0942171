package adapter

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"io"
	"strings"
)

// ChecksumAlgorithms are the algorithms this node computes, by their Library of
// Congress labels (API.md §10 rule 10).
var ChecksumAlgorithms = []string{"MD5", "SHA-1", "SHA-256", "SHA-384", "SHA-512"}

// SpeculativeAlgorithms are computed when an object arrives before the system
// metadata that names its algorithm: the two every node must support and SHA-256.
// Any other algorithm is verified by reading the staged bytes again.
var SpeculativeAlgorithms = []string{"MD5", "SHA-1", "SHA-256"}

// CanonicalAlgorithm maps the names peers use (SHA1, sha-256, md5) to the label.
func CanonicalAlgorithm(name string) (string, bool) {
	n := strings.ToUpper(strings.ReplaceAll(name, "-", ""))
	for _, a := range ChecksumAlgorithms {
		if strings.ReplaceAll(a, "-", "") == n {
			return a, true
		}
	}
	return "", false
}

func newHash(alg string) hash.Hash {
	switch alg {
	case "MD5":
		return md5.New()
	case "SHA-1":
		return sha1.New()
	case "SHA-256":
		return sha256.New()
	case "SHA-384":
		return sha512.New384()
	case "SHA-512":
		return sha512.New()
	}
	return nil
}

// Hasher computes several checksums of one stream in one pass.
type Hasher struct {
	algs []string
	hs   []hash.Hash
	w    io.Writer
}

// NewHasher hashes with the named algorithms; unknown and repeated names are skipped.
func NewHasher(algorithms []string) *Hasher {
	h := &Hasher{}
	var ws []io.Writer
	for _, name := range algorithms {
		alg, ok := CanonicalAlgorithm(name)
		if !ok || h.has(alg) {
			continue
		}
		hh := newHash(alg)
		h.algs, h.hs, ws = append(h.algs, alg), append(h.hs, hh), append(ws, hh)
	}
	h.w = io.MultiWriter(ws...)
	return h
}

func (h *Hasher) has(alg string) bool {
	for _, a := range h.algs {
		if a == alg {
			return true
		}
	}
	return false
}

func (h *Hasher) Write(p []byte) (int, error) { return h.w.Write(p) }

// Sums returns the lower-case hex digests by algorithm label.
func (h *Hasher) Sums() map[string]string {
	m := make(map[string]string, len(h.algs))
	for i, a := range h.algs {
		m[a] = hex.EncodeToString(h.hs[i].Sum(nil))
	}
	return m
}

// ChecksumOf looks an algorithm up in sums, whatever name the peer used for it.
func ChecksumOf(sums map[string]string, algorithm string) (string, bool) {
	alg, ok := CanonicalAlgorithm(algorithm)
	if !ok {
		return "", false
	}
	v, ok := sums[alg]
	return v, ok
}
