package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm/runtime"
)

// The functions translated Python conditions call (pycond.go), for what
// Python and expr do differently: truthiness, `in`, floor division and
// modulo of floats, a few string and dict methods.

// truthy is Python's truth of a value: None, False, zero, and empty
// strings, lists and dicts are false.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	if f, ok := number(v); ok {
		return f != 0
	}
	return true
}

// pyEqual is Python's == on JSON values: numbers by value, whatever their
// Go type.
func pyEqual(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	return runtime.Equal(a, b)
}

// pyIn is Python's `x in y`: a substring of a string, an element of a
// list, a key of a dict.
func pyIn(x, y any) (bool, error) {
	switch c := y.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires a string as left operand, not %s", pyType(x))
		}
		return strings.Contains(c, s), nil
	case []any:
		for _, e := range c {
			if pyEqual(x, e) {
				return true, nil
			}
		}
		return false, nil
	case map[string]any:
		s, ok := x.(string)
		if !ok {
			return false, nil
		}
		_, found := c[s]
		return found, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", pyType(y))
}

// pyType names a value's type as Python would.
func pyType(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string:
		return "str"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	if _, ok := number(v); ok {
		return "float"
	}
	return fmt.Sprintf("%T", v)
}

func pyNumbers(op string, a, b any) (float64, float64, error) {
	x, ok1 := number(a)
	y, ok2 := number(b)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("unsupported operand types for %s: '%s' and '%s'", op, pyType(a), pyType(b))
	}
	if y == 0 {
		return 0, 0, fmt.Errorf("division by zero")
	}
	return x, y, nil
}

// pyStr is str(x): Python's words for booleans and None, Clara's text for
// the rest (numbers without a needless .0, as JSON gives every number).
func pyStr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	}
	return text(v)
}

func pyStringArg(name string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s() needs a string, not %s", name, pyType(v))
	}
	return s, nil
}

// pythonOptions declare the functions translated conditions call.
func pythonOptions() []expr.Option {
	return []expr.Option{
		expr.Function("__py_value", func(a ...any) (any, error) { return a[0], nil }, new(func(any) any)),
		expr.Function("__py_truthy", func(a ...any) (any, error) { return truthy(a[0]), nil }, new(func(any) bool)),
		expr.Function("__py_in", func(a ...any) (any, error) { return pyIn(a[0], a[1]) }, new(func(any, any) bool)),
		expr.Function("__py_floordiv", func(a ...any) (any, error) {
			x, y, err := pyNumbers("//", a[0], a[1])
			if err != nil {
				return nil, err
			}
			return math.Floor(x / y), nil
		}, new(func(any, any) float64)),
		expr.Function("__py_mod", func(a ...any) (any, error) {
			x, y, err := pyNumbers("%", a[0], a[1])
			if err != nil {
				return nil, err
			}
			return x - y*math.Floor(x/y), nil // the sign of the divisor, as in Python
		}, new(func(any, any) float64)),
		expr.Function("__py_str", func(a ...any) (any, error) { return pyStr(a[0]), nil }, new(func(any) string)),
		expr.Function("__py_dictget", func(a ...any) (any, error) {
			m, ok := a[0].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("get() needs a dict, not %s", pyType(a[0]))
			}
			k, _ := a[1].(string)
			if v, found := m[k]; found {
				return v, nil
			}
			return a[2], nil
		}, new(func(any, any, any) any)),
		expr.Function("__py_startswith", func(a ...any) (any, error) {
			s, err := pyStringArg("startswith", a[0])
			if err != nil {
				return nil, err
			}
			p, err := pyStringArg("startswith", a[1])
			return err == nil && strings.HasPrefix(s, p), err
		}, new(func(any, any) bool)),
		expr.Function("__py_endswith", func(a ...any) (any, error) {
			s, err := pyStringArg("endswith", a[0])
			if err != nil {
				return nil, err
			}
			p, err := pyStringArg("endswith", a[1])
			return err == nil && strings.HasSuffix(s, p), err
		}, new(func(any, any) bool)),
		expr.Function("__py_lower", func(a ...any) (any, error) {
			s, err := pyStringArg("lower", a[0])
			return strings.ToLower(s), err
		}, new(func(any) string)),
		expr.Function("__py_upper", func(a ...any) (any, error) {
			s, err := pyStringArg("upper", a[0])
			return strings.ToUpper(s), err
		}, new(func(any) string)),
		expr.Function("__py_strip", func(a ...any) (any, error) {
			s, err := pyStringArg("strip", a[0])
			return strings.TrimSpace(s), err
		}, new(func(any) string)),
	}
}
