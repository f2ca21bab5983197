package protocol

import (
	"unicode/utf8"
)

// Success is a success envelope. Result is raw JSON (already valid and
// compact); the other fields are optional.
type Success struct {
	ID        []byte // raw JSON string or number, echoed from the request
	Tool      string
	Result    []byte
	Truncated bool
	Extras
}

// Extras are what a call's rules and callbacks add to its envelope,
// success or error: raw JSON arrays, nil when absent.
type Extras struct {
	// DecisionID is the call's decision id (its audit record's), written
	// as a JSON string when set.
	DecisionID []byte
	Notices    []byte
	Callbacks  []byte // results of blocking callbacks the call fired (SPEC §9.5)
	Trace      []byte
}

func (x *Extras) append(dst []byte) []byte {
	if x.DecisionID != nil {
		dst = append(dst, `,"decision_id":"`...)
		dst = append(append(dst, x.DecisionID...), '"')
	}
	if x.Notices != nil {
		dst = append(dst, `,"notices":`...)
		dst = append(dst, x.Notices...)
	}
	if x.Callbacks != nil {
		dst = append(dst, `,"callbacks":`...)
		dst = append(dst, x.Callbacks...)
	}
	if x.Trace != nil {
		dst = append(dst, `,"trace":`...)
		dst = append(dst, x.Trace...)
	}
	return dst
}

// Append writes the envelope to dst:
// {"status":"success","id":…,"tool":…,"result":…,"truncated":true}.
func (s *Success) Append(dst []byte) []byte {
	dst = append(dst, `{"status":"success"`...)
	if s.ID != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, s.ID...)
	}
	if s.Tool != "" {
		dst = append(dst, `,"tool":`...)
		dst = AppendString(dst, s.Tool)
	}
	dst = append(dst, `,"result":`...)
	if len(s.Result) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, s.Result...)
	}
	if s.Truncated {
		dst = append(dst, `,"truncated":true`...)
	}
	dst = s.Extras.append(dst)
	return append(dst, '}')
}

// AppendError writes an error envelope to dst:
// {"status":"error","id":…,"error":"code","message":"…","details":…}.
// id may be nil.
func AppendError(dst []byte, id []byte, e *Error) []byte {
	return AppendErrorExtras(dst, id, e, Extras{})
}

// AppendErrorExtras is AppendError with notices and a trace.
func AppendErrorExtras(dst []byte, id []byte, e *Error, x Extras) []byte {
	dst = append(dst, `{"status":"error"`...)
	if id != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, id...)
	}
	dst = append(dst, `,"error":`...)
	dst = AppendString(dst, string(e.Code))
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, e.Message)
	if len(e.Details) > 0 {
		dst = append(dst, `,"details":`...)
		dst = append(dst, e.Details...)
	}
	dst = x.append(dst)
	return append(dst, '}')
}

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

// AppendString writes s as a JSON string. Control characters are escaped
// (\n, \t, … or \u00XX, so NUL becomes \u0000); every other character is
// written as UTF-8; bytes that are not valid UTF-8 become U+FFFD, so the
// output is always valid JSON.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
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
			dst = append(dst, "\uFFFD"...)
			i++
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
