package jsonx

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// Scanned describes a document that Scan accepted.
type Scanned struct {
	Start, End int  // the top-level value is data[Start:End] (outer whitespace trimmed)
	Spaced     bool // whitespace between tokens inside the value: Compact would change it
	Depth      int  // deepest nesting of arrays and objects (a scalar is 0)
}

// ScanError says where and why Scan refused a document.
type ScanError struct {
	Offset   int    // byte offset of the problem
	Reason   string // what is wrong, for people
	TooDeep  bool   // the document is valid so far but nests deeper than allowed
	MaxDepth int
}

func (e *ScanError) Error() string {
	if e.TooDeep {
		return fmt.Sprintf("nested deeper than %d levels at byte %d", e.MaxDepth, e.Offset)
	}
	return fmt.Sprintf("%s at byte %d", e.Reason, e.Offset)
}

// Scan checks that data holds exactly one JSON value (RFC 8259) in valid
// UTF-8, nested at most maxDepth arrays and objects deep. It never recurses,
// so a hostile depth costs nothing but the scan, and it stops at the first
// problem.
func Scan(data []byte, maxDepth int) (Scanned, *ScanError) {
	s := scanner{data: data, maxDepth: maxDepth}
	return s.run()
}

// ScanStrict is Scan that also refuses an object with the same key twice
// (compared after unescaping). RFC 8259 leaves duplicates to the reader,
// and readers differ: gjson takes the first, encoding/json and the schema
// validator the last. Requests are read by both, so a duplicate could make
// the arguments a tool sees differ from the ones that were validated.
func ScanStrict(data []byte, maxDepth int) (Scanned, *ScanError) {
	s := scanner{data: data, maxDepth: maxDepth, strict: true}
	return s.run()
}

// Member is one member of a top-level object, recorded by
// Scanner.ScanObject so that its fields are read without a second parse.
type Member struct {
	Key        string // unescaped; may point into the scanned bytes
	Start, End int    // the value is data[Start:End]
}

// members collects the members of a top-level object; the first few need
// no allocation.
type members struct {
	small [6]Member
	n     int
	more  []Member
}

func (m *members) len() int { return m.n }

func (m *members) at(i int) Member {
	if i < len(m.small) {
		return m.small[i]
	}
	return m.more[i-len(m.small)]
}

func (m *members) add(x Member) {
	if m.n < len(m.small) {
		m.small[m.n] = x
	} else {
		m.more = append(m.more, x)
	}
	m.n++
}

// Scanner is Scan's state, for a caller that keeps it on its own stack
// and reads the members of a top-level object after the scan
// (ScanObject). Its zero value is ready.
type Scanner struct {
	s    scanner
	used bool
}

// ScanObject is ScanStrict that also records the members of the top-level
// value, when it is an object, for Members and Member: the request's path,
// which reads its fields without a second parse.
func (sc *Scanner) ScanObject(data []byte, maxDepth int) (Scanned, *ScanError) {
	// Fields set one by one on a Scanner never used: assigning a whole
	// scanner through the pointer copied it, 8% of the echo's parse.
	s := &sc.s
	if sc.used {
		*s = scanner{}
	}
	sc.used = true
	s.data, s.maxDepth, s.strict, s.capture = data, maxDepth, true, true
	return s.run()
}

// Members is the number of members the last ScanObject recorded.
func (sc *Scanner) Members() int { return sc.s.members.len() }

// Member is the i-th member the last ScanObject recorded, in the order of
// the text.
func (sc *Scanner) Member(i int) Member { return sc.s.members.at(i) }

type scanner struct {
	data     []byte
	i        int
	stack    bitStack // open containers: true for an object, false for an array
	maxDepth int
	depth    int
	spaced   bool
	opened   bool // value() opened a non-empty container
	escaped  bool // the last string str() consumed had an escape
	strict   bool // refuse duplicate keys
	keys     keySet

	capture     bool // record the top-level object's members
	members     members
	memberKey   string // the member whose value is being scanned
	memberStart int
	inMember    bool
}

