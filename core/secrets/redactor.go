package secrets

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Mask replaces a secret wherever one is found.
const Mask = "[redacted]"

// MinLength is the shortest value, in bytes, that Add takes as a secret.
const MinLength = 6

// maxValues bounds the values a Redactor keeps: a variable whose value
// changes adds one each time it is read; past the bound the oldest goes.
const maxValues = 256

// Redactor knows the secret values read so far and cuts them out of text.
// The zero value and New's are empty; a nil *Redactor redacts nothing.
type Redactor struct {
	mu  sync.Mutex // serialises Add
	set atomic.Pointer[valueSet]
}

// New returns an empty Redactor.
func New() *Redactor { return &Redactor{} }

// valueSet is one immutable generation of the values, swapped whole.
type valueSet struct {
	order   []string // in the order added, for dropping the oldest
	values  []string // longest first: a secret inside another is cut as part of the longer
	longest int
	first   [256]bool // bytes a secret may start with (besides an escape)
	escapes [256]bool // letters after '\' whose decoding may be part of a secret
}

func newValueSet(order []string) *valueSet {
	s := &valueSet{order: order, values: append([]string(nil), order...)}
	// Longest first (insertion sort: a few values).
	for i := 1; i < len(s.values); i++ {
		for j := i; j > 0 && len(s.values[j]) > len(s.values[j-1]); j-- {
			s.values[j], s.values[j-1] = s.values[j-1], s.values[j]
		}
	}
	s.escapes['u'] = true
	for _, v := range s.values {
		s.longest = max(s.longest, len(v))
		s.first[v[0]] = true
		for i := 0; i < len(v); i++ {
			switch v[i] {
			case '"', '\\', '/':
				s.escapes[v[i]] = true
			case '\b':
				s.escapes['b'] = true
			case '\f':
				s.escapes['f'] = true
			case '\n':
				s.escapes['n'] = true
			case '\r':
				s.escapes['r'] = true
			case '\t':
				s.escapes['t'] = true
			}
		}
	}
	return s
}

// Add makes values secrets from now on. Values shorter than MinLength are
// ignored; a value already known costs a comparison per known value.
func (r *Redactor) Add(values ...string) {
	if r == nil {
		return
	}
	for _, v := range values {
		if len(v) >= MinLength && !r.known(v) {
			r.add(v)
		}
	}
}

func (r *Redactor) known(v string) bool {
	if s := r.set.Load(); s != nil {
		for _, x := range s.order {
			if x == v {
				return true
			}
		}
	}
	return false
}

func (r *Redactor) add(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.known(v) {
		return
	}
	var order []string
	if old := r.set.Load(); old != nil {
		order = append(order, old.order...)
	}
	order = append(order, strings.Clone(v))
	if len(order) > maxValues {
		order = order[len(order)-maxValues:]
	}
	r.set.Store(newValueSet(order))
}

// Len is the length of the longest secret (0 when none).
func (r *Redactor) Len() int {
	if s := r.values(); s != nil {
		return s.longest
	}
	return 0
}

func (r *Redactor) values() *valueSet {
	if r == nil {
		return nil
	}
	return r.set.Load()
}

// String cuts every secret out of s, plain or written with JSON escapes.
func (r *Redactor) String(s string) string {
	if set := r.values(); set != nil && set.maybe(s) {
		s, _ = set.redact(s, false)
	}
	return s
}

// Bytes is String for bytes: b itself when it holds no secret.
func (r *Redactor) Bytes(b []byte) []byte {
	return r.bytes(b, false)
}

// JSON cuts every secret out of the JSON text b, decoding its strings: a
// secret inside a string becomes Mask there, one outside (a number) the
// string "[redacted]", so that valid JSON stays valid. b itself when it
// holds no secret.
func (r *Redactor) JSON(b []byte) []byte {
	return r.bytes(b, true)
}

// JSONString is JSON for a JSON text held in a string: s itself when it
// holds no secret.
func (r *Redactor) JSONString(s string) string {
	if set := r.values(); set != nil && set.maybe(s) {
		s, _ = set.redact(s, true)
	}
	return s
}

