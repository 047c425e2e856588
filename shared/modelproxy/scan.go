package modelproxy

import (
	"bytes"
	"encoding/binary"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// The inspector's JSON reader. A request body is most of a 100 KB prompt
// and tool descriptions, and the proxy reads every byte of it before the
// request goes anywhere, so reading must cost little next to forwarding
// (bench/modelproxy measures it). A general decoder re-reads each nested
// value once per level it is unmarshalled at; this reader checks the whole
// document in one pass (strict RFC 8259 grammar, valid UTF-8 and surrogate
// pairs, no duplicate member name in any object, at most maxDepth levels),
// and the inspector then walks only the members it judges, skipping the
// opaque values (text, schemas, tool inputs) by their string boundaries.
// The boundaries are the one thing a second parser could disagree on, and
// in strict JSON they are unambiguous: a string ends at the first quote
// not escaped by a backslash.

// maxDepth bounds nesting, as Go's JSON decoders do.
const maxDepth = 10000

// errSyntax and errDuplicate are the two ways a document is not one the
// inspector reads; a syntaxError says where.
var (
	errSyntax    = errors.New("invalid JSON")
	errDuplicate = errors.New("duplicate member name")
)

type syntaxError struct {
	err error
	at  int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%v at byte %d", e.err, e.at) }
func (e *syntaxError) Unwrap() error { return e.err }

func bad(at int) error { return &syntaxError{errSyntax, at} }

// validate checks that b is exactly one strict JSON value with unique
// member names, surrounded by nothing but whitespace, and returns it as a
// document to walk.
func validate(b []byte) (*doc, error) {
	// UTF-8 is checked once for the whole body (outside strings only ASCII
	// passes the grammar). A body without control bytes, which is what
	// clients send (compact JSON escapes them), needs no look at its
	// strings' bytes between quotes and backslashes.
	if !utf8.Valid(b) {
		return nil, bad(0)
	}
	d := docs.Get().(*doc)
	d.b = b
	v := validator{doc: d, clean: !controls(b)}
	i, err := v.value(skipWS(b, 0), 0)
	if err == nil && skipWS(b, i) != len(b) {
		err = bad(skipWS(b, i))
	}
	if err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

// docs keeps documents' tables between requests: reading a request then
// allocates next to nothing.
var docs = sync.Pool{New: func() any { return new(doc) }}

// release gives d back; nothing may use it, or what it returned, after.
func (d *doc) release() {
	clear(d.arena) // member names
	*d = doc{starts: d.starts[:0], ends: d.ends[:0], arena: d.arena[:0], keys: d.keys[:0], side: d.side[:0]}
	docs.Put(d)
}

type validator struct {
	*doc
	clean bool // b holds no byte below 0x20
}

// key is a member name being compared for duplicates: b[s:e], or, for a
// name with escapes, side[s:e] unescaped.
type key struct {
	s, e int
	side bool
}

// str reads a string with the scanner the body needs.
func (v *validator) str(i int) ([]byte, int, error) {
	if v.clean {
		return scanClean(v.b, i)
	}
	return scanString(v.b, i)
}

// controls reports whether b holds a byte below 0x20 (eight bytes at a
// time: the lowest such byte of a word always sets its high bit).
func controls(b []byte) bool {
	var acc uint64
	for len(b) >= 32 {
		x0, x1 := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		x2, x3 := binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])
		acc |= (x0-lsb*0x20)&^x0 | (x1-lsb*0x20)&^x1 | (x2-lsb*0x20)&^x2 | (x3-lsb*0x20)&^x3
		b = b[32:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return acc&msb != 0
}

// scanClean is scanString for a body of valid UTF-8 without control
// bytes: only quotes and backslashes matter, and both are found with
// bytes.IndexByte.
func scanClean(b []byte, i int) (raw []byte, end int, err error) {
	start := i + 1
	i = start
	q := -1 // the next quote at or after i
	for {
		if q < i {
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				return nil, len(b), bad(len(b))
			}
			q = i + j
		}
		j := bytes.IndexByte(b[i:q], '\\')
		if j < 0 {
			return b[start:q], q + 1, nil
		}
		n, ok := escape(b, i+j)
		if !ok {
			return nil, i + j, bad(i + j)
		}
		i += j + n
	}
}

// doc is a validated document. It remembers where the first maxRecorded
// objects and arrays end, so that walking a member does not scan its value
// again at every level above it; past that (only a hostile body has so
// many) a value is skipped by scanning.
type doc struct {
	b            []byte
	starts, ends []int // sorted by start: containers in the order they open
	arena        []member
	// keys are the member names of the objects being validated, as a
	// stack; side holds those that had escapes, unescaped.
	keys []key
	side []byte
}

const maxRecorded = 1 << 16

// open records a container starting at i; close its end.
func (d *doc) open(i int) int {
	if len(d.starts) == maxRecorded {
		return -1
	}
	d.starts, d.ends = append(d.starts, i), append(d.ends, 0)
	return len(d.starts) - 1
}

func (d *doc) close(n, end int) {
	if n >= 0 {
		d.ends[n] = end
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (v *validator) value(i, depth int) (int, error) {
	b := v.b
	if i >= len(b) {
		return i, bad(i)
	}
	switch c := b[i]; {
	case c == '"':
		_, end, err := v.str(i)
		return end, err
	case c == '{':
		return v.object(i, depth+1)
	case c == '[':
		return v.array(i, depth+1)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return number(b, i)
	}
	return i, bad(i)
}

func literal(b []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return i, bad(i)
	}
	return i + len(lit), nil
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func number(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return start, bad(i)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return start, bad(i)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return start, bad(i)
		}
	}
	return i, nil
}

func (v *validator) array(i, depth int) (end int, err error) {
	if depth > maxDepth {
		return i, bad(i)
	}
	n := v.open(i)
	defer func() { v.close(n, end) }()
	b := v.b
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = v.value(i, depth); err != nil {
			return i, err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return i, bad(i)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, bad(i)
		}
	}
}

// name returns the bytes of a member name being compared.
func (v *validator) name(k key) []byte {
	if k.side {
		return v.side[k.s:k.e]
	}
	return v.b[k.s:k.e]
}

// smallObject is how many members are compared pairwise for duplicates;
// a larger object gets a set.
const smallObject = 16

func (v *validator) object(i, depth int) (end int, err error) {
	if depth > maxDepth {
		return i, bad(i)
	}
	n := v.open(i)
	b := v.b
	base := len(v.keys)
	sideBase := len(v.side)
	defer func() { v.keys, v.side = v.keys[:base], v.side[:sideBase]; v.close(n, end) }()
	var set map[string]struct{}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, bad(i)
		}
		raw, kend, err := v.str(i)
		if err != nil {
			return kend, err
		}
		k := key{s: i + 1, e: kend - 1}
		if bytes.IndexByte(raw, '\\') >= 0 {
			// Compared as the names they stand for: "mod\u0065l" is model.
			k = key{s: len(v.side), side: true}
			v.side = append(v.side, unescape(raw)...)
			k.e = len(v.side)
		}
		name := v.name(k)
		switch n := len(v.keys) - base; {
		case set != nil:
			if _, dup := set[string(name)]; dup {
				return i, &syntaxError{errDuplicate, i}
			}
			set[string(name)] = struct{}{}
		default:
			for _, o := range v.keys[base:] {
				if bytes.Equal(v.name(o), name) {
					return i, &syntaxError{errDuplicate, i}
				}
			}
			v.keys = append(v.keys, k)
			if n+1 == smallObject {
				set = make(map[string]struct{}, 2*smallObject)
				for _, o := range v.keys[base:] {
					set[string(v.name(o))] = struct{}{}
				}
			}
		}
		i = skipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return i, bad(i)
		}
		if i, err = v.value(skipWS(b, i+1), depth); err != nil {
			return i, err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return i, bad(i)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, bad(i)
		}
	}
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special has the high bit of every byte of x set that may need a look:
// a quote, a backslash, a control character or a non-ASCII byte. A byte
// below one that needs a look may be flagged too, which costs nothing: the
// scan stops at the first.
func special(x uint64) uint64 {
	q, bs := x^(lsb*'"'), x^(lsb*'\\')
	return (x | (x - lsb*0x20) | (q - lsb) | (bs - lsb)) & msb
}

