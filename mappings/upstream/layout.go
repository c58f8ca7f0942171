package upstream

import (
	"crypto/sha256"
	"encoding/hex"
)

// BlobName is where an object store (S3, WebDAV) keeps the bytes of a node.Blobs
// key, relative to the store's prefix:
//
//	<h[0:2]>/<h[2:4]>/<key>     when key is a plain name
//	<h[0:2]>/<h[2:4]>/~<h>      otherwise
//
// where h is the hex SHA-256 of key. The two fan-out levels spread objects over
// 65,536 folders (a posix-backed gateway or WebDAV server keeps each in a
// directory). A plain name (1 to 128 of A-Z a-z 0-9 . _ -, not starting with
// a dot) such as the node's keys (d1bridge-<uuid>) stays readable; any other key (slashes,
// unicode, NUL, 300 characters) becomes its digest, so no key can escape the
// prefix or exceed a file name's length. '~' is not a plain-name character, so
// the two forms never collide.
func BlobName(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	leaf := key
	if !plain(key) {
		leaf = "~" + h
	}
	return h[0:2] + "/" + h[2:4] + "/" + leaf
}

func plain(key string) bool {
	if len(key) == 0 || len(key) > 128 || key[0] == '.' {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
