package toolbox

import (
	"encoding/json"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// A simpleSchema is an input_schema that uses only the keywords most tool
// schemas use (type, properties, required, additionalProperties, enum,
// const, minimum/maximum and their exclusive forms, minLength/maxLength,
// pattern, items, minItems/maxItems, anyOf; title, description, default,
// examples, $comment, deprecated, readOnly, writeOnly and format as
// annotations), checked directly on the arguments' bytes. The full validator decodes the arguments into maps and
// allocates on every call; this check does not.
//
// It only ever says "valid" for sure: a call it finds invalid, or cannot
// judge exactly (a number beyond float64's exact range, a string with an
// escaped surrogate), goes to the full validator, which has the last word
// and writes every error message. A schema with any other keyword is not
// compiled at all (compileSimple declines it).
type simpleSchema struct {
	never    bool    // the schema false
	types    typeSet // 0: any type
	props    []simpleProp
	byName   map[string]int // index into props, when there are many
	required uint64         // bits of props that must be present
	extra    *simpleSchema  // additionalProperties; nil: anything
	minLen   int            // -1: none
	maxLen   int            // -1: none
	pattern  *regexp.Regexp // nil: none
	bounds   []bound
	allowed  [][]scalar      // enum and const: the value must be in each list
	items    *simpleSchema   // every element of an array; nil: anything
	minItems int             // -1: none
	maxItems int             // -1: none
	anyOf    []*simpleSchema // the value must match one of them; nil: no anyOf
}

type simpleProp struct {
	name   string
	schema *simpleSchema // nil: a name only required, not declared in properties
}

type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeObject
	typeArray
	typeNumber
	typeInteger
	typeString
)

var typeNames = map[string]typeSet{"null": typeNull, "boolean": typeBoolean, "object": typeObject,
	"array": typeArray, "number": typeNumber, "integer": typeInteger, "string": typeString}

type boundKind uint8

const (
	boundMin boundKind = iota
	boundMax
	boundExclusiveMin
	boundExclusiveMax
)

type bound struct {
	kind boundKind
	v    float64
}

// scalar is one value of an enum or a const: null, a boolean, a number or
// a string (a list holding an array or an object is not compiled).
type scalar struct {
	t typeSet // typeNull, typeBoolean, typeNumber or typeString
	b bool
	f float64
	s string
}

type verdict uint8

const (
	verdictValid   verdict = iota
	verdictInvalid         // the full validator will say why
	verdictUnsure          // a value this check cannot judge exactly
)

// draft2020 is the only $schema the direct check accepts: the one Clara
// compiles by default.
const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// annotations are keywords that never make an instance invalid under
// draft 2020-12 as Clara compiles it (format is not asserted).
var annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true, "format": true}

// compileSimple compiles doc (a schema decoded by jsonschema.UnmarshalJSON
// that the full compiler accepted) for the direct check; ok is false when
// it uses anything else.
func compileSimple(doc any) (s *simpleSchema, ok bool) {
	return compileSimpleAt(doc, true)
}

