package api

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

func invalid(format string, args ...any) *Error {
	return &Error{http.StatusBadRequest, "invalid_request", fmt.Sprintf(format, args...)}
}

func notFound(what string) *Error {
	return &Error{http.StatusNotFound, "not_found", what + " not found"}
}

var (
	errUnauthenticated = &Error{http.StatusUnauthorized, "unauthenticated", "a valid bearer token is required"}
	errForbidden       = &Error{http.StatusForbidden, "forbidden", "this token may not do that"}
	errTooLarge        = &Error{http.StatusRequestEntityTooLarge, "too_large", "request body is over 1 MiB"}
	errInternal        = &Error{http.StatusInternalServerError, "internal", "internal error"}
	errUnavailable     = &Error{http.StatusServiceUnavailable, "unavailable", "the control plane cannot decide right now; treat this as deny and retry"}
)

func conflict(format string, args ...any) *Error {
	return &Error{http.StatusConflict, "conflict", fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, e *Error) {
	var b errorBody
	b.Error.Code, b.Error.Message = e.Code, e.Message
	writeJSON(w, e.Status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// maxBody is the largest request body accepted.
const maxBody = 1 << 20

// readBody reads a request body of at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	return readBodyMax(w, r, maxBody)
}

// readBodyMax reads a request body of at most limit bytes.
func readBodyMax(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		if limit != maxBody {
			return nil, &Error{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body is over %d bytes", limit)}
		}
		return nil, errTooLarge
	}
	if err != nil {
		return nil, invalid("could not read the request body")
	}
	return b, nil
}

// decode reads a JSON body into v strictly: one object, no unknown fields.
func decode(w http.ResponseWriter, r *http.Request, v any) *Error {
	b, e := readBody(w, r)
	if e != nil {
		return e
	}
	return decodeBytes(b, v)
}

func decodeBytes(b []byte, v any) *Error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return invalid("%s", describeJSONError(err))
	}
	if dec.More() {
		return invalid("request body has data after the JSON value")
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
