package jsonx

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// appendStringByteWise is AppendString as it was before plain8: one byte
// at a time. The two must agree on everything.
func appendStringByteWise(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, InvalidByte...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}

// TestAppendString_wordAtATime: every byte value at every place of a word
// (and across two), and random strings, come out as the byte-wise writer
// writes them.
func TestAppendString_wordAtATime(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := string(AppendString(nil, s)), string(appendStringByteWise(nil, s)); got != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	for b := 0; b < 256; b++ {
		for at := 0; at < 20; at++ {
			s := []byte(strings.Repeat("abcdefgh", 3))
			s[at] = byte(b)
			check(string(s))
			check(string(s[:at+1]))
		}
	}
	r := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "Z", " ", "~", "\x7f", "\x00", "\x1f", "\x20", "\"", "\\", "/", "\n", "é", "🎉", "\xff", "\xc3", "\u2028"}
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := r.Intn(40); n > 0; n-- {
			if r.Intn(3) == 0 {
				b.WriteString(alphabet[r.Intn(len(alphabet))])
			} else {
				b.WriteString("plain")
			}
		}
		check(b.String())
	}
}