func compileSimpleAt(doc any, top bool) (*simpleSchema, bool) {
	switch v := doc.(type) {
	case bool:
		return &simpleSchema{never: !v, minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}, true
	case map[string]any:
		s := &simpleSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
		var required []string
		for k, val := range v {
			if annotations[k] {
				continue
			}
			ok := true
			switch k {
			case "$schema":
				ok = top && val == draft2020
			case "type":
				s.types, ok = compileTypes(val)
			case "properties":
				props, isMap := val.(map[string]any)
				ok = isMap
				for name, sub := range props {
					var ps *simpleSchema
					if ps, ok = compileSimpleAt(sub, false); !ok {
						break
					}
					s.props = append(s.props, simpleProp{name: name, schema: ps})
				}
			case "required":
				required, ok = stringList(val)
			case "additionalProperties":
				s.extra, ok = compileSimpleAt(val, false)
			case "enum":
				var list []scalar
				if list, ok = scalarList(val); ok {
					s.allowed = append(s.allowed, list)
				}
			case "const":
				var c scalar
				if c, ok = toScalar(val); ok {
					s.allowed = append(s.allowed, []scalar{c})
				}
			case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
				var f float64
				if f, ok = exactNumber(val); ok {
					kind := map[string]boundKind{"minimum": boundMin, "maximum": boundMax,
						"exclusiveMinimum": boundExclusiveMin, "exclusiveMaximum": boundExclusiveMax}[k]
					s.bounds = append(s.bounds, bound{kind: kind, v: f})
				}
			case "minLength":
				s.minLen, ok = count(val)
			case "maxLength":
				s.maxLen, ok = count(val)
			case "items":
				// Draft 2020-12's items: every element (prefixItems, which
				// would exempt the first ones, is not compiled).
				s.items, ok = compileSimpleAt(val, false)
			case "minItems":
				s.minItems, ok = count(val)
			case "maxItems":
				s.maxItems, ok = count(val)
			case "anyOf":
				list, isList := val.([]any)
				ok = isList && len(list) > 0
				for _, sub := range list {
					var as *simpleSchema
					if as, ok = compileSimpleAt(sub, false); !ok {
						break
					}
					s.anyOf = append(s.anyOf, as)
				}
			case "pattern":
				// The validator compiles patterns with Go's regexp
				// (its default engine), so this matches as it does.
				str, isString := val.(string)
				ok = isString
				if ok {
					re, err := regexp.Compile(str)
					s.pattern, ok = re, err == nil
				}
			default:
				ok = false
			}
			if !ok {
				return nil, false
			}
		}
		sort.Slice(s.props, func(i, j int) bool { return s.props[i].name < s.props[j].name })
		for _, name := range required {
			i := s.find(name)
			if i < 0 {
				s.props = append(s.props, simpleProp{name: name})
				i = len(s.props) - 1
			}
			if i >= 64 {
				return nil, false
			}
			s.required |= 1 << i
		}
		if len(s.props) > 8 {
			s.byName = make(map[string]int, len(s.props))
			for i, p := range s.props {
				s.byName[p.name] = i
			}
		}
		return s, true
	}
	return nil, false
}

func compileTypes(v any) (typeSet, bool) {
	if name, ok := v.(string); ok {
		t, known := typeNames[name]
		return t, known
	}
	names, ok := stringList(v)
	if !ok || len(names) == 0 {
		return 0, false
	}
	var ts typeSet
	for _, name := range names {
		t, known := typeNames[name]
		if !known {
			return 0, false
		}
		ts |= t
	}
	return ts, true
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		str, ok := item.(string)
		if !ok {
			return nil, false
		}
		out = append(out, str)
	}
	return out, true
}

func scalarList(v any) ([]scalar, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]scalar, 0, len(list))
	for _, item := range list {
		c, ok := toScalar(item)
		if !ok {
			return nil, false
		}
		out = append(out, c)
	}
	return out, true
}

func toScalar(v any) (scalar, bool) {
	switch x := v.(type) {
	case nil:
		return scalar{t: typeNull}, true
	case bool:
		return scalar{t: typeBoolean, b: x}, true
	case string:
		return scalar{t: typeString, s: x}, true
	case json.Number:
		f, ok := exactNumber(x)
		return scalar{t: typeNumber, f: f}, ok
	}
	return scalar{}, false
}

