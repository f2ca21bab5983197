package json5

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	tj "github.com/titanous/json5"
)

// DefaultMaxDepth bounds nesting when ToJSON is given no depth.
const DefaultMaxDepth = 512

// ToJSON reads text as one JSON5 value and returns it as compact JSON.
// maxDepth bounds the nesting of arrays and objects (DefaultMaxDepth when
// 0 or less); text must be valid UTF-8.
func ToJSON(text []byte, maxDepth int) ([]byte, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if !utf8.Valid(text) {
		return nil, errors.New("JSON5: the text is not valid UTF-8")
	}
	// The reader recurses as deep as the text nests: bound it first.
	if d := nesting(text); d > maxDepth {
		return nil, fmt.Errorf("JSON5: the text nests %d deep, more than %d", d, maxDepth)
	}
	// Unmarshal checks the whole text (one value, comments and white space
	// around it); the Decoder then reads the same value keeping each
	// number's text.
	var check any
	if err := tj.Unmarshal(text, &check); err != nil {
		return nil, fmt.Errorf("JSON5: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	dec := tj.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("JSON5: %v", err)
	}
	return appendValue(make([]byte, 0, len(text)), v)
}

// nesting is how deep text nests arrays and objects, strings and
// comments skipped; a bracket that does not close still counts.
func nesting(text []byte) int {
	depth, most := 0, 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '[', '{':
			if depth++; depth > most {
				most = depth
			}
		case ']', '}':
			depth--
		case '"', '\'':
			for i++; i < len(text) && text[i] != c; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		case '/':
			if i+1 < len(text) && text[i+1] == '/' {
				for i < len(text) && text[i] != '\n' && text[i] != '\r' {
					i++
				}
			} else if i+1 < len(text) && text[i+1] == '*' {
				end := bytes.Index(text[i+2:], []byte("*/"))
				if end < 0 {
					return most
				}
				i += end + 3
			}
		}
	}
	return most
}

func appendValue(b []byte, v any) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case string:
		return appendString(b, v), nil
	case float64: // Infinity and NaN inside an array or object come as floats
		switch {
		case math.IsNaN(v):
			return nil, errors.New("JSON5: NaN has no JSON form")
		case math.IsInf(v, 1):
			return nil, errors.New("JSON5: Infinity has no JSON form")
		case math.IsInf(v, -1):
			return nil, errors.New("JSON5: -Infinity has no JSON form")
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64), nil
	case tj.Number:
		n, err := number(string(v))
		if err != nil {
			return nil, err
		}
		return append(b, n...), nil
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k), ':')
			if b, err = appendValue(b, v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("JSON5: a value of type %T", v)
}

// number writes a JSON5 number as a JSON one: a leading + dropped, a lone
// decimal point given its zero, hexadecimal in decimal; NaN and Infinity
// refused.
func number(s string) (string, error) {
	neg := false
	switch {
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	}
	sign := ""
	if neg {
		sign = "-"
	}
	switch {
	case s == "Infinity" || s == "NaN":
		return "", fmt.Errorf("JSON5: %s%s has no JSON form", sign, s)
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		n, ok := new(big.Int).SetString(s[2:], 16)
		if !ok {
			return "", fmt.Errorf("JSON5: %q is not a hexadecimal number", s)
		}
		if n.Sign() == 0 {
			sign = "" // -0x0 is 0 in JSON as in JavaScript's integers
		}
		return sign + n.String(), nil
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i:]
	}
	if strings.HasPrefix(mant, ".") {
		mant = "0" + mant
	}
	mant = strings.TrimSuffix(mant, ".")
	out := sign + mant + exp
	if !isJSONNumber(out) {
		return "", fmt.Errorf("JSON5: the number %q", sign+s)
	}
	return out, nil
}

// isJSONNumber checks s against RFC 8259's number grammar.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// appendString writes s as a JSON string: quotes, backslashes and control
// characters escaped, everything else as it is.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
