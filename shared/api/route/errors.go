package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// Error is an API error: a status, a stable snake_case code and a message
// written for a human. Messages are built by us, never from err.Error() of
// an internal failure, so nothing secret or internal reaches a body.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Invalid is 400 invalid_request.
func Invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: fmt.Sprintf(format, args...)}
}

// NotFound is 404 not_found: what + " not found".
func NotFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

// The API's fixed answers.
var (
	ErrUnauthenticated = &Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "a valid bearer token is required"}
	ErrForbidden       = &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "this token may not do that"}
	ErrTooLarge        = &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: "request body is over 1 MiB"}
	ErrInternal        = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
	ErrUnavailable     = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the control plane cannot decide right now; treat this as deny and retry"}
)

// Conflict is 409 conflict.
func Conflict(format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: "conflict", Message: fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// WriteError writes e in the error envelope.
func WriteError(w http.ResponseWriter, e *Error) {
	var b errorBody
	b.Error.Code, b.Error.Message = e.Code, e.Message
	WriteJSON(w, e.Status, b)
}

// WriteJSON writes v with status, uncached, without HTML escaping.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

// ReadBody reads a request body of at most MaxBody bytes.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	return ReadBodyMax(w, r, MaxBody)
}

// ReadBodyMax reads a request body of at most limit bytes (a webhook's
// sender decides its size, not us).
func ReadBodyMax(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		if limit != MaxBody {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("request body is over %d bytes", limit)}
		}
		return nil, ErrTooLarge
	}
	if err != nil {
		return nil, Invalid("could not read the request body")
	}
	return b, nil
}

// Decode reads a JSON body into v strictly: one object, no unknown fields.
func Decode(w http.ResponseWriter, r *http.Request, v any) *Error {
	b, e := ReadBody(w, r)
	if e != nil {
		return e
	}
	return DecodeBytes(b, v)
}

// DecodeBytes is Decode of a body already read.
func DecodeBytes(b []byte, v any) *Error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return Invalid("%s", describeJSONError(err, b, v))
	}
	if dec.More() {
		return Invalid("request body has data after the JSON value")
	}
	return nil
}

// describeJSONError turns encoding/json's errors into messages that name
// the field by its path (budget.limit_usd) and say what it must be in
// JSON's words, never Go's, without quoting the input.
func describeJSONError(err error, body []byte, v any) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "request body is empty"
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		what := "the request body"
		if typ.Field != "" {
			what = typ.Field
		}
		return fmt.Sprintf("%s: must be %s, not %s", what, jsonKind(typ.Type), jsonValueKind(typ.Value))
	// encoding/json has no typed error for unknown fields; its text is stable.
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		if path := unknownField(body, reflect.TypeOf(v)); path != "" {
			return path + ": unknown field"
		}
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	}
	return "malformed JSON"
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// jsonKind names what a Go type reads from JSON.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// jsonValueKind names the JSON kind encoding/json reports it found.
func jsonValueKind(v string) string {
	switch {
	case v == "object":
		return "an object"
	case v == "array":
		return "a list"
	case v == "bool":
		return "true or false"
	case v == "string":
		return "a string"
	case v == "null":
		return "null"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return "another kind of value"
}

// unknownField returns the path (budget.x, items[2].y) of a field of body
// that t has no field for, or "". It is asked only after the decoder
// refused an unknown field, to say where.
func unknownField(body []byte, t reflect.Type) string {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&raw) != nil || t == nil {
		return ""
	}
	return unknownAt("", raw, t)
}

func unknownAt(path string, v any, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		return "" // reads itself
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			at := k
			if path != "" {
				at = path + "." + k
			}
			ft, ok := jsonField(t, k)
			if !ok {
				return at
			}
			if p := unknownAt(at, m[k], ft); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		l, ok := v.([]any)
		if !ok {
			return ""
		}
		for i, e := range l {
			if p := unknownAt(fmt.Sprintf("%s[%d]", path, i), e, t.Elem()); p != "" {
				return p
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		for k, e := range m {
			if p := unknownAt(fmt.Sprintf("%s[%q]", path, k), e, t.Elem()); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonField finds the field encoding/json would decode key into: by tag
// name or field name, case-insensitively, through embedded structs.
func jsonField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if ft, ok := jsonField(et, key); ok {
					return ft, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f.Type, true
		}
	}
	return nil, false
}