// scanString reads the string whose opening quote is at b[i]: its raw
// contents (escapes as written) and the index after its closing quote.
// Escapes must be JSON's, \u surrogates paired, and the bytes UTF-8.
func scanString(b []byte, i int) (raw []byte, end int, err error) {
	start := i + 1
	i = start
	for {
		// Sixteen bytes at a time up to the next byte that needs a look
		// (the lowest one flagged is one).
		rest := b[i:]
		for len(rest) >= 16 {
			lo, hi := special(binary.LittleEndian.Uint64(rest)), special(binary.LittleEndian.Uint64(rest[8:]))
			if lo != 0 {
				i += bits.TrailingZeros64(lo) / 8
				break
			}
			if hi != 0 {
				i += 8 + bits.TrailingZeros64(hi)/8
				break
			}
			i += 16
			rest = rest[16:]
		}
		if i >= len(b) {
			return nil, i, bad(i)
		}
		switch c := b[i]; {
		case c == '"':
			return b[start:i], i + 1, nil
		case c == '\\':
			n, ok := escape(b, i)
			if !ok {
				return nil, i, bad(i)
			}
			i += n
		case c < 0x20:
			return nil, i, bad(i)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, i, bad(i)
			}
			i += size
		}
	}
}

// escape checks the escape at b[i] (a backslash) and returns its length.
func escape(b []byte, i int) (int, bool) {
	if i+1 >= len(b) {
		return 0, false
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		r, ok := hex4(b, i+2)
		switch {
		case !ok:
			return 0, false
		case !utf16.IsSurrogate(r):
			return 6, true
		case r >= 0xdc00: // a low surrogate first
			return 0, false
		}
		if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
			return 0, false
		}
		lo, ok := hex4(b, i+8)
		if !ok || lo < 0xdc00 || lo > 0xdfff {
			return 0, false
		}
		return 12, true
	}
	return 0, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// unescape decodes the raw contents of a string validate accepted.
