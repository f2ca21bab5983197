package protocol

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// decodeValue decodes the JSON value at the start of s, text that
// ScanStrict accepted, as gjson's Result.Value would (float64 numbers,
// []any, map[string]any; strings without escapes share s's memory), in
// one pass: gjson re-reads every nested value once per level. It returns
// the value and what follows it.
func decodeValue(s string) (any, string) {
	s = skipSpace(s)
	switch s[0] {
	case '{':
		m := make(map[string]any)
		s = skipSpace(s[1:])
		if s[0] == '}' {
			return m, s[1:]
		}
		for {
			var key string
			key, s = decodeString(s)
			s = skipSpace(s)[1:] // ':'
			m[key], s = decodeValue(s)
			s = skipSpace(s)
			if s[0] == '}' {
				return m, s[1:]
			}
			s = skipSpace(s[1:]) // ','
		}
	case '[':
		a := make([]any, 0)
		s = skipSpace(s[1:])
		if s[0] == ']' {
			return a, s[1:]
		}
		for {
			var v any
			v, s = decodeValue(s)
			a = append(a, v)
			s = skipSpace(s)
			if s[0] == ']' {
				return a, s[1:]
			}
			s = s[1:] // ','
		}
	case '"':
		return decodeString(s)
	case 't':
		return true, s[4:]
	case 'f':
		return false, s[5:]
	case 'n':
		return nil, s[4:]
	}
	i := 1
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == '+' || s[i] == '-') {
		i++
	}
	f, _ := strconv.ParseFloat(s[:i], 64) // out of range: ±Inf, as gjson reads it
	return f, s[i:]
}

// decodeString reads the string at the start of s; one with escapes is
// unescaped by gjson, as Result.Value would.
func decodeString(s string) (string, string) {
	escaped := false
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			if !escaped {
				return s[1:i], s[i+1:]
			}
			return gjson.Parse(s[:i+1]).Str, s[i+1:]
		}
	}
	return "", "" // not reached: the text was scanned
}

func skipSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
		s = s[1:]
	}
	return s
}
