// Package seal keeps credentials encrypted at rest and binds every sealed value to the
// connection and authorization generation it was sealed for.
//
// Guarantees:
//   - A sealed value opens only under the exact Context it was sealed with. The context is
//     authenticated (KMS EncryptionContext, or AES-GCM associated data), never stored in the
//     clear next to the ciphertext as something Open trusts. A reconnect bumps the generation,
//     so every value sealed for the old generation stops opening: in-flight bindings fail
//     closed rather than using a superseded secret.
//   - Every failure is an error; nothing returns a partially opened value. Callers tell the
//     cases apart with errors.Is: ErrContextMismatch (wrong context, tampered or foreign
//     ciphertext), ErrUnavailable (KMS unreachable or failing; a 503, never an allow).
//   - No secret reaches an error string, a log line, fmt output or JSON output: Credential
//     redacts itself in String, GoString, LogValue and MarshalJSON, and error texts are
//     built here from fixed words and error codes, never from plaintext or request bodies.
package seal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrContextMismatch: the sealed value does not open under the given Context. This
	// covers a different connection or generation, a tampered ciphertext, and a ciphertext
	// sealed under another key: authenticated encryption cannot tell them apart.
	ErrContextMismatch = errors.New("seal: sealed value does not open under this context")
	// ErrUnavailable: the key service could not be reached or failed; retry later.
	ErrUnavailable = errors.New("seal: key service unavailable")
	// ErrInvalidContext: the Context is incomplete (empty connection id, generation < 1).
	ErrInvalidContext = errors.New("seal: invalid seal context")
	// ErrTooLarge: the plaintext exceeds MaxPlaintext.
	ErrTooLarge = errors.New("seal: plaintext too large")
	// ErrMalformed: the sealed value is not in a format this sealer produces.
	ErrMalformed = errors.New("seal: malformed sealed value")
	// ErrInvalidCredential: a credential failed validation or decoding.
	ErrInvalidCredential = errors.New("seal: invalid credential")
)

// MaxPlaintext is the largest plaintext any Sealer accepts: the KMS Encrypt limit, applied
// to the local sealer as well so both behave the same.
const MaxPlaintext = 4096

// maxConnectionID bounds Context.ConnectionID; ids are short opaque strings.
const maxConnectionID = 256

// Encryption context keys. They are persisted inside every sealed value: never rename.
const (
	contextKeyConnection = "fluidbox:connection"
	contextKeyGeneration = "fluidbox:generation"
)

// Context names what a sealed value belongs to. It is authenticated, not encrypted: it must
// be supplied again, identically, to open the value.
type Context struct {
	ConnectionID string
	Generation   int
}

// Validate reports whether c can be used to seal or open: a non-empty, printable
// connection id and a generation of at least 1 (generations start at 1, so the zero value
// is always a mistake, and refusing it fails closed).
func (c Context) Validate() error {
	if c.ConnectionID == "" {
		return fmt.Errorf("%w: empty connection id", ErrInvalidContext)
	}
	if len(c.ConnectionID) > maxConnectionID || !utf8.ValidString(c.ConnectionID) {
		return fmt.Errorf("%w: connection id too long or not UTF-8", ErrInvalidContext)
	}
	for _, r := range c.ConnectionID {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: connection id has non-printable characters", ErrInvalidContext)
		}
	}
	if c.Generation < 1 {
		return fmt.Errorf("%w: generation %d < 1", ErrInvalidContext, c.Generation)
	}
	return nil
}

// encryptionContext is the KMS EncryptionContext for c.
func (c Context) encryptionContext() map[string]string {
	return map[string]string{
		contextKeyConnection: c.ConnectionID,
		contextKeyGeneration: strconv.Itoa(c.Generation),
	}
}

// canonical is the canonical encoding of c: the JSON object of its encryption context.
// encoding/json writes map keys sorted and strings escaped deterministically, so equal
// contexts always encode to equal bytes.
func (c Context) canonical() ([]byte, error) {
	return json.Marshal(c.encryptionContext())
}

// Sealer seals and opens small secrets under a Context.
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, c Context) ([]byte, error)
	Open(ctx context.Context, sealed []byte, c Context) ([]byte, error)
}

var (
	_ Sealer = (*KMS)(nil)
	_ Sealer = (*Local)(nil)
)

func checkPlaintext(p []byte) error {
	if len(p) == 0 {
		return fmt.Errorf("seal: empty plaintext")
	}
	if len(p) > MaxPlaintext {
		return fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(p), MaxPlaintext)
	}
	return nil
}
