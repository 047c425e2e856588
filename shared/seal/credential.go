package seal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// Credential types. They are persisted inside sealed values and sent on the wire: never
// rename.
const (
	TypeBearer = "bearer"
	TypeHeader = "header"
)

// maxSecret bounds a token or header value, so that a sealed credential always fits the
// KMS plaintext limit.
const maxSecret = 3072

const redacted = "redacted"

// Credential is the secret a brokered call presents upstream: a bearer token, or a value
// for a named header. Every way of printing, logging or marshalling it redacts the secret;
// the only ways to the plaintext are the fields themselves, Apply, and SealCredential.
type Credential struct {
	Type  string // TypeBearer or TypeHeader
	Token string // bearer token
	Name  string // header name (TypeHeader)
	Value string // header value (TypeHeader)
}

// reservedHeaders may not carry a credential: they frame the HTTP message or the MCP
// session, so letting a credential overwrite them would break or hijack the transport.
var reservedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Content-Encoding": true,
	"Transfer-Encoding": true, "Connection": true, "Keep-Alive": true, "Upgrade": true,
	"Te": true, "Trailer": true, "Expect": true, "Accept": true, "Accept-Encoding": true,
	"Last-Event-Id": true, "Proxy-Connection": true, "Proxy-Authorization": true,
}

// reservedPrefixes are header families owned by the MCP transport, proxies or browsers.
var reservedPrefixes = []string{"Mcp-", "Proxy-", "Sec-"}

// Validate reports whether c is usable. Its error names the field at fault and never its
// value (an invalid header name might be a misplaced secret, so it is not echoed either).
func (c Credential) Validate() error {
	switch c.Type {
	case TypeBearer:
		if c.Name != "" || c.Value != "" {
			return invalid("bearer credential has header fields")
		}
		if c.Token == "" {
			return invalid("bearer token is empty")
		}
		if len(c.Token) > maxSecret {
			return invalid("bearer token is too long")
		}
		for i := 0; i < len(c.Token); i++ {
			if b := c.Token[i]; b <= ' ' || b == 0x7f {
				return invalid("bearer token contains whitespace or control characters")
			}
		}
	case TypeHeader:
		if c.Token != "" {
			return invalid("header credential has a token field")
		}
		if !validHeaderName(c.Name) {
			return invalid("header name is not a valid HTTP token")
		}
		canon := http.CanonicalHeaderKey(c.Name)
		if reservedHeaders[canon] {
			return invalid("header " + canon + " is reserved")
		}
		for _, p := range reservedPrefixes {
			if strings.HasPrefix(canon, p) {
				return invalid("headers starting " + p + " are reserved")
			}
		}
		if c.Value == "" {
			return invalid("header value is empty")
		}
		if len(c.Value) > maxSecret {
			return invalid("header value is too long")
		}
		for i := 0; i < len(c.Value); i++ {
			if b := c.Value[i]; (b < ' ' && b != '\t') || b == 0x7f {
				return invalid("header value contains control characters")
			}
		}
	case "":
		return invalid("type is empty")
	default:
		return invalid(`type is not "bearer" or "header"`)
	}
	return nil
}

func invalid(reason string) error {
	return fmt.Errorf("%w: %s", ErrInvalidCredential, reason)
}

// validHeaderName reports whether s is an RFC 9110 token of reasonable length.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}

// describe is the redacted, printable form: only the type and, for a valid header
// credential, the header name.
func (c Credential) describe() (typ, name string) {
	switch c.Type {
	case TypeBearer:
		return TypeBearer, ""
	case TypeHeader:
		if validHeaderName(c.Name) {
			return TypeHeader, http.CanonicalHeaderKey(c.Name)
		}
		return TypeHeader, ""
	}
	return "unknown", ""
}

// String returns "credential(bearer, redacted)" or "credential(header X-Api-Key, redacted)".
func (c Credential) String() string {
	typ, name := c.describe()
	if name != "" {
		typ += " " + name
	}
	return "credential(" + typ + ", " + redacted + ")"
}

// GoString redacts for %#v.
func (c Credential) GoString() string {
	typ, name := c.describe()
	if name != "" {
		return fmt.Sprintf("seal.Credential{Type:%q, Name:%q, redacted}", typ, name)
	}
	return fmt.Sprintf("seal.Credential{Type:%q, redacted}", typ)
}

// Format makes every fmt verb redact: without it, verbs such as %d or %t would print the
// struct's fields raw.
func (c Credential) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, c.GoString())
		return
	}
	_, _ = io.WriteString(f, c.String())
}

