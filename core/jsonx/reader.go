package jsonx

import (
	"fmt"
	"strconv"
)

// MaxDepth bounds the nesting the Reader follows; callers of Scan without
// a limit of their own use it too.
const MaxDepth = 512

// Reader reads one JSON document in place, without reflection (a pull
// reader: the caller says what it expects next). The answers of a model are decoded on every call and every streamed chunk,
// where encoding/json's reflection costs more than the HTTP exchange
// around it. It is strict (RFC 8259: what json.Valid accepts, nested at
// most MaxDepth deep). Every method records the first error and then
// does nothing, so that a decoder checks err once at the end.
type Reader struct {
	b       []byte
	i       int
	depth   int
	err     error
	scratch []byte
}

// NewReader reads b, which must stay unchanged while it is read.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first error the reader met, nil if none.
func (r *Reader) Err() error { return r.err }

// Fail records an error at the reader's offset (the first one wins).
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("offset %d: %s", r.i, fmt.Sprintf(format, args...))
	}
}

// Stop records err, a reason to read no further that is not about the
// JSON itself (a decoder's limit): the decoder reports it as it is.
func (r *Reader) Stop(err error) {
	if r.err == nil {
		r.err = err
	}
}

// peek skips whitespace and returns the next byte, 0 at the end or after
// an error.
func (r *Reader) peek() byte {
	for r.err == nil && r.i < len(r.b) {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return c
		}
	}
	return 0
}

// End checks that only whitespace follows the document.
func (r *Reader) End() error {
	if r.peek(); r.err == nil && r.i < len(r.b) {
		r.Fail("more after the JSON value")
	}
	return r.err
}

func (r *Reader) expect(c byte) bool {
	if r.peek() != c {
		if r.err == nil {
			r.Fail("expected %q, found %s", c, r.found())
		}
		return false
	}
	r.i++
	return true
}

func (r *Reader) found() string {
	if r.i >= len(r.b) {
		return "the end"
	}
	return strconv.Quote(string(r.b[r.i]))
}

// Null consumes a null if one is next.
func (r *Reader) Null() bool {
	if r.peek() == 'n' {
		r.literal("null")
		return true
	}
	return false
}

func (r *Reader) literal(word string) {
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		r.Fail("invalid literal")
		return
	}
	r.i += len(word)
}

// Object calls each for every member; each must consume the value (read
// it or skip it). The key is valid only during the call.
func (r *Reader) Object(each func(key []byte)) {
	if !r.expect('{') || !r.enter() {
		return
	}
	defer r.leave()
	if r.peek() == '}' {
		r.i++
		return
	}
	for r.err == nil {
		if r.peek() != '"' {
			r.Fail("expected a member name, found %s", r.found())
			return
		}
		key := r.stringBytes()
		if !r.expect(':') {
			return
		}
		r.peek()
		start := r.i
		each(key)
		if r.err == nil && r.i == start {
			r.Skip() // each left the value: skip it
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return
		default:
			r.Fail("expected ',' or '}', found %s", r.found())
		}
	}
}

// Array calls each for every element; each must consume it.
func (r *Reader) Array(each func(i int)) {
	if !r.expect('[') || !r.enter() {
		return
	}
	defer r.leave()
	if r.peek() == ']' {
		r.i++
		return
	}
	for n := 0; r.err == nil; n++ {
		r.peek()
		start := r.i
		each(n)
		if r.err == nil && r.i == start {
			r.Skip()
		}
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return
		default:
			r.Fail("expected ',' or ']', found %s", r.found())
		}
	}
}

func (r *Reader) enter() bool {
	if r.depth++; r.depth > MaxDepth {
		r.Fail("nested deeper than %d", MaxDepth)
		return false
	}
	return true
}

func (r *Reader) leave() { r.depth-- }

// Str reads a string.
func (r *Reader) Str() string {
	if r.peek() != '"' {
		r.Fail("expected a string, found %s", r.found())
		return ""
	}
	return string(r.stringBytes())
}

// StrOrNull reads a string or null ("").
func (r *Reader) StrOrNull() string {
	if r.Null() {
		return ""
	}
	return r.Str()
}

// stringBytes reads a string at r.i (a '"'): a slice of the document when
// it holds no escape, else the decoded text in r.scratch. Either is valid
// until the next read.
func (r *Reader) stringBytes() []byte {
	r.i++ // the opening quote
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return r.b[start : r.i-1]
		case c == '\\':
			return r.escaped(start)
		case c < 0x20:
			r.Fail("a control character in a string")
			return nil
		}
		r.i++
	}
	r.Fail("a string without its closing quote")
	return nil
}

// escaped reads the rest of a string holding escapes (r.i at the first
// backslash, its text from start) and decodes it with AppendUnescaped.
func (r *Reader) escaped(start int) []byte {
	for r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == '"':
			out, ok := AppendUnescaped(r.scratch[:0], r.b[start:r.i])
			r.scratch = out
			if !ok {
				r.Fail("an invalid escape in a string")
				return nil
			}
			r.i++
			return out
		case c < 0x20:
			r.Fail("a control character in a string")
			return nil
		case c == '\\':
			r.i += 2
		default:
			r.i++
		}
	}
	r.Fail("a string without its closing quote")
	return nil
}

// number reads a number and returns its text.
func (r *Reader) number() []byte {
	c := r.peek()
	start := r.i
	if c == '-' {
		r.i++
	}
	digits := func() int {
		n := 0
		for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	switch {
	case r.i < len(r.b) && r.b[r.i] == '0':
		r.i++
	case digits() == 0:
		r.Fail("expected a number")
		return nil
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if digits() == 0 {
			r.Fail("a number without digits after '.'")
			return nil
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			r.Fail("a number without exponent digits")
			return nil
		}
	}
	return r.b[start:r.i]
}

// Float reads a number.
func (r *Reader) Float() float64 {
	n := r.number()
	if r.err != nil {
		return 0
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		r.Fail("number %s is out of range", n)
	}
	return f
}

// Int reads a number that must be an integer; null reads as 0 (some
// servers send null counts).
func (r *Reader) Int() int {
	if r.Null() {
		return 0
	}
	n := r.number()
	if r.err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(n), 64)
		if ferr != nil || f != float64(int64(f)) {
			r.Fail("%s is not an integer", n)
			return 0
		}
		v = int64(f)
	}
	return int(v)
}

// Bool reads true or false.
func (r *Reader) Bool() bool {
	switch r.peek() {
	case 't':
		r.literal("true")
		return true
	case 'f':
		r.literal("false")
		return false
	}
	r.Fail("expected true or false, found %s", r.found())
	return false
}

// Skip reads and checks any value.
func (r *Reader) Skip() {
	switch c := r.peek(); {
	case c == '{':
		r.Object(func([]byte) { r.Skip() })
	case c == '[':
		r.Array(func(int) { r.Skip() })
	case c == '"':
		r.stringBytes()
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		r.number()
	case r.err == nil:
		r.Fail("expected a JSON value, found %s", r.found())
	}
}

// Raw reads any value and returns its text.
func (r *Reader) Raw() []byte {
	r.peek()
	start := r.i
	r.Skip()
	if r.err != nil {
		return nil
	}
	return r.b[start:r.i]
}

// Kind is the next value's first byte: '{', '[', '"', 'n', 't', 'f', or
// '0' for a number.
func (r *Reader) Kind() byte {
	c := r.peek()
	if c == '-' || c >= '0' && c <= '9' {
		return '0'
	}
	return c
}
