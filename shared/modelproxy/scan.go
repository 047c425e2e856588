package modelproxy

import (
	"bytes"
	"encoding/binary"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
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
// pairs, no duplicate member name in any object, at most maxDepth levels)
// and records where every value starts and ends (the tape), so that the
// inspector then walks only the members it judges and steps over the
// opaque values (text, schemas, tool inputs) without reading them again.
// Where a value ends is the one thing a second parser could disagree on,
// and in strict JSON it is unambiguous: a string ends at the first quote
// not escaped by a backslash, a container at the bracket that balances
// it outside strings. The tape is that reading, made once.

// Bounds of a document, as Go's JSON decoders bound depth; maxValues
// bounds the tape (16 bytes a value) for a body of tiny values.
const (
	maxDepth  = 10000
	maxValues = 1 << 20
)

// errSyntax and errDuplicate are the two ways a document is not one the
// inspector reads, errTooMany a document too large to record; a
// syntaxError says where.
var (
	errSyntax    = errors.New("invalid JSON")
	errDuplicate = errors.New("duplicate member name")
	errTooMany   = fmt.Errorf("more than %d values", maxValues)
)

type syntaxError struct {
	err error
	at  int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%v at byte %d", e.err, e.at) }
func (e *syntaxError) Unwrap() error { return e.err }

func bad(at int) error { return &syntaxError{errSyntax, at} }

// node is one value of a document (a member name is one too, before its
// value), in the order they start: b[s:e], and the index on the tape
// after it and everything it holds.
type node struct {
	s, e, next int32
	esc        bool // a string with a backslash
}

// doc is a validated document and its tape.
type doc struct {
	b    []byte
	tape []node
	// Scratch of validation: the containers open, and the member names
	// of the objects among them (those with escapes unescaped in side).
	stack []frame
	keys  []key
	side  []byte
	// arena and spans hold what members and elements return; sets are
	// name sets for large objects, kept for the next.
	arena []member
	spans []span
	sets  []map[uint64]int
}

// frame is an open container: its node, where its member names start in
// keys and side, and, once an object has many members, a set of their
// names' hashes (each to one name in keys with that hash).
type frame struct {
	t, keys, side int
	close         byte // '}' or ']'
	set           map[uint64]int
}

// nameSeed seeds the hashes of member names; a collision only costs a
// comparison with every name of the object.
var nameSeed = maphash.MakeSeed()

// key is a member name being compared for duplicates: b[s:e], or, for a
// name with escapes, side[s:e] unescaped.
type key struct {
	s, e int
	side bool
}

// keptValues is the largest tape a released document keeps, keptSide the
// most bytes of unescaped names (which one long escaped name fills without
// many values).
const (
	keptValues = 1 << 16
	keptSide   = 1 << 20
)

// docs keeps documents' tables between requests: reading a request then
// allocates next to nothing.
var docs = sync.Pool{New: func() any { return new(doc) }}

// release gives d back; nothing may use it, or what it returned, after.
func (d *doc) release() {
	d.reset()
	docs.Put(d)
}

// reset empties d for the next document, keeping its tables unless they
// grew past what an ordinary request needs.
func (d *doc) reset() {
	clear(d.arena) // member names
	for _, f := range d.stack {
		if f.set != nil {
			clear(f.set)
			d.sets = append(d.sets, f.set)
		}
	}
	clear(d.stack[:cap(d.stack)])
	*d = doc{tape: d.tape[:0], stack: d.stack[:0], keys: d.keys[:0], side: d.side[:0], arena: d.arena[:0], spans: d.spans[:0], sets: d.sets}
	if cap(d.tape) > keptValues || cap(d.side) > keptSide {
		// A huge body's tables are not kept for the requests after it.
		*d = doc{}
	}
}

// validate checks that b is exactly one strict JSON value with unique
// member names, surrounded by nothing but whitespace, and returns it as a
// document to walk.
func validate(b []byte) (*doc, error) {
	if len(b) > 1<<31-1 {
		return nil, &syntaxError{errTooMany, 0}
	}
	d := docs.Get().(*doc)
	d.b = b
	if cap(d.tape) == 0 { // a new document: room for a conversation's values
		d.tape = make([]node, 0, min(len(b)/32, 1<<12))
	}
	i, err := d.parse(skipWS(b, 0))
	if err == nil && skipWS(b, i) != len(b) {
		err = bad(skipWS(b, i))
	}
	if err != nil {
		d.release()
		return nil, err
	}
	return d, nil
}

// skipWS returns the index of the first byte from i that is not JSON
// whitespace; compact JSON, what clients send, has none, and one compare
// says so.
func skipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// parse reads the value at b[i] onto the tape and returns the index after
// it. Containers are kept on d.stack, not the Go stack: a value is read,
// then the containers it closes are closed, until a comma asks for the
// next value.
func (d *doc) parse(i int) (int, error) {
	for {
		// A value starts at i.
		if len(d.tape) == maxValues {
			return i, &syntaxError{errTooMany, i}
		}
		if i >= len(d.b) {
			return i, bad(i)
		}
		ended := true
		var err error
		if c := d.b[i]; c == '{' || c == '[' {
			i, ended, err = d.open(i, c)
		} else {
			i, err = d.scalar(i)
		}
		if err != nil {
			return i, err
		}
		if !ended {
			continue
		}
		// A value ended at i: close what it ends, up to the next comma.
		var done bool
		if i, done, err = d.closeUpTo(i); err != nil || done {
			return i, err
		}
	}
}

// open reads the container opening at b[i] (c, '{' or '['): it is pushed
// on the stack and i moves to its first value, or, empty, it is closed
// at once and ended says so.
func (d *doc) open(i int, c byte) (next int, ended bool, err error) {
	b := d.b
	if len(d.stack) == maxDepth {
		return i, false, bad(i)
	}
	t := len(d.tape)
	d.tape = append(d.tape, node{s: int32(i)})
	d.stack = append(d.stack, frame{t: t, keys: len(d.keys), side: len(d.side), close: c + 2})
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == c+2 { // '}' and ']' are two past '{' and '['
		return d.close(i), true, nil
	}
	if c == '{' {
		i, err = d.name(i)
	}
	return i, false, err
}

// scalar reads the string, literal or number at b[i] onto the tape.
func (d *doc) scalar(i int) (int, error) {
	b := d.b
	t := len(d.tape)
	e, esc := 0, false
	switch c := b[i]; {
	case c == '"':
		var err error
		if e, esc, err = scanString(b, i); err != nil {
			return e, err
		}
	case c == 't' || c == 'f' || c == 'n':
		lit := literals[c]
		if !bytes.HasPrefix(b[i:], lit) {
			return i, bad(i)
		}
		e = i + len(lit)
	case c == '-' || (c >= '0' && c <= '9'):
		var err error
		if e, err = number(b, i); err != nil {
			return e, err
		}
	default:
		return i, bad(i)
	}
	d.tape = append(d.tape, node{s: int32(i), e: int32(e), next: int32(t + 1), esc: esc})
	return e, nil
}

// literals are JSON's three words, by their first byte.
var literals = [256][]byte{'t': []byte("true"), 'f': []byte("false"), 'n': []byte("null")}

// closeUpTo closes the containers the value ending at i ends, up to the
// comma that asks for the next value (and, in an object, its name); done
// when the outermost value ended.
func (d *doc) closeUpTo(i int) (next int, done bool, err error) {
	b := d.b
	for {
		if len(d.stack) == 0 {
			return i, true, nil
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return i, false, bad(i)
		}
		closer := d.stack[len(d.stack)-1].close
		if b[i] == closer {
			i = d.close(i)
			continue
		}
		if b[i] != ',' {
			return i, false, bad(i)
		}
		i = skipWS(b, i+1)
		if closer == '}' {
			i, err = d.name(i)
		}
		return i, false, err
	}
}

// close ends the innermost container at its closing bracket b[i].
func (d *doc) close(i int) int {
	f := d.stack[len(d.stack)-1]
	d.tape[f.t].e, d.tape[f.t].next = int32(i+1), int32(len(d.tape))
	d.stack[len(d.stack)-1] = frame{}
	d.stack = d.stack[:len(d.stack)-1]
	d.keys, d.side = d.keys[:f.keys], d.side[:f.side]
	if f.set != nil {
		clear(f.set)
		d.sets = append(d.sets, f.set)
	}
	return i + 1
}

// smallObject is how many members are compared pairwise for duplicates;
// a larger object gets a set.
const smallObject = 16

// name reads the member name at b[i] of the innermost object, refuses a
// duplicate, and returns the index after the colon that follows it.
func (d *doc) name(i int) (int, error) {
	b := d.b
	if len(d.tape) == maxValues {
		return i, &syntaxError{errTooMany, i}
	}
	if i >= len(b) || b[i] != '"' {
		return i, bad(i)
	}
	e, esc, err := scanString(b, i)
	if err != nil {
		return e, err
	}
	t := len(d.tape)
	d.tape = append(d.tape, node{s: int32(i), e: int32(e), next: int32(t + 1), esc: esc})
	k := key{s: i + 1, e: e - 1}
	if esc {
		// Compared as the names they stand for: "mod\u0065l" is model.
		k = key{s: len(d.side), side: true}
		d.side = append(d.side, unescape(b[i+1:e-1])...)
		k.e = len(d.side)
	}
	f := &d.stack[len(d.stack)-1]
	name := d.keyBytes(k)
	if d.duplicate(f, name) {
		return i, &syntaxError{errDuplicate, i}
	}
	d.keys = append(d.keys, k)
	if f.set != nil {
		f.set[maphash.Bytes(nameSeed, name)] = len(d.keys) - 1
	} else if len(d.keys)-f.keys == smallObject {
		if n := len(d.sets); n > 0 {
			f.set, d.sets = d.sets[n-1], d.sets[:n-1]
		} else {
			f.set = make(map[uint64]int, 4*smallObject)
		}
		for j := f.keys; j < len(d.keys); j++ {
			f.set[maphash.Bytes(nameSeed, d.keyBytes(d.keys[j]))] = j
		}
	}
	i = skipWS(b, e)
	if i >= len(b) || b[i] != ':' {
		return i, bad(i)
	}
	return skipWS(b, i+1), nil
}

// duplicate reports whether the object of f already has a member name.
func (d *doc) duplicate(f *frame, name []byte) bool {
	if f.set != nil {
		j, ok := f.set[maphash.Bytes(nameSeed, name)]
		if !ok {
			return false
		}
		if bytes.Equal(d.keyBytes(d.keys[j]), name) {
			return true
		}
		// A collision: the names are compared one by one.
	}
	for _, o := range d.keys[f.keys:] {
		if o.e-o.s == len(name) && bytes.Equal(d.keyBytes(o), name) {
			return true
		}
	}
	return false
}

func (d *doc) keyBytes(k key) []byte {
	if k.side {
		return d.side[k.s:k.e]
	}
	return d.b[k.s:k.e]
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and returns
// the index after it.
func number(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, bad(i)
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, bad(j)
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, bad(j)
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special has the high bit of the lowest byte of x set that needs a look
// (a quote, a backslash, a control character or a non-ASCII byte), if
// any. Bytes above it may be flagged too (a borrow carries up from a
// byte below 0x20), which costs nothing: the scan stops at the lowest.
func special(x uint64) uint64 {
	q, bs := x^(lsb*'"'), x^(lsb*'\\')
	return (x | (x - lsb*0x20) | (q - lsb) | (bs - lsb)) & msb
}

// plain returns how many bytes at the start of s need no look, sixteen
// bytes at a time: up to the first that does, or to the last sixteen.
func plain(s []byte) int {
	n := 0
	for ; len(s) >= 16; s = s[16:] {
		lo, hi := special(binary.LittleEndian.Uint64(s)), special(binary.LittleEndian.Uint64(s[8:]))
		if lo|hi != 0 {
			if lo != 0 {
				return n + bits.TrailingZeros64(lo)/8
			}
			return n + 8 + bits.TrailingZeros64(hi)/8
		}
		n += 16
	}
	return n
}

// scanString reads the string whose opening quote is at b[i] and returns
// the index after its closing quote and whether it holds an escape.
// Escapes must be JSON's, \u surrogates paired, and the bytes UTF-8 (a
// body is UTF-8 when its strings are: outside them only ASCII passes the
// grammar).
func scanString(b []byte, i int) (end int, esc bool, err error) {
	i++
	for {
		i += plain(b[i:])
		if i >= len(b) {
			return i, esc, bad(i)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			if i+1 < len(b) && shortEscape[b[i+1]] {
				i, esc = i+2, true
				break
			}
			n, ok := escape(b, i)
			if !ok {
				return i, esc, bad(i)
			}
			i, esc = i+n, true
		case c < 0x20:
			return i, esc, bad(i)
		case c < utf8.RuneSelf:
			i++ // the last bytes, read one by one
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, esc, bad(i)
			}
			i += size
		}
	}
}

// shortEscape are the characters of a two-byte escape.
var shortEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

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

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
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

// The reader: values of a document validate accepted, walked on its tape
// without reading their bytes again.

// span is a value in the body: b[s:e], node t of the tape; the zero span
// is an absent value.
type span struct{ s, e, t int }

// member is one member of an object: its name (unescaped) and value.
type member struct {
	name string
	v    span
}

// root is the document's value.
func (d *doc) root() span {
	n := d.tape[0]
	return span{int(n.s), int(n.e), 0}
}

// at is node t as a span.
func (d *doc) at(t int) span {
	n := d.tape[t]
	return span{int(n.s), int(n.e), t}
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
	// Built in the spare room of one arena per document, so that a walk
	// allocates a few times, not once per object. What a caller holds is
	// capped at its length, and nothing is written below the arena's
	// length again.
	n := len(d.arena)
	out := d.arena[n:n]
	end := int(d.tape[v.t].next)
	for t := v.t + 1; t < end; {
		k := d.tape[t]
		name := d.b[k.s+1 : k.e-1]
		if k.esc {
			name = unescape(name)
		}
		out = append(out, member{name: intern(name), v: d.at(t + 1)})
		t = int(d.tape[t+1].next)
	}
	d.arena = append(d.arena, out...)
	return d.arena[n:len(d.arena):len(d.arena)]
}

// elements returns an array's elements in order.
func (d *doc) elements(v span) []span {
	n := len(d.spans)
	out := d.spans[n:n]
	end := int(d.tape[v.t].next)
	for t := v.t + 1; t < end; t = int(d.tape[t].next) {
		out = append(out, d.at(t))
	}
	d.spans = append(d.spans, out...)
	return d.spans[n:len(d.spans):len(d.spans)]
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
			if s != "" && recent[internSlot([]byte(s))] == "" {
				recent[internSlot([]byte(s))] = s
			}
		}
	}
	add(blockFields...)
	add(toolFields...)
	add(messageBlocks...)
	add(contextEdits...)
	for _, ms := range editSettings {
		add(ms...)
	}
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
	if len(b) == 0 {
		return ""
	}
	if s := recent[internSlot(b)]; s == string(b) {
		return s
	}
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}

// recent holds one interned string per slot (the first to claim it),
// looked up before the map: member names repeat ("type", "text",
// "content"), and a slot is a compare where the map hashes.
var recent [256]string

func internSlot(b []byte) byte {
	return byte(len(b)*31) ^ b[0]*7 ^ b[len(b)-1]
}