func (r *Redactor) bytes(b []byte, json bool) []byte {
	set := r.values()
	if set == nil || len(b) == 0 {
		return b
	}
	s := unsafe.String(unsafe.SliceData(b), len(b)) // read only, not kept
	if !set.maybe(s) {
		return b
	}
	if out, changed := set.redact(s, json); changed {
		return []byte(out)
	}
	return b
}

// Head is String for the beginning of a longer text (an excerpt, a line
// cut short): besides the secrets it holds, a tail that may be the start
// of one is cut off.
func (r *Redactor) Head(s string) string {
	set := r.values()
	if set == nil {
		return s
	}
	if set.maybe(s) {
		s, _ = set.redact(s, false)
	}
	return s[:set.holdFrom(s)]
}

// maybe is a quick test: false when s cannot hold a secret (no plain
// occurrence, and no escape whose decoding could be part of one).
func (set *valueSet) maybe(s string) bool {
	for _, v := range set.values {
		if strings.Contains(s, v) {
			return true
		}
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\\')
		if j < 0 {
			return false
		}
		i += j + 1
		if i < len(s) && set.escapes[s[i]] {
			return true
		}
	}
}

// redact replaces each secret of s with Mask. In JSON mode, escapes are
// decoded only inside strings and a match never crosses a string's quote.
func (set *valueSet) redact(s string, json bool) (string, bool) {
	var b strings.Builder
	found := false
	last := 0 // s[last:i] is not copied yet
	inString := false
	for i := 0; i < len(s); {
		c := s[i]
		if json && c == '"' {
			inString = !inString
			i++
			continue
		}
		escapes := !json || inString
		if set.first[c] || escapes && c == '\\' {
			if n := set.matchAt(s, i, escapes, json); n > 0 {
				if !found {
					b.Grow(len(s))
					found = true
				}
				b.WriteString(s[last:i])
				if json && !inString {
					b.WriteString(`"` + Mask + `"`)
				} else {
					b.WriteString(Mask)
				}
				i += n
				last = i
				continue
			}
		}
		if escapes && c == '\\' {
			_, n := decodeEscape(s, i, nil)
			i += n
		} else {
			i++
		}
	}
	if !found {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// matchAt is the raw length of the secret that starts at s[i], 0 if none.
func (set *valueSet) matchAt(s string, i int, escapes, json bool) int {
	for _, v := range set.values {
		if n := matchValue(s, i, v, escapes, json); n > 0 {
			return n
		}
	}
	return 0
}

func matchValue(s string, i int, v string, escapes, json bool) int {
	var buf [utf8.UTFMax]byte
	p, j := i, 0
	for j < len(v) {
		if p >= len(s) {
			return 0
		}
		c := s[p]
		if json && c == '"' {
			return 0
		}
		if escapes && c == '\\' {
			d, n := decodeEscape(s, p, &buf)
			if len(d) > len(v)-j || v[j:j+len(d)] != string(d) {
				return 0
			}
			j += len(d)
			p += n
			continue
		}
		if v[j] != c {
			return 0
		}
		j++
		p++
	}
	return p - i
}

// holdFrom is where the tail of s that may be the start of a secret
// begins: len(s) when there is none. A secret's start written with escapes
// counts, and so does an escape cut short.
func (set *valueSet) holdFrom(s string) int {
	from := max(0, len(s)-12*set.longest) // a \uD83D\uDE00 pair is 12 bytes for 4
	for h := from; h < len(s); h++ {
		if c := s[h]; !set.first[c] && c != '\\' {
			continue
		}
		for _, v := range set.values {
			if prefixAt(s, h, v) {
				return h
			}
		}
	}
	return len(s)
}

// prefixAt reports whether s[i:] decodes to a proper prefix of v.
func prefixAt(s string, i int, v string) bool {
	var buf [utf8.UTFMax]byte
	p, j := i, 0
	for p < len(s) {
		if j >= len(v) {
			return false
		}
		c := s[p]
		if c == '\\' {
			if incompleteEscape(s[p:]) {
				return true
			}
			d, n := decodeEscape(s, p, &buf)
			if len(d) > len(v)-j || v[j:j+len(d)] != string(d) {
				return false
			}
			j += len(d)
			p += n
			continue
		}
		if v[j] != c {
			return false
		}
		j++
		p++
	}
	return true
}

// decodeEscape decodes the escape at s[p] (a '\'): its bytes (written into
// buf; nil buf decodes only the length) and its raw length. What is not a
// JSON escape is a plain '\'.
func decodeEscape(s string, p int, buf *[utf8.UTFMax]byte) ([]byte, int) {
	one := func(c byte) ([]byte, int) {
		if buf == nil {
			return nil, 2
		}
		buf[0] = c
		return buf[:1], 2
	}
	if p+1 >= len(s) {
		return backslash, 1
	}
	switch s[p+1] {
	case '"', '\\', '/':
		return one(s[p+1])
	case 'b':
		return one('\b')
	case 'f':
		return one('\f')
	case 'n':
		return one('\n')
	case 'r':
		return one('\r')
	case 't':
		return one('\t')
	case 'u':
		r, ok := hex4(s[p+2:])
		if !ok {
			break
		}
		if utf16.IsSurrogate(rune(r)) {
			if r < 0xDC00 && p+12 <= len(s) && s[p+6] == '\\' && s[p+7] == 'u' {
				if lo, ok := hex4(s[p+8:]); ok {
					if d := utf16.DecodeRune(rune(r), rune(lo)); d != utf8.RuneError {
						if buf == nil {
							return nil, 12
						}
						return buf[:utf8.EncodeRune(buf[:], d)], 12
					}
				}
			}
			r = uint16(utf8.RuneError) // a lone surrogate decodes to U+FFFD
		}
		n := 6
		if buf == nil {
			return nil, n
		}
		return buf[:utf8.EncodeRune(buf[:], rune(r))], n
	}
	return backslash, 1
}

// backslash is what a backslash that starts no escape decodes to (never written to).
var backslash = []byte{'\\'}

// hex4 reads four hex digits at the start of s.
func hex4(s string) (uint16, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r uint16
	for i := 0; i < 4; i++ {
		c := s[i]
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
		r = r<<4 | uint16(c)
	}
	return r, true
}

// incompleteEscape reports whether s (starting with '\') ends inside an
// escape: "\", "\u00", or a high surrogate whose low half may follow.
func incompleteEscape(s string) bool {
	if len(s) == 1 {
		return true
	}
	if s[1] != 'u' {
		return false
	}
	if len(s) < 6 {
		return allHex(s[2:])
	}
	r, ok := hex4(s[2:])
	if !ok || r < 0xD800 || r > 0xDBFF {
		return false
	}
	tail := s[6:]
	switch {
	case len(tail) >= 6:
		return false
	case len(tail) == 0:
		return true
	case tail[0] != '\\':
		return false
	case len(tail) == 1:
		return true
	}
	return tail[1] == 'u' && allHex(tail[2:])
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// Stream redacts a text that arrives in pieces (streamed tokens): a
// secret split across pieces is cut too. Write holds back a tail that may
// be the start of a secret until the next piece says; Flush hands on what
// is held at the end. Not safe for concurrent use.
type Stream struct {
	r    *Redactor
	emit func(string)
	held string
}

// NewStream returns a Stream handing the redacted text to emit, which is
// never called with "".
func (r *Redactor) NewStream(emit func(string)) *Stream {
	return &Stream{r: r, emit: emit}
}

// Write takes the next piece.
func (st *Stream) Write(piece string) {
	text := st.held + piece
	st.held = ""
	set := st.r.values()
	if set != nil {
		if set.maybe(text) {
			text, _ = set.redact(text, false)
		}
		h := set.holdFrom(text)
		text, st.held = text[:h], text[h:]
	}
	if text != "" {
		st.emit(text)
	}
}

// Flush hands on the tail held back: the text ended without completing a
// secret.
func (st *Stream) Flush() {
	if st.held != "" {
		text := st.held
		st.held = ""
		st.emit(text)
	}
}
