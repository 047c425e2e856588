package schemaguard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// errTooDeep is returned by parseJSON when a document nests deeper than
// allowed; callers turn it into a reason of their own.
var errTooDeep = errors.New("nesting too deep")

// Digest returns "sha256:<hex>" of the canonical form of a JSON document:
// object keys sorted, no insignificant whitespace, strings re-escaped by
// encoding/json without HTML escaping, numbers exactly as written. The
// document must be valid UTF-8 with no duplicate object keys; two documents
// that differ only in key order or whitespace have the same digest.
func Digest(schema []byte) (string, error) {
	v, err := parseJSON(schema, 0)
	if err != nil {
		return "", fmt.Errorf("schemaguard: digest: %w", err)
	}
	canon, err := canonicalJSON(v)
	if err != nil {
		return "", fmt.Errorf("schemaguard: digest: %w", err)
	}
	return digestOf(canon), nil
}

// Canonical returns the canonical form of a JSON document, the bytes Digest
// hashes. It fails on what Digest fails on.
func Canonical(doc []byte) ([]byte, error) {
	v, err := parseJSON(doc, 0)
	if err != nil {
		return nil, fmt.Errorf("schemaguard: canonical: %w", err)
	}
	canon, err := canonicalJSON(v)
	if err != nil {
		return nil, fmt.Errorf("schemaguard: canonical: %w", err)
	}
	return canon, nil
}

func digestOf(canon []byte) string {
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalJSON encodes a value produced by parseJSON. encoding/json sorts
// map keys and writes json.Number verbatim, which is the canonical form.
func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// parseJSON decodes exactly one JSON value into map[string]any / []any /
// string / json.Number / bool / nil. It rejects invalid UTF-8, duplicate
// object keys and trailing data. maxDepth > 0 bounds container nesting (the
// root container is depth 1) and is enforced while reading, before any deep
// structure is built.
func parseJSON(b []byte, maxDepth int) (any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	p := parser{dec: dec, maxDepth: maxDepth}
	v, err := p.value(1)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

type parser struct {
	dec      *json.Decoder
	maxDepth int
}

func (p *parser) value(depth int) (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of JSON input")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if p.maxDepth > 0 && depth > p.maxDepth {
			return nil, errTooDeep
		}
		switch t {
		case '{':
			return p.object(depth)
		case '[':
			return p.array(depth)
		}
		return nil, fmt.Errorf("unexpected %q", rune(t))
	case string, json.Number, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func (p *parser) object(depth int) (any, error) {
	m := make(map[string]any)
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is %v, not a string", tok)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("duplicate object key %q", key)
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	if _, err := p.dec.Token(); err != nil { // the closing '}'
		return nil, err
	}
	return m, nil
}

func (p *parser) array(depth int) (any, error) {
	a := []any{}
	for p.dec.More() {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	if _, err := p.dec.Token(); err != nil { // the closing ']'
		return nil, err
	}
	return a, nil
}