// keySet holds the keys of every open object, each object's after the
// previous one's. Small documents fit the fixed arrays and allocate
// nothing; an object with many keys gets a map so that checking stays
// linear in its size.
type keySet struct {
	small  [12]string
	n      int
	big    []string // used once small is full
	frames [4]keyFrame
	nf     int
	deep   []keyFrame // frames beyond the fourth open object
}

type keyFrame struct {
	start int
	index map[string]struct{} // nil until the object has more than 16 keys (a linear search beyond costs more)
}

func (k *keySet) at(i int) string {
	if k.big != nil {
		return k.big[i]
	}
	return k.small[i]
}

func (k *keySet) push(key string) {
	if k.big == nil && k.n == len(k.small) {
		k.big = append(make([]string, 0, 64), k.small[:]...)
	}
	if k.big != nil {
		k.big = append(k.big[:k.n], key)
	} else {
		k.small[k.n] = key
	}
	k.n++
}

func (k *keySet) frame(i int) *keyFrame {
	if i < len(k.frames) {
		return &k.frames[i]
	}
	return &k.deep[i-len(k.frames)]
}

func (k *keySet) open() {
	if k.nf < len(k.frames) {
		k.frames[k.nf] = keyFrame{start: k.n}
	} else {
		k.deep = append(k.deep[:k.nf-len(k.frames)], keyFrame{start: k.n})
	}
	k.nf++
}

func (k *keySet) close() {
	k.nf--
	k.n = k.frame(k.nf).start
}

// add records key in the innermost object; false if it is already there.
func (k *keySet) add(key string) bool {
	f := k.frame(k.nf - 1)
	if f.index != nil {
		if _, dup := f.index[key]; dup {
			return false
		}
		f.index[key] = struct{}{}
		k.push(key)
		return true
	}
	for i := f.start; i < k.n; i++ {
		if k.at(i) == key {
			return false
		}
	}
	k.push(key)
	if k.n-f.start > 16 {
		f.index = make(map[string]struct{}, 32)
		for i := f.start; i < k.n; i++ {
			f.index[k.at(i)] = struct{}{}
		}
	}
	return true
}

// bitStack is a stack of booleans: the first 64 levels live in one word,
// so the common document allocates nothing; deeper ones spill to a slice.
type bitStack struct {
	n    int
	low  uint64
	high []uint64
}

func (b *bitStack) len() int { return b.n }

func (b *bitStack) push(v bool) {
	i := b.n
	b.n++
	if i < 64 {
		if v {
			b.low |= 1 << i
		} else {
			b.low &^= 1 << i
		}
		return
	}
	w, bit := (i-64)/64, uint(i-64)%64
	if w == len(b.high) {
		b.high = append(b.high, 0)
	}
	if v {
		b.high[w] |= 1 << bit
	} else {
		b.high[w] &^= 1 << bit
	}
}

func (b *bitStack) pop() { b.n-- }

// top reports the innermost value; the stack must not be empty.
func (b *bitStack) top() bool {
	i := b.n - 1
	if i < 64 {
		return b.low&(1<<i) != 0
	}
	return b.high[(i-64)/64]&(1<<(uint(i-64)%64)) != 0
}

func (s *scanner) fail(reason string) *ScanError {
	return &ScanError{Offset: s.i, Reason: reason}
}

func (s *scanner) unexpected() *ScanError {
	if s.i >= len(s.data) {
		return s.fail("unexpected end of input")
	}
	return s.fail("unexpected " + describe(s.data[s.i]))
}

func describe(c byte) string {
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("byte 0x%02x", c)
	}
	return fmt.Sprintf("character '%c'", c)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skip passes whitespace and reports whether there was any. Every byte above
// the space is not whitespace: compact documents leave at the first compare.
func (s *scanner) skip() bool {
	if s.i >= len(s.data) || s.data[s.i] > ' ' {
		return false
	}
	start := s.i
	for s.i < len(s.data) && isSpace(s.data[s.i]) {
		s.i++
	}
	return s.i != start
}

