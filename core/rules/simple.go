package rules

import (
	"regexp"
	"strconv"
	"strings"
)

// A simple condition compares two operands, each a path into context or
// thresholds or a literal: `context.tool.result_bytes >
// thresholds.large_result_bytes`. Most rules on hot events look like this,
// and Fire evaluates them without expr and without building the whole
// context (an event on every tool call must cost little). When the values
// are not both numbers or both strings, Fire falls back to expr, so the
// result, or the error, is always expr's.
type simpleCond struct {
	op          string
	left, right operand
}

type operand struct {
	literal bool
	value   Value    // when literal
	root    string   // "context" or "thresholds"
	path    []string // after the root
}

// Value is a scalar seen by a simple condition.
type Value struct {
	Kind byte // 0: absent or not a scalar, 'n' number, 's' string, 'b' bool
	Num  float64
	Str  string
	Bool bool
}

// Number, String and Bool build Values.
func Number(f float64) Value { return Value{Kind: 'n', Num: f} }
func String(s string) Value  { return Value{Kind: 's', Str: s} }
func Bool(b bool) Value      { return Value{Kind: 'b', Bool: b} }

var simpleShape = regexp.MustCompile(`^\s*(\S+)\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$`)
var simplePath = regexp.MustCompile(`^(context|thresholds)(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
var simpleString = regexp.MustCompile(`^"[^"\\]*"$|^'[^'\\]*'$`)

// parseSimple returns the simple form of a condition, or nil.
func parseSimple(src string) *simpleCond {
	m := simpleShape.FindStringSubmatch(src)
	if m == nil {
		return nil
	}
	l, ok1 := parseOperand(m[1])
	r, ok2 := parseOperand(m[3])
	if !ok1 || !ok2 || (l.literal && r.literal) {
		return nil
	}
	return &simpleCond{op: m[2], left: l, right: r}
}

func parseOperand(s string) (operand, bool) {
	switch {
	case simplePath.MatchString(s):
		parts := strings.Split(s, ".")
		return operand{root: parts[0], path: parts[1:]}, true
	case simpleString.MatchString(s):
		return operand{literal: true, value: String(s[1 : len(s)-1])}, true
	case s == "true" || s == "false":
		return operand{literal: true, value: Bool(s == "true")}, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") {
		return operand{literal: true, value: Number(f)}, true
	}
	return operand{}, false
}

// Lookup resolves a path under context without building it. ok is false
// when the source cannot tell (the caller then builds the context).
type Lookup interface {
	Lookup(path []string) (v Value, ok bool)
}

// valueOf turns a decoded JSON value into a scalar Value.
func valueOf(v any) Value {
	switch x := v.(type) {
	case float64:
		return Number(x)
	case int:
		return Number(float64(x))
	case int64:
		return Number(float64(x))
	case string:
		return String(x)
	case bool:
		return Bool(x)
	}
	return Value{}
}

func walk(m map[string]any, path []string) (any, bool) {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// eval evaluates the condition; ok is false when expr must decide.
func (c *simpleCond) eval(resolve func(operand) (Value, bool)) (result, ok bool) {
	l, ok1 := resolve(c.left)
	r, ok2 := resolve(c.right)
	if !ok1 || !ok2 || l.Kind == 0 || r.Kind == 0 || l.Kind != r.Kind {
		return false, false
	}
	switch l.Kind {
	case 'n':
		switch c.op {
		case ">":
			return l.Num > r.Num, true
		case ">=":
			return l.Num >= r.Num, true
		case "<":
			return l.Num < r.Num, true
		case "<=":
			return l.Num <= r.Num, true
		case "==":
			return l.Num == r.Num, true
		case "!=":
			return l.Num != r.Num, true
		}
	case 's':
		switch c.op {
		case ">":
			return l.Str > r.Str, true
		case ">=":
			return l.Str >= r.Str, true
		case "<":
			return l.Str < r.Str, true
		case "<=":
			return l.Str <= r.Str, true
		case "==":
			return l.Str == r.Str, true
		case "!=":
			return l.Str != r.Str, true
		}
	case 'b':
		switch c.op {
		case "==":
			return l.Bool == r.Bool, true
		case "!=":
			return l.Bool != r.Bool, true
		}
	}
	return false, false
}