// count reads minLength or maxLength: a non-negative integer, which the
// metaschema lets be written 2.0.
func count(v any) (int, bool) {
	f, ok := exactNumber(v)
	if !ok || f < 0 || f > math.MaxInt32 || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// exactNumber reads a number of a schema as float64 when that is exact
// enough to compare (see exactFloat).
func exactNumber(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	return exactFloat(string(n))
}

// exactFloat parses a JSON number when float64 orders and compares it as
// its decimal value: at most 15 significant digits and a magnitude well
// inside float64's normal range. Two such decimals that differ map to
// different floats, in the same order, and one that is an integer maps to
// that integer; the validator compares the exact decimals (big.Rat), so
// beyond this the answer is left to it.
func exactFloat(raw string) (float64, bool) {
	digits, leading := 0, true
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == 'e' || c == 'E' {
			break
		}
		if c < '0' || c > '9' {
			continue
		}
		if leading && c == '0' {
			continue
		}
		leading = false
		digits++
	}
	// Trailing zeros of the mantissa count too, which only declines more.
	if digits > 15 {
		return 0, false
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return 0, false
	}
	if a := math.Abs(f); a != 0 && (a < 1e-290 || a > 1e290) {
		return 0, false
	}
	if f == 0 && digits != 0 {
		return 0, false // underflow
	}
	return f, true
}

func (s *simpleSchema) find(name string) int {
	if s.byName != nil {
		if i, ok := s.byName[name]; ok {
			return i
		}
		return -1
	}
	for i := range s.props {
		if s.props[i].name == name {
			return i
		}
	}
	return -1
}

// check judges arguments already scanned strictly (well-formed, valid
// UTF-8, no duplicate keys). Nothing it reads is kept.
func (s *simpleSchema) check(args []byte) verdict {
	return s.value(gjson.Parse(unsafe.String(unsafe.SliceData(args), len(args))))
}

// value judges r by every keyword of s: its own, then anyOf's.
func (s *simpleSchema) value(r gjson.Result) verdict {
	v := s.own(r)
	if v == verdictInvalid || s.anyOf == nil {
		return v
	}
	any := verdictInvalid
	for _, sub := range s.anyOf {
		switch sub.value(r) {
		case verdictValid:
			return v
		case verdictUnsure:
			any = verdictUnsure
		}
	}
	return any
}

// own judges r by the keywords of s but anyOf.
func (s *simpleSchema) own(r gjson.Result) verdict {
	if s.never {
		return verdictInvalid
	}
	var t typeSet
	switch r.Type {
	case gjson.Null:
		t = typeNull
	case gjson.False, gjson.True:
		t = typeBoolean
	case gjson.Number:
		t = typeNumber
	case gjson.String:
		t = typeString
	case gjson.JSON:
		t = typeArray
		if strings.HasPrefix(r.Raw, "{") {
			t = typeObject
		}
	default:
		return verdictUnsure
	}
	if s.types != 0 && s.types&t == 0 {
		if t != typeNumber || s.types&typeInteger == 0 {
			return verdictInvalid
		}
		if v := isInteger(r.Raw); v != verdictValid {
			return v
		}
	}
	switch t {
	case typeObject:
		return s.object(r)
	case typeString:
		return s.str(r)
	case typeNumber:
		return s.number(r.Raw)
	case typeNull, typeBoolean:
		return s.inAllowed(scalar{t: t, b: r.Type == gjson.True})
	}
	return s.array(r)
}

func (s *simpleSchema) array(r gjson.Result) verdict {
	out := verdictValid
	if s.items != nil || s.minItems >= 0 || s.maxItems >= 0 {
		n := 0
		r.ForEach(func(_, v gjson.Result) bool {
			n++
			if s.items != nil {
				out = s.items.value(v)
			}
			return out == verdictValid
		})
		if out != verdictValid {
			return out
		}
		if (s.minItems >= 0 && n < s.minItems) || (s.maxItems >= 0 && n > s.maxItems) {
			return verdictInvalid
		}
	}
	return s.inAllowed(scalar{t: typeArray}) // an array equals no scalar
}

// isInteger: an integer written without a fraction or exponent is one
// whatever its size; otherwise exactFloat decides.
func isInteger(raw string) verdict {
	if !strings.ContainsAny(raw, ".eE") {
		return verdictValid
	}
	f, ok := exactFloat(raw)
	if !ok {
		return verdictUnsure
	}
	if f != math.Trunc(f) {
		return verdictInvalid
	}
	return verdictValid
}