func unescape(raw []byte) []byte {
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if err := stdjson.Unmarshal(q, &s); err != nil {
		return raw // unreachable for validated input; compared as written
	}
	return []byte(s)
}

// The reader: spans of a document validate accepted, walked without
// checking again.

// span is a value in the body: b[s:e].
type span struct{ s, e int }

// member is one member of an object: its name (unescaped) and value.
type member struct {
	name string
	v    span
}

// skipString returns the index after the string whose opening quote is at
// b[i], in a validated document: the first quote not escaped.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		k := i
		for k > 0 && b[k-1] == '\\' {
			k--
		}
		i++
		if (i-1-k)%2 == 0 {
			return i
		}
	}
}

// skip returns the index after the value starting at b[i].
func (d *doc) skip(i int) int {
	b := d.b
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		if n, ok := slices.BinarySearch(d.starts, i); ok {
			return d.ends[n]
		}
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// kind is the first byte of a value: '"', '{', '[', 't', 'f', 'n', or '0'
// for a number; 0 for an absent value.
func kind(b []byte, v span) byte {
	if v.e <= v.s {
		return 0
	}
	switch c := b[v.s]; c {
	case '"', '{', '[', 't', 'f', 'n':
		return c
	}
	return '0'
}

// members returns an object's members in order.
func (d *doc) members(v span) []member {
	b := d.b
	// Built in the spare room of one arena per document, so that a walk
	// allocates a few times, not once per object. What a caller holds is
	// capped at its length, and nothing is written below the arena's
	// length again.
	n := len(d.arena)
	out := d.arena[n:n]
	i := skipWS(b, v.s+1)
	for i < v.e && b[i] == '"' {
		end := skipString(b, i)
		name := b[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			name = unescape(name)
		}
		i = skipWS(b, skipWS(b, end)+1) // past the colon
		ve := d.skip(i)
		out = append(out, member{name: intern(name), v: span{i, ve}})
		i = skipWS(b, ve)
		if i < v.e && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	d.arena = append(d.arena, out...)
	return d.arena[n:len(d.arena):len(d.arena)]
}

// elements returns an array's elements in order.
func (d *doc) elements(v span) []span {
	b := d.b
	var out []span
	i := skipWS(b, v.s+1)
	for i < v.e && b[i] != ']' {
		ve := d.skip(i)
		out = append(out, span{i, ve})
		i = skipWS(b, ve)
		if i < v.e && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return out
}

// str returns a string value, unescaped.
func str(b []byte, v span) (string, bool) {
	if kind(b, v) != '"' {
		return "", false
	}
	raw := b[v.s+1 : v.e-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		raw = unescape(raw)
	}
	return intern(raw), true
}

// integer returns an integer value written without fraction or exponent.
func integer(b []byte, v span) (int64, bool) {
	if kind(b, v) != '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b[v.s:v.e]), 10, 64)
	return n, err == nil
}

// boolean returns a true or false value.
func boolean(b []byte, v span) (bool, bool) {
	switch kind(b, v) {
	case 't':
		return true, true
	case 'f':
		return false, true
	}
	return false, false
}

// interned are the names and values the inspector compares with: reading
// one of them allocates nothing.
var interned = map[string]string{}

func init() {
	add := func(ss ...string) {
		for _, s := range ss {
			interned[s] = s
		}
	}
	add(blockFields...)
	add(toolFields...)
	add(messageBlocks...)
	add(contextEdits...)
	add(toolChoices...)
	for k := range toolTypes {
		add(k)
	}
	for k := range topFields {
		add(k)
	}
	add("role", "user", "assistant", "system", "output_config", "effort", "format", "edits", "ttl", "media_type",
		"data", "url", "file_id", "base64", "ephemeral", "5m", "1h", "enabled", "disabled", "adaptive",
		"budget_tokens", "display", "user_id", "disable_parallel_tool_use", "web_search", "web_fetch", "application/pdf")
}

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}
