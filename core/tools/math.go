package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Bounds of math_eval. An expression is small, compiles to few nodes, and
// runs with a small memory budget, so no input can make it allocate or run
// without bound.
const (
	MathMaxSource       = 1000 // bytes of expression
	MathMaxNodes        = 200  // AST nodes
	mathMemoryBudget    = 1000 // expr's VM units (array and range elements)
	mathAllowedBuiltins = "abs ceil floor round int float max min mean median sum"
)

// mathFuncs are the functions math_eval adds to expr's arithmetic.
var mathFuncs = map[string]func(float64) float64{
	"sqrt": math.Sqrt, "exp": math.Exp, "log": math.Log, "log2": math.Log2, "log10": math.Log10,
	"sin": math.Sin, "cos": math.Cos, "tan": math.Tan, "asin": math.Asin, "acos": math.Acos, "atan": math.Atan,
}

// mathEnv holds the only names an expression can see: two constants.
var mathEnv = map[string]any{"pi": math.Pi, "e": math.E}

func mathOptions() []expr.Option {
	opts := []expr.Option{
		expr.Env(mathEnv),
		expr.DisableAllBuiltins(),
		expr.MaxNodes(MathMaxNodes),
		expr.Optimize(false), // no constant folding: budgets apply at run time, where they are enforced
	}
	for _, b := range strings.Fields(mathAllowedBuiltins) {
		opts = append(opts, expr.EnableBuiltin(b))
	}
	for name, f := range mathFuncs {
		f := f
		opts = append(opts, expr.Function(name, func(args ...any) (any, error) {
			x, ok := toFloat(args[0])
			if !ok {
				return nil, fmt.Errorf("%s needs a number", name)
			}
			return f(x), nil
		}, new(func(float64) float64)))
	}
	opts = append(opts, expr.Function("pow", func(args ...any) (any, error) {
		x, ok1 := toFloat(args[0])
		y, ok2 := toFloat(args[1])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("pow needs two numbers")
		}
		return math.Pow(x, y), nil
	}, new(func(float64, float64) float64)))
	return opts
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// MathEval evaluates an arithmetic expression with expr-lang.
func MathEval() (*toolbox.Tool, error) {
	opts := mathOptions()
	return builtin("math_eval",
		"Evaluates an arithmetic expression: numbers, + - * / % **, comparisons, and the functions abs, ceil, floor, round, min, max, sqrt, pow, exp, log, sin, cos, tan; constants pi and e.",
		fmt.Sprintf(`{"type":"object","properties":{"expression":{"type":"string","minLength":1,"maxLength":%d}},"required":["expression"],"additionalProperties":false}`, MathMaxSource),
		true,
		func(_ context.Context, call toolbox.Call) ([]byte, error) {
			src := gjson.GetBytes(call.Arguments, "expression").Str
			if len(src) > MathMaxSource {
				return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: the expression is %d bytes, more than the %d allowed", len(src), MathMaxSource)
			}
			prog, err := expr.Compile(src, opts...)
			if err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: %s", oneLine(err.Error()))
			}
			machine := vm.VM{MemoryBudget: mathMemoryBudget}
			v, err := machine.Run(prog, mathEnv)
			if err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: %s", oneLine(err.Error()))
			}
			out := append([]byte(`{"expression":`), protocol.AppendString(nil, src)...)
			out = append(out, `,"value":`...)
			switch x := v.(type) {
			case int:
				out = strconv.AppendInt(out, int64(x), 10)
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: the result is not a finite number (%v)", x)
				}
				b, _ := json.Marshal(x)
				out = append(out, b...)
			case bool:
				out = strconv.AppendBool(out, x)
			default:
				return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: the result must be a number or a boolean, not %T", v)
			}
			return append(out, '}'), nil
		})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
