package rules

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// expr's memory budget counts the elements of ranges, arrays and maps, not
// the bytes of strings or of values written out: a string doubled in a
// reduce, in variables or by nested calls (`+`, replace, join, toJSON,
// toBase64...), or an array shared many times over and then flattened or
// serialised, grows without bound. So every evaluation also has a byte
// budget: `+` on strings and the built-ins that can build large values run
// in bounded forms that charge it before building, and a template's value
// is charged for its size.
const memoryBytes = 4 << 20

var errMemory = errors.New("memory budget exceeded")

// maxSteps bounds the iterations of one evaluation: predicates nested over
// the same data (`all(a, all(a, all(a, true)))` on 5,000 elements) would
// otherwise run for hours without allocating anything.
const maxSteps = 1_000_000

var errSteps = fmt.Errorf("iteration budget exceeded (%d predicate steps)", maxSteps)

// memBudget counts the bytes one condition, or the templates of one rule,
// build, and the predicate steps it takes.
type memBudget struct{ used, steps int64 }

// tick counts one predicate step (__tick(__mem), run at the start of every
// predicate body).
func tick(args ...any) (any, error) {
	m, _ := args[0].(*memBudget)
	if m == nil {
		return nil, errors.New("no iteration budget")
	}
	if m.steps++; m.steps > maxSteps {
		return nil, errSteps
	}
	return nil, nil
}

func (m *memBudget) charge(n int64) error {
	if m == nil {
		return errors.New("no memory budget")
	}
	m.used += n
	if n < 0 || m.used > memoryBytes {
		return errMemory
	}
	return nil
}

// fresh gives the runner a whole budget, for a condition or a rule's
// actions.
func (r *runner) fresh() *runner {
	r.mem.used, r.mem.steps = 0, 0
	return r
}

// boundedBuiltins are the built-ins whose result can outgrow their
// arguments, or be large when their argument is, each with an upper bound
// of the bytes it builds.
var boundedBuiltins = map[string]func(args []any) int64{
	"replace": func(a []any) int64 {
		s, old, repl := argString(a, 0), argString(a, 1), argString(a, 2)
		return int64(len(s)) + int64(strings.Count(s, old))*int64(len(repl))
	},
	"join": func(a []any) int64 {
		return sizeOf(argAt(a, 0), memoryBytes) + int64(length(argAt(a, 0)))*int64(len(argString(a, 1)))
	},
	"split":      splitSize,
	"splitAfter": splitSize,
	"flatten":    func(a []any) int64 { return sizeOf(argAt(a, 0), memoryBytes) },
	"toJSON":     func(a []any) int64 { return 2 * sizeOf(argAt(a, 0), memoryBytes) },
	"string":     func(a []any) int64 { return 2 * sizeOf(argAt(a, 0), memoryBytes) },
	"fromJSON":   func(a []any) int64 { return 8 * int64(len(argString(a, 0))) },
	"toBase64":   func(a []any) int64 { return 2 * int64(len(argString(a, 0))) },
	"fromBase64": func(a []any) int64 { return int64(len(argString(a, 0))) },
	"upper":      func(a []any) int64 { return 2 * int64(len(argString(a, 0))) },
	"lower":      func(a []any) int64 { return 2 * int64(len(argString(a, 0))) },
	"reverse":    elements,
	"uniq":       elements,
	"keys":       elements,
	"values":     elements,
	"toPairs":    elements,
	"fromPairs":  elements,
	"median":     elements,
}

func splitSize(a []any) int64 {
	return 16 * int64(strings.Count(argString(a, 0), argString(a, 1))+1)
}

func elements(a []any) int64 { return 16 * int64(length(argAt(a, 0))) }

func argAt(a []any, i int) any {
	if i < len(a) {
		return a[i]
	}
	return nil
}

func argString(a []any, i int) string {
	s, _ := argAt(a, i).(string)
	return s
}

func length(v any) int {
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		return rv.Len()
	}
	return 0
}