// inner skips whitespace between tokens, noting that the document is not compact.
func (s *scanner) inner() {
	if s.skip() {
		s.spaced = true
	}
}

func (s *scanner) run() (Scanned, *ScanError) {
	s.skip()
	start := s.i
	if s.i >= len(s.data) {
		return Scanned{}, s.fail("no value")
	}
	expectValue := true
	for {
		if expectValue {
			if err := s.value(); err != nil {
				return Scanned{}, err
			}
			// value() leaves s.i either after a scalar or a closed empty
			// container (stack unchanged), or inside a container it opened
			// and positioned at its first element.
			if s.opened {
				s.opened = false
				continue
			}
			expectValue = false
		}
		if s.inMember && s.stack.len() == 1 {
			s.members.add(Member{Key: s.memberKey, Start: s.memberStart, End: s.i})
			s.inMember = false
		}
		if s.stack.len() == 0 {
			end := s.i
			s.skip()
			if s.i != len(s.data) {
				return Scanned{}, s.fail("unexpected data after the value")
			}
			return Scanned{Start: start, End: end, Spaced: s.spaced, Depth: s.depth}, nil
		}
		s.inner()
		if s.i >= len(s.data) {
			return Scanned{}, s.unexpected()
		}
		inObject := s.stack.top()
		switch c := s.data[s.i]; {
		case c == ',':
			s.i++
			s.inner()
			if inObject {
				if err := s.key(); err != nil {
					return Scanned{}, err
				}
			}
			expectValue = true
		case (inObject && c == '}') || (!inObject && c == ']'):
			s.i++
			s.stack.pop()
			if inObject && s.strict {
				s.keys.close()
			}
		default:
			return Scanned{}, s.unexpected()
		}
	}
}

// value consumes one scalar or an empty container, or opens a non-empty
// container (setting s.opened) and stops at its first element's value.
func (s *scanner) value() *ScanError {
	if s.i >= len(s.data) {
		return s.unexpected()
	}
	switch c := s.data[s.i]; c {
	case '{', '[':
		if s.stack.len() >= s.maxDepth {
			return &ScanError{Offset: s.i, TooDeep: true, MaxDepth: s.maxDepth}
		}
		s.i++
		s.inner()
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		if s.i < len(s.data) && s.data[s.i] == closer {
			s.i++
			if s.stack.len()+1 > s.depth {
				s.depth = s.stack.len() + 1
			}
			return nil
		}
		s.stack.push(c == '{')
		if s.stack.len() > s.depth {
			s.depth = s.stack.len()
		}
		s.opened = true
		if c == '{' {
			if s.strict {
				s.keys.open()
			}
			return s.key()
		}
		return nil
	case '"':
		return s.str()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		return s.unexpected()
	}
}

// key consumes `"name" :` and the whitespace before the member's value.
func (s *scanner) key() *ScanError {
	if s.i >= len(s.data) {
		return s.unexpected()
	}
	if s.data[s.i] != '"' {
		return s.fail(fmt.Sprintf("expected a string key, got %s", describe(s.data[s.i])))
	}
	at := s.i
	if err := s.str(); err != nil {
		return err
	}
	if s.strict {
		raw := s.data[at+1 : s.i-1]
		key := unsafe.String(unsafe.SliceData(raw), len(raw))
		if s.escaped {
			out, _ := AppendUnescaped(make([]byte, 0, len(raw)), raw)
			key = string(out)
		}
		if !s.keys.add(key) {
			return &ScanError{Offset: at, Reason: fmt.Sprintf("duplicate key %q", key)}
		}
		if s.capture && s.stack.len() == 1 {
			s.memberKey, s.inMember = key, true
		}
	}
	s.inner()
	if s.i >= len(s.data) {
		return s.unexpected()
	}
	if s.data[s.i] != ':' {
		return s.fail("expected ':' after an object key")
	}
	s.i++
	s.inner()
	if s.capture && s.stack.len() == 1 {
		s.memberStart = s.i
	}
	return nil
}