// LogValue redacts for log/slog.
func (c Credential) LogValue() slog.Value {
	typ, name := c.describe()
	attrs := []slog.Attr{slog.String("type", typ)}
	if name != "" {
		attrs = append(attrs, slog.String("name", name))
	}
	attrs = append(attrs, slog.String("secret", redacted))
	return slog.GroupValue(attrs...)
}

// MarshalJSON redacts: {"type":"bearer","redacted":true}. The output does not decode back
// into a Credential ("redacted" is an unknown field), so a redacted copy can never be
// mistaken for a real one.
func (c Credential) MarshalJSON() ([]byte, error) {
	typ, name := c.describe()
	return json.Marshal(struct {
		Type     string `json:"type"`
		Name     string `json:"name,omitempty"`
		Redacted bool   `json:"redacted"`
	}{typ, name, true})
}

// wireCredential is the plaintext JSON shape (docs/api.md), used for decoding requests and for
// the bytes that get sealed. Pointers tell an absent field from an empty one.
type wireCredential struct {
	Type  *string `json:"type"`
	Token *string `json:"token,omitempty"`
	Name  *string `json:"name,omitempty"`
	Value *string `json:"value,omitempty"`
}

// UnmarshalJSON accepts {"type":"bearer","token":"..."} or
// {"type":"header","name":"X-Api-Key","value":"..."}, rejects unknown fields, fields of
// the other type, null and trailing data, and validates the result. Its errors are fixed
// texts: encoding/json's own messages can quote input bytes, so they are not passed on.
func (c *Credential) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w *wireCredential
	if err := dec.Decode(&w); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("trailing data after credential")
	}
	if w == nil {
		return invalid("credential is null")
	}
	var out Credential
	if w.Type == nil {
		return invalid("type is missing")
	}
	out.Type = *w.Type
	switch out.Type {
	case TypeBearer:
		if w.Name != nil || w.Value != nil {
			return invalid(`bearer credential takes only "type" and "token"`)
		}
	case TypeHeader:
		if w.Token != nil {
			return invalid(`header credential takes only "type", "name" and "value"`)
		}
	}
	if w.Token != nil {
		out.Token = *w.Token
	}
	if w.Name != nil {
		out.Name = *w.Name
	}
	if w.Value != nil {
		out.Value = *w.Value
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*c = out
	return nil
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		// Field is a path of our own struct's JSON names, never input data.
		if typeErr.Field != "" {
			return invalid("field " + typeErr.Field + " has the wrong JSON type")
		}
		return invalid("credential is not a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		// Unknown field names are not echoed: a misplaced secret could be one.
		return invalid("unknown field")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("credential JSON is empty or truncated")
	default:
		return invalid("credential is not valid JSON")
	}
}

// Apply sets the credential on h: Authorization: Bearer <token>, or the named header. An
// invalid credential sets nothing, so the request goes out unauthenticated and fails
// upstream rather than carrying a malformed or reserved header.
func (c Credential) Apply(h http.Header) {
	if h == nil || c.Validate() != nil {
		return
	}
	switch c.Type {
	case TypeBearer:
		h.Set("Authorization", "Bearer "+c.Token)
	case TypeHeader:
		h.Set(c.Name, c.Value)
	}
}

// SealCredential validates c and seals its JSON form under sc.
func SealCredential(ctx context.Context, s Sealer, c Credential, sc Context) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := wireCredential{Type: &c.Type}
	switch c.Type {
	case TypeBearer:
		w.Token = &c.Token
	case TypeHeader:
		w.Name, w.Value = &c.Name, &c.Value
	}
	plaintext, err := json.Marshal(w)
	if err != nil {
		return nil, invalid("cannot encode credential")
	}
	defer clear(plaintext)
	sealed, err := s.Seal(ctx, plaintext, sc)
	if err != nil {
		return nil, fmt.Errorf("seal credential: %w", err)
	}
	return sealed, nil
}

// OpenCredential opens a value made by SealCredential under sc and validates it.
func OpenCredential(ctx context.Context, s Sealer, sealed []byte, sc Context) (Credential, error) {
	plaintext, err := s.Open(ctx, sealed, sc)
	if err != nil {
		return Credential{}, fmt.Errorf("open credential: %w", err)
	}
	defer clear(plaintext)
	var c Credential
	if err := c.UnmarshalJSON(plaintext); err != nil {
		return Credential{}, fmt.Errorf("open credential: %w", err)
	}
	return c, nil
}
