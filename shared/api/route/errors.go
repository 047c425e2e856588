package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
		return Invalid("%s", describeJSONError(err))
	}
	if dec.More() {
		return Invalid("request body has data after the JSON value")
	}
	return nil
}

// describeJSONError turns encoding/json's errors into messages that name
// the field, without quoting the input.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "request body is empty"
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s: must be %s", typ.Field, typ.Type)
	// encoding/json has no typed error for unknown fields; its text is stable.
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	}
	return "malformed JSON"
}
