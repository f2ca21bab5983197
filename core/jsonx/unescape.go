package jsonx

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnescaped appends the text of body, the bytes between a JSON
// string's quotes, to dst, decoded as encoding/json decodes it: escapes
// replaced, a lone surrogate and a byte of invalid UTF-8 become U+FFFD. ok
// is false when body cannot be a string's (a control character, a quote or
// a backslash not escaped, an escape JSON does not have); dst is then
// returned as far as it got.
func AppendUnescaped(dst, body []byte) (out []byte, ok bool) {
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
		case c == '"' || c < 0x20:
			return dst, false
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
			continue
		default:
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, body[i:i+n]...)
			}
			i += n
			continue
		}
		if i+1 >= len(body) {
			return dst, false
		}
		e := body[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, good := hex4(body, i)
			if !good {
				return dst, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				// A pair makes one character; a lone half is U+FFFD, and
				// the escape after it stands alone.
				if i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
					if lo, good := hex4(body, i+2); good {
						if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
							r = dec
							i += 6
						}
					}
				}
			}
			dst = utf8.AppendRune(dst, r) // a surrogate left alone is written as U+FFFD
		default:
			return dst, false
		}
	}
	return dst, true
}

// hex4 reads the four hex digits of a \u escape at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