func (s *scanner) literal(word string) *ScanError {
	if len(s.data)-s.i < len(word) || string(s.data[s.i:s.i+len(word)]) != word {
		return s.unexpected()
	}
	s.i += len(word)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) number() *ScanError {
	d := s.data
	if d[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(d) && d[s.i] == '0':
		s.i++
	case s.i < len(d) && d[s.i] >= '1' && d[s.i] <= '9':
		for s.i < len(d) && isDigit(d[s.i]) {
			s.i++
		}
	default:
		return s.fail("invalid number")
	}
	if s.i < len(d) && d[s.i] == '.' {
		s.i++
		if s.i >= len(d) || !isDigit(d[s.i]) {
			return s.fail("invalid number")
		}
		for s.i < len(d) && isDigit(d[s.i]) {
			s.i++
		}
	}
	if s.i < len(d) && (d[s.i] == 'e' || d[s.i] == 'E') {
		s.i++
		if s.i < len(d) && (d[s.i] == '+' || d[s.i] == '-') {
			s.i++
		}
		if s.i >= len(d) || !isDigit(d[s.i]) {
			return s.fail("invalid number")
		}
		for s.i < len(d) && isDigit(d[s.i]) {
			s.i++
		}
	}
	return nil
}

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// plainByte marks the bytes a string can hold as they are: printable ASCII
// other than the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Plain reports whether a JSON string holds c as it is, with nothing to
// check: printable ASCII other than the quote and the backslash. Runs of
// such bytes are most of a string.
func Plain(c byte) bool { return plainByte[c] }

// plainWord reports whether all eight bytes of w are plain (plainByte): none
// below 0x20, none from 0x80, no quote and no backslash.
func plainWord(w uint64) bool { return nonPlain(w) == 0 }

// nonPlain has the high bit of each byte of w (little-endian: the first
// byte is the lowest) that may not be plain; the lowest bit set is exactly
// the first byte that is not. Each test is exact about its lowest match:
// the borrows of the subtractions only touch bytes above one that matches.
func nonPlain(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (w - 0x20*ones) &^ w // high bit of a byte below 0x20 (bytes from 0x80 are caught below)
	quote := w ^ '"'*ones
	backslash := w ^ '\\'*ones
	zero := ((quote - ones) &^ quote) | ((backslash - ones) &^ backslash)
	return (below | zero | w) & highs
}

// str consumes a string literal, checking escapes and UTF-8.
func (s *scanner) str() *ScanError {
	d := s.data
	s.i++ // opening quote
	s.escaped = false
	for s.i < len(d) {
		// Runs of plain bytes are most of every request: eight at a time,
		// the first byte that is not plain found in the word that holds
		// it (a key or a short value is one word), and the last few
		// bytes of the document one table lookup each.
		i := s.i
		for i+8 <= len(d) {
			if m := nonPlain(binary.LittleEndian.Uint64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto special
			}
			i += 8
		}
		for i < len(d) && plainByte[d[i]] {
			i++
		}
	special:
		s.i = i
		if i >= len(d) {
			break
		}
		c := d[s.i]
		switch {
		case c == '"':
			s.i++
			return nil
		case c == '\\':
			s.escaped = true
			s.i++
			if s.i >= len(d) {
				return s.unexpected()
			}
			switch d[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(d)-s.i < 5 || !isHex(d[s.i+1]) || !isHex(d[s.i+2]) || !isHex(d[s.i+3]) || !isHex(d[s.i+4]) {
					return s.fail("invalid \\u escape")
				}
				s.i += 5
			default:
				return s.fail("invalid escape")
			}
		case c < 0x20:
			return s.fail("control character in string")
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRune(d[s.i:])
			if r == utf8.RuneError && n <= 1 {
				return s.fail("invalid UTF-8")
			}
			s.i += n
		}
	}
	return s.fail("unterminated string")
}
