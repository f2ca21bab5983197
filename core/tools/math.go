package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Bounds of math_eval. An expression is small, compiles to few nodes, may
// use only arithmetic (a whitelist of syntax, below), and runs with a small
// memory budget, so no input can make it allocate or run without bound.
const (
	MathMaxSource    = 1000 // bytes of expression
	MathMaxNodes     = 200  // AST nodes
	mathMemoryBudget = 1000 // expr's VM units (array elements)
)

// mathBuiltins are the expr built-ins math_eval allows: functions of
// numbers and of (literal) arrays of numbers. No loops, no strings, no time.
var mathBuiltins = map[string]bool{"abs": true, "ceil": true, "floor": true, "round": true, "float": true,
	"max": true, "min": true, "mean": true, "median": true, "sum": true}

// mathOperators are the binary operators math_eval allows.
var mathOperators = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "**": true, "^": true,
	"==": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true, "and": true, "or": true, "&&": true, "||": true}

// mathFuncs are the functions math_eval adds to expr's arithmetic.
var mathFuncs = map[string]func(float64) float64{
	"sqrt": math.Sqrt, "exp": math.Exp, "log": math.Log, "log2": math.Log2, "log10": math.Log10,
	"sin": math.Sin, "cos": math.Cos, "tan": math.Tan, "asin": math.Asin, "acos": math.Acos, "atan": math.Atan,
}

// mathEnv holds the only names an expression can see: two constants.
var mathEnv = map[string]any{"pi": math.Pi, "e": math.E}

// mathGuard walks an expression before it is compiled: it refuses any
// syntax outside arithmetic (loops over collections, variables, member
// access, strings, ranges, maps) and turns integer literals into floats, so
// that arithmetic never wraps around on overflow (numbers are IEEE doubles,
// as in JSON and JavaScript). One guard per compilation.
type mathGuard struct{ refused string }

func (g *mathGuard) refuse(what string) {
	if g.refused == "" {
		g.refused = what
	}
}

func (g *mathGuard) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.FloatNode, *ast.BoolNode, *ast.ConditionalNode, *ast.ArrayNode:
	case *ast.IntegerNode:
		ast.Patch(node, &ast.FloatNode{Value: float64(n.Value)})
	case *ast.IdentifierNode:
		if _, ok := mathEnv[n.Value]; !ok && mathFuncs[n.Value] == nil && n.Value != "pow" && n.Value != "fmod" {
			g.refuse(fmt.Sprintf("unknown name %q (only pi and e)", n.Value))
		}
	case *ast.UnaryNode:
		if n.Operator != "-" && n.Operator != "+" && n.Operator != "!" && n.Operator != "not" {
			g.refuse("operator " + n.Operator)
		}
	case *ast.BinaryNode:
		if !mathOperators[n.Operator] {
			g.refuse("operator " + n.Operator)
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok || (mathFuncs[id.Value] == nil && id.Value != "pow") {
			g.refuse("this function call")
		}
	case *ast.BuiltinNode:
		if !mathBuiltins[n.Name] {
			g.refuse("function " + n.Name)
		}
	case *ast.StringNode, *ast.BytesNode:
		g.refuse("strings")
	case *ast.MemberNode, *ast.ChainNode, *ast.SliceNode:
		g.refuse("member access")
	case *ast.PointerNode, *ast.PredicateNode:
		g.refuse("loops over collections")
	case *ast.VariableDeclaratorNode:
		g.refuse("variables")
	case *ast.MapNode, *ast.PairNode:
		g.refuse("maps")
	default:
		g.refuse("this syntax")
	}
}

func mathOptions(guard *mathGuard) []expr.Option {
	opts := []expr.Option{
		expr.Env(mathEnv),
		expr.DisableAllBuiltins(),
		expr.MaxNodes(MathMaxNodes),
		expr.Optimize(false), // no constant folding: budgets apply at run time, where they are enforced
		expr.Patch(guard),
		// % on the floats that integer literals became.
		expr.Function("fmod", func(args ...any) (any, error) {
			return math.Mod(args[0].(float64), args[1].(float64)), nil
		}, new(func(float64, float64) float64)),
		expr.Operator("%", "fmod"),
	}
	for b := range mathBuiltins {
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

// mathEval evaluates an arithmetic expression with expr-lang.
func mathEval() toolbox.Builtin {
	return toolbox.Builtin{Name: "math_eval",
		Description: "Evaluates an arithmetic expression: numbers, + - * / % **, comparisons, and/or/not, cond ? a : b, and the functions abs, ceil, floor, round, float, min, max, mean, median, sum, sqrt, pow, exp, log, log2, log10, sin, cos, tan, asin, acos, atan; constants pi and e.",
		Schema:      fmt.Sprintf(`{"type":"object","properties":{"expression":{"type":"string","minLength":1,"maxLength":%d}},"required":["expression"],"additionalProperties":false}`, MathMaxSource),
		LLMVisible:  true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			src := gjson.GetBytes(call.Arguments, "expression").Str
			if len(src) > MathMaxSource {
				return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: the expression is %d bytes, more than the %d allowed", len(src), MathMaxSource)
			}
			guard := &mathGuard{}
			prog, err := expr.Compile(src, mathOptions(guard)...)
			if guard.refused != "" {
				return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: not allowed in an arithmetic expression: %s", guard.refused)
			}
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
			case int: // only from built-ins such as round of an integer
				out = append(out, fmt.Sprint(x)...)
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: the result is not a finite number (%v)", x)
				}
				b, _ := json.Marshal(x)
				out = append(out, b...)
			case bool:
				out = append(out, fmt.Sprint(x)...)
			default:
				return nil, protocol.Errorf(protocol.InvalidArgs, "math_eval: the result must be a number or a boolean, not %T", v)
			}
			return append(out, '}'), nil
		}}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
