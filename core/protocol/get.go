package protocol

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Kind is the type of a value found by Get. The numbering is part of the C
// ABI (CLARA_JSON_* in clara.h): never renumber.
type Kind int

const (
	KindMissing Kind = iota // nothing at the path
	KindNull
	KindFalse
	KindTrue
	KindInteger // fits a signed 64-bit integer
	KindFloat   // any other number
	KindString
	KindArray
	KindObject
)

// ErrModifier refuses a path that uses a gjson @modifier. Modifiers
// (@pretty, @flatten, @dig, ...) recurse over the document and some grow
// quadratically: on a deep document a caller's path could overflow the stack
// or exhaust memory. Paths select; they never transform. A key that really
// contains '@' is written with a backslash: "user\\@host".
var ErrModifier = errors.New("gjson @modifiers are not allowed in paths (write a literal @ as \\@)")

// usesModifier reports whether path has an '@' that is not escaped.
func usesModifier(path string) bool {
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '\\':
			i++ // the next byte is literal
		case '@':
			return true
		}
	}
	return false
}

// Get returns the value at a gjson path in doc, which must be valid JSON (it
// is checked with Scan and maxDepth first); paths with @modifiers are
// refused with ErrModifier. The text is the unescaped value
// for strings, the number as written for numbers, compact JSON for arrays
// and objects, and "null", "true" or "false"; it is empty when Missing.
func Get(doc []byte, path string, maxDepth int) (Kind, string, error) {
	if usesModifier(path) {
		return KindMissing, "", ErrModifier
	}
	sc, err := Scan(doc, maxDepth)
	if err != nil {
		return KindMissing, "", err
	}
	src := unsafe.String(unsafe.SliceData(doc), len(doc))
	if sc.Spaced {
		src = string(AppendCompact(nil, doc[sc.Start:sc.End]))
	}
	v := gjson.Get(src, path)
	switch v.Type {
	case gjson.Null:
		if !v.Exists() {
			return KindMissing, "", nil
		}
		return KindNull, "null", nil
	case gjson.False:
		return KindFalse, "false", nil
	case gjson.True:
		return KindTrue, "true", nil
	case gjson.String:
		return KindString, strings.Clone(v.Str), nil
	case gjson.Number:
		raw := strings.Clone(v.Raw)
		if !strings.ContainsAny(raw, ".eE") {
			if _, perr := strconv.ParseInt(raw, 10, 64); perr == nil {
				return KindInteger, raw, nil
			}
		}
		return KindFloat, raw, nil
	}
	raw := strings.Clone(v.Raw)
	if v.IsArray() {
		return KindArray, raw, nil
	}
	return KindObject, raw, nil
}