func (s *simpleSchema) object(r gjson.Result) verdict {
	if len(s.props) == 0 && s.extra == nil {
		return s.inAllowed(scalar{t: typeObject})
	}
	var seen uint64
	out := verdictValid
	r.ForEach(func(k, v gjson.Result) bool {
		sub := s.extra
		if i := s.find(k.Str); i >= 0 {
			seen |= 1 << i
			// A name only required (no schema) is not declared: for
			// additionalProperties it is an additional property.
			if ps := s.props[i].schema; ps != nil {
				sub = ps
			}
		}
		if sub != nil {
			out = sub.value(v)
		}
		return out == verdictValid
	})
	if out != verdictValid {
		return out
	}
	if seen&s.required != s.required {
		return verdictInvalid
	}
	return s.inAllowed(scalar{t: typeObject})
}

func (s *simpleSchema) str(r gjson.Result) verdict {
	if s.minLen < 0 && s.maxLen < 0 && s.pattern == nil && s.allowed == nil {
		return verdictValid
	}
	if loneSurrogate(r.Raw) {
		return verdictUnsure // unpaired ones decode differently from reader to reader
	}
	str := r.Str
	if s.minLen >= 0 || s.maxLen >= 0 {
		n := utf8.RuneCountInString(str)
		if (s.minLen >= 0 && n < s.minLen) || (s.maxLen >= 0 && n > s.maxLen) {
			return verdictInvalid
		}
	}
	if s.pattern != nil && !s.pattern.MatchString(str) {
		return verdictInvalid
	}
	return s.inAllowed(scalar{t: typeString, s: str})
}

// loneSurrogate reports an escaped UTF-16 surrogate that is not half of a
// pair (\ud83d\ude00 is one character; \ud83d alone is not).
func loneSurrogate(raw string) bool {
	for i := strings.Index(raw, `\u`); i >= 0; {
		hi, ok := hex4(raw, i+2)
		if !ok {
			return true
		}
		next := i + 6
		if hi >= 0xD800 && hi < 0xDC00 {
			lo, ok := hex4(raw, i+8)
			if !strings.HasPrefix(raw[next:], `\u`) || !ok || lo < 0xDC00 || lo >= 0xE000 {
				return true
			}
			next += 6
		} else if hi >= 0xDC00 && hi < 0xE000 {
			return true
		}
		j := strings.Index(raw[next:], `\u`)
		if j < 0 {
			break
		}
		i = next + j
	}
	return false
}

func hex4(raw string, at int) (int, bool) {
	if at < 0 || at+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(raw[at:at+4], 16, 16)
	return int(n), err == nil
}

func (s *simpleSchema) number(raw string) verdict {
	if s.bounds == nil && s.allowed == nil {
		return verdictValid
	}
	f, ok := exactFloat(raw)
	if !ok {
		return verdictUnsure
	}
	for _, b := range s.bounds {
		var fails bool
		switch b.kind {
		case boundMin:
			fails = f < b.v
		case boundMax:
			fails = f > b.v
		case boundExclusiveMin:
			fails = f <= b.v
		case boundExclusiveMax:
			fails = f >= b.v
		}
		if fails {
			return verdictInvalid
		}
	}
	return s.inAllowed(scalar{t: typeNumber, f: f})
}

// inAllowed checks enum and const. Objects and arrays never equal a
// scalar, so they are given with t alone.
func (s *simpleSchema) inAllowed(v scalar) verdict {
	for _, list := range s.allowed {
		found := false
		for _, c := range list {
			if c.t == v.t && c.b == v.b && c.f == v.f && c.s == v.s {
				found = true
				break
			}
		}
		if !found {
			return verdictInvalid
		}
	}
	return verdictValid
}
