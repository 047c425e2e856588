// Package ids makes opaque identifiers with a type prefix (ses_, pol_, ...).
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var enc = base32.StdEncoding.WithPadding(base32.NoPadding)

// New returns prefix followed by 128 random bits in lower-case base32.
func New(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + strings.ToLower(enc.EncodeToString(b[:]))
}

// Valid reports whether id has the prefix and only characters New emits,
// so an id from a URL can be put in a key without surprises.
func Valid(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	for _, c := range rest {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}