// sizeOf bounds the bytes v takes in memory or written out (as JSON or by
// fmt), counting a shared part every time it appears. It stops counting
// past limit, so that it costs at most about limit/16 steps.
func sizeOf(v any, limit int64) int64 {
	// A scalar (what most template parts are), as walk counts it below,
	// without making walk.
	if limit >= 16 {
		switch x := v.(type) {
		case string:
			return 16 + int64(len(x))
		case nil, bool, float64, int, int64:
			return 24
		}
	}
	var n int64
	var walk func(v any, depth int64)
	walk = func(v any, depth int64) {
		n += 16 + depth // the element itself, separators, indentation
		if n > limit {
			return
		}
		switch x := v.(type) {
		case nil, bool, float64, int, int64:
			n += 8
		case string:
			n += int64(len(x))
		case []any:
			for _, e := range x {
				if walk(e, depth+1); n > limit {
					return
				}
			}
		case map[string]any:
			for k, e := range x {
				if n += int64(len(k)); n > limit {
					return
				}
				walk(e, depth+1)
			}
		default:
			switch rv := reflect.ValueOf(v); rv.Kind() {
			case reflect.String:
				n += int64(rv.Len())
			case reflect.Slice, reflect.Array:
				for i := 0; i < rv.Len() && n <= limit; i++ {
					walk(rv.Index(i).Interface(), depth+1)
				}
			case reflect.Map:
				for it := rv.MapRange(); it.Next() && n <= limit; {
					walk(it.Key().Interface(), depth+1)
					walk(it.Value().Interface(), depth+1)
				}
			case reflect.Pointer, reflect.Interface:
				if !rv.IsNil() {
					walk(rv.Elem().Interface(), depth+1)
				}
			default:
				n += 24
			}
		}
	}
	walk(v, 0)
	return n
}

// add is `a + b` when a and b may be strings.
func add(args ...any) (any, error) {
	m, _ := args[0].(*memBudget)
	if a, ok := args[1].(string); ok {
		if b, ok := args[2].(string); ok {
			if err := m.charge(int64(len(a) + len(b))); err != nil {
				return nil, err
			}
			return a + b, nil
		}
	}
	return runtime.Add(args[1], args[2]), nil
}

// boundedCall is the bounded form of built-in name: it charges estimate,
// then calls the built-in.
func boundedCall(name string, estimate func([]any) int64) func(args ...any) (any, error) {
	f := builtin.Builtins[builtin.Index[name]]
	return func(args ...any) (any, error) {
		m, _ := args[0].(*memBudget)
		args = args[1:]
		if err := m.charge(estimate(args)); err != nil {
			return nil, err
		}
		switch {
		case f.Fast != nil && len(args) == 1:
			return f.Fast(args[0]), nil
		case f.Safe != nil:
			v, _, err := f.Safe(args...)
			return v, err
		case f.Func != nil:
			return f.Func(args...)
		}
		return nil, fmt.Errorf("%s: wrong number of arguments", name)
	}
}

// boundedOptions declare the bounded forms.
func boundedOptions() []expr.Option {
	opts := []expr.Option{expr.Function("__add", add), expr.Function("__tick", tick)}
	for name, estimate := range boundedBuiltins {
		opts = append(opts, expr.Function("__"+name, boundedCall(name, estimate)))
	}
	return opts
}

// bounded rewrites, in an expression expr has checked as written, `a + b`
// that may join strings into __add(__mem, a, b), calls of the built-ins
// above into their bounded forms, and every predicate body P into
// (__tick(__mem); P).
type bounded struct{}

func (bounded) Visit(node *ast.Node) {
	mem := &ast.IdentifierNode{Value: "__mem"}
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if n.Operator == "+" && maybeString(n.Left) && maybeString(n.Right) {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__add"}, Arguments: []ast.Node{mem, n.Left, n.Right}})
		}
	case *ast.PredicateNode:
		step := &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__tick"}, Arguments: []ast.Node{mem}}
		n.Node = &ast.SequenceNode{Nodes: []ast.Node{step, n.Node}}
	case *ast.BuiltinNode:
		if boundedBuiltins[n.Name] != nil {
			args := append([]ast.Node{mem}, n.Arguments...)
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__" + n.Name}, Arguments: args})
		}
	}
}

func maybeString(n ast.Node) bool {
	t := n.Type()
	return t == nil || t.Kind() == reflect.String || t.Kind() == reflect.Interface
}

// mayBuild reports whether src may use what bounded rewrites (a cheap test
// on the text, to compile the rest once).
func mayBuild(src string) bool {
	if strings.ContainsAny(src, "+(") {
		return true // string +, or a call (maybe of a built-in taking a predicate)
	}
	for name := range boundedBuiltins {
		if strings.Contains(src, name) {
			return true
		}
	}
	return false
}
