package jsonx

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// needsEscape marks the ASCII bytes that cannot appear raw in a JSON string.
var needsEscape = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

// AppendString writes s as a JSON string, as encoding/json does with HTML
// escaping off, so that a value reads the same whichever of Clara's writers
// wrote it: '"' and '\\' escaped, control characters as \n, \t, … or
// \u00XX (NUL becomes \u0000), U+2028 and U+2029 as \u2028 and \u2029
// (JavaScript reads them as line ends), every other character as UTF-8,
// and a byte that is not valid UTF-8 as U+FFFD, written as encoding/json
// of the build writes it (InvalidByte). The output is always valid JSON.
func AppendString(dst []byte, s string) []byte {
	// Most strings are plain: eight bytes at a time, then one at a time
	// (a key or a short value is all bytes), and then copied whole.
	i := 0
	if len(s) >= 16 {
		for i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
		}
	}
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	dst = append(dst, '"')
	if i == len(s) {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return appendStringFrom(dst, s, i)
}

// appendStringFrom writes the rest of AppendString's s, from i, where the
// first byte to look at is; s[:i] is plain.
func appendStringFrom(dst []byte, s string, i int) []byte {
	start := 0
	for i < len(s) {
		// Eight bytes at a time while none needs a look of its own; the
		// last few as part of the last eight (which may overlap bytes
		// already written).
		if i+8 <= len(s) {
			if plain8(s[i : i+8]) {
				i += 8
				continue
			}
		} else if len(s) >= 8 && plain8(s[len(s)-8:]) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if !needsEscape[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, InvalidByte...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plain8 reports whether the 8 bytes of s are ASCII that JSON strings
// take as they are (no control character, '"' or '\\'), testing them as
// one word: a byte below 0x20 (or equal to '"' or '\\' once those are
// XORed to zero) borrows into its high bit, as does any non-ASCII byte.
func plain8(s string) bool {
	_ = s[7]
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, b := x^(ones*'"'), x^(ones*'\\')
	return (x|(x-ones*0x20)&^x|(q-ones)&^q|(b-ones)&^b)&highs == 0
}

// AppendCompact writes src without the whitespace between its tokens. src
// must be valid JSON (Scan accepted it); strings are copied unchanged.
func AppendCompact(dst, src []byte) []byte {
	inString := false
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// InvalidByte is what AppendString writes for a byte of invalid UTF-8:
// what encoding/json writes, the escape \ufffd up to Go 1.26 (and with
// GOEXPERIMENT=nojsonv2, as the Makefile builds), the character U+FFFD
// itself on json/v2. Both read back as U+FFFD.
var InvalidByte = func() string {
	b, err := json.Marshal("\xff")
	if err != nil || len(b) < 2 {
		return `\ufffd`
	}
	return string(b[1 : len(b)-1])
}()

// AppendFloat writes f as encoding/json does (ES6 number formatting);
// NaN and the infinities, which JSON cannot hold, as null.
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if m := len(dst) - n; m >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}

// AppendValue writes a JSON-like Go value (decoded JSON, an expression's
// result) as encoding/json would with HTML escaping off, keys sorted.
// Values it cannot write (NaN, infinities, types that are not JSON) are
// written as null, where encoding/json would fail the whole text for one
// bad value.
func AppendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return AppendString(dst, x)
	case float64:
		return AppendFloat(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case json.RawMessage:
		if len(x) == 0 {
			return append(dst, "null"...)
		}
		return append(dst, x...)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			dst = AppendValue(dst, x[k])
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendValue(dst, e)
		}
		return append(dst, ']')
	}
	// Other types (an expr result such as []string): encoding/json's text,
	// HTML characters as they are.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return append(dst, "null"...)
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
