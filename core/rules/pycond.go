package rules

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clara-lib/clara/core/protocol"
)

// Conditions written as in the seed (the Oracle design, seed 004): Python
// expressions as simpleeval evaluates them. They are translated once, at
// load, into expr source, which compiles like any other condition: at run
// time nothing of Python is left, and a translated comparison
// (`token_usage > 0.8`) gets the same fast form as one written in expr.
//
// The subset is simpleeval's with compound types: literals (numbers,
// strings, True, False, None, lists, tuples, dicts), names, attributes and
// subscripts (both read a map's key), calls of the functions below,
// unary and binary arithmetic, comparisons (chained, in, not in, is None),
// not / and / or with Python's truthiness, x if c else y, and list
// comprehensions with one `for`.

// pyNames are the names a Python condition may use, and what they are in
// Clara. The seed flattens two fields of its context for convenience.
var pyNames = map[string]string{
	"context":     "context",
	"thresholds":  "thresholds",
	"turn_number": "context.turn.number",
	"token_usage": "context.turn.token_usage",
}

// flattenedHint is what a condition read as expr that names one of the
// seed's flattened names (`token_usage > 0.8`) is told besides expr's
// "unknown name": those names are Python's, and how to ask for Python.
func flattenedHint(python bool, err error) string {
	for name, path := range pyNames {
		if path != name && !python && strings.HasPrefix(err.Error(), "unknown name "+name+" ") {
			return fmt.Sprintf("; %s is one of the names the seed's Python conditions flatten: write %s, or have the condition read as Python with syntax = \"python\" (in [condition], or at the top of the file)", name, path)
		}
	}
	return ""
}

// pyFuncs are the functions a Python condition may call: the seed's
// (context_above_threshold, tool_completed, any, all, len), Clara's
// tool_failed, and simpleeval's conversions. Each takes one argument.
var pyFuncs = map[string]bool{
	"context_above_threshold": true, "tool_completed": true, "tool_failed": true,
	"any": true, "all": true, "len": true, "int": true, "float": true, "str": true,
}

// pyBoolFuncs return a boolean.
var pyBoolFuncs = map[string]bool{"context_above_threshold": true, "tool_completed": true, "tool_failed": true, "any": true, "all": true}

// pyMethods are the string and dict methods a condition may call.
var pyMethods = map[string]int{"startswith": 1, "endswith": 1, "lower": 0, "upper": 0, "strip": 0, "get": -1}

// ---- Translation to expr ----------------------------------------------------

// exprString writes s as an expr string literal.
func exprString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// exprKeywords cannot follow a dot in expr; such a member is read as
// x["name"].
var exprKeywords = map[string]bool{"in": true, "not": true, "and": true, "or": true, "matches": true, "contains": true,
	"startsWith": true, "endsWith": true, "let": true, "nil": true, "true": true, "false": true, "if": true, "else": true}

// pyOut is a translated node: its expr source, and what it is as an
// operand. atom: needs no parentheses anywhere; cmp: a comparison; and /
// or: operands joined; other: must be parenthesised as an operand.
type pyOut struct {
	src   string
	class byte // 'a' atom, 'c' comparison, '&' and, '|' or, 'o' other
	bool  bool // certainly a boolean
}

type pyTranslator struct {
	scopes []string // comprehension variables in force, innermost last
	lets   int      // let variables made so far
}

// translatePython turns a Python condition into expr source.
func translatePython(src string) (string, error) {
	n, err := parsePython(src)
	if err != nil {
		return "", err
	}
	t := &pyTranslator{}
	out, err := t.boolean(n)
	if err != nil {
		return "", err
	}
	return out.src, nil
}

func (t *pyTranslator) newLet() string {
	t.lets++
	return fmt.Sprintf("__py%d", t.lets)
}

// operand is o as the operand of a comparison or of arithmetic.
func (o pyOut) operand() string {
	if o.class == 'a' {
		return o.src
	}
	return "(" + o.src + ")"
}

// boolean translates n where Python tests its truth: the result is an
// expr boolean.
func (t *pyTranslator) boolean(n *pyNode) (pyOut, error) {
	if n.kind == pyBool {
		return t.boolOp(n)
	}
	if n.kind == pyUnary && n.op == "not" {
		k, err := t.boolean(n.kids[0])
		if err != nil {
			return pyOut{}, err
		}
		return pyOut{src: "!" + k.operand(), class: 'a', bool: true}, nil
	}
	o, err := t.value(n)
	if err != nil || o.bool {
		return o, err
	}
	return pyOut{src: "__py_truthy(" + o.src + ")", class: 'a', bool: true}, nil
}

// boolOp translates and / or where a boolean is wanted.
func (t *pyTranslator) boolOp(n *pyNode) (pyOut, error) {
	class := byte('&')
	if n.op == "or" {
		class = '|'
	}
	parts := make([]string, len(n.kids))
	for i, k := range n.kids {
		o, err := t.boolean(k)
		if err != nil {
			return pyOut{}, err
		}
		if o.class != 'a' && o.class != 'c' && o.class != class {
			o.src = "(" + o.src + ")"
		}
		parts[i] = o.src
	}
	return pyOut{src: strings.Join(parts, " "+n.op+" "), class: class, bool: true}, nil
}

// value translates n where its value is used.
func (t *pyTranslator) value(n *pyNode) (pyOut, error) {
	switch n.kind {
	case pyLit:
		return pyOut{src: n.text, class: 'a', bool: n.isBool}, nil
	case pyNameRef:
		for i := len(t.scopes) - 1; i >= 0; i-- {
			if t.scopes[i] == n.name {
				return pyOut{src: "_" + n.name, class: 'a'}, nil
			}
		}
		path, ok := pyNames[n.name]
		if !ok {
			hint := ""
			switch n.name {
			case "true", "false":
				hint = " (Python writes " + strings.ToUpper(n.name[:1]) + n.name[1:] + ")"
			case "null", "nil":
				hint = " (Python writes None)"
			}
			return pyOut{}, pyErrorf(n.pos, "name %q is not defined%s; the names are context, thresholds, turn_number and token_usage", n.name, hint)
		}
		return pyOut{src: path, class: 'a'}, nil
	case pyAttr:
		recv, err := t.value(n.kids[0])
		if err != nil {
			return pyOut{}, err
		}
		if exprKeywords[n.name] {
			return pyOut{src: recv.operand() + "[" + exprString(n.name) + "]", class: 'a'}, nil
		}
		return pyOut{src: recv.operand() + "." + n.name, class: 'a'}, nil
	case pyIndex:
		recv, err := t.value(n.kids[0])
		if err != nil {
			return pyOut{}, err
		}
		idx, err := t.value(n.kids[1])
		if err != nil {
			return pyOut{}, err
		}
		// ["key"] with a plain name reads as .key: the same, and a path the
		// fast forms of conditions recognise.
		if k := n.kids[1]; k.kind == pyLit && strings.HasPrefix(k.text, `"`) {
			if name, err := strconv.Unquote(k.text); err == nil && isExprIdent(name) {
				return pyOut{src: recv.operand() + "." + name, class: 'a'}, nil
			}
		}
		return pyOut{src: recv.operand() + "[" + idx.src + "]", class: 'a'}, nil
	case pySlice:
		recv, err := t.value(n.kids[0])
		if err != nil {
			return pyOut{}, err
		}
		var lo, hi string
		for i, k := range n.kids[1:] {
			if k == nil {
				continue
			}
			o, err := t.value(k)
			if err != nil {
				return pyOut{}, err
			}
			if i == 0 {
				lo = o.src
			} else {
				hi = o.src
			}
		}
		return pyOut{src: recv.operand() + "[" + lo + ":" + hi + "]", class: 'a'}, nil
	case pyCall:
		return t.call(n)
	case pyMethod:
		return t.method(n)
	case pyUnary:
		if n.op == "not" {
			return t.boolean(n)
		}
		k, err := t.value(n.kids[0])
		if err != nil {
			return pyOut{}, err
		}
		if n.op == "-" && n.kids[0].kind == pyLit && !n.kids[0].isBool && !n.kids[0].isNone && !strings.HasPrefix(k.src, `"`) && !strings.HasPrefix(k.src, "-") {
			return pyOut{src: "-" + k.src, class: 'a'}, nil // a negative number, as a literal
		}
		return pyOut{src: "(" + n.op + k.operand() + ")", class: 'a'}, nil
	case pyBin:
		l, err := t.value(n.kids[0])
		if err != nil {
			return pyOut{}, err
		}
		r, err := t.value(n.kids[1])
		if err != nil {
			return pyOut{}, err
		}
		switch n.op {
		case "//":
			return pyOut{src: "__py_floordiv(" + l.src + ", " + r.src + ")", class: 'a'}, nil
		case "%":
			return pyOut{src: "__py_mod(" + l.src + ", " + r.src + ")", class: 'a'}, nil
		}
		return pyOut{src: "(" + l.operand() + " " + n.op + " " + r.operand() + ")", class: 'a'}, nil
	case pyBool:
		return t.boolValue(n)
	case pyCompare:
		return t.compare(n)
	case pyTernary:
		a, err := t.value(n.kids[0])
		if err != nil {
			return pyOut{}, err
		}
		c, err := t.boolean(n.kids[1])
		if err != nil {
			return pyOut{}, err
		}
		b, err := t.value(n.kids[2])
		if err != nil {
			return pyOut{}, err
		}
		if a.bool && b.bool {
			return pyOut{src: "(" + c.operand() + " ? " + a.src + " : " + b.src + ")", class: 'a', bool: true}, nil
		}
		return pyOut{src: "__py_value(" + c.operand() + " ? " + a.src + " : " + b.src + ")", class: 'a'}, nil
	case pyList:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			o, err := t.value(k)
			if err != nil {
				return pyOut{}, err
			}
			parts[i] = o.src
		}
		return pyOut{src: "[" + strings.Join(parts, ", ") + "]", class: 'a'}, nil
	case pyDict:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			o, err := t.value(k)
			if err != nil {
				return pyOut{}, err
			}
			parts[i] = n.keys[i] + ": " + o.src
		}
		return pyOut{src: "{" + strings.Join(parts, ", ") + "}", class: 'a'}, nil
	case pyComp:
		return t.comprehension(n)
	}
	return pyOut{}, pyErrorf(n.pos, "cannot translate this expression")
}

func isExprIdent(s string) bool {
	if s == "" || exprKeywords[s] || strings.HasPrefix(s, "_") {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// boolValue translates and / or where their value is used: Python gives
// the operand that decided, not a boolean.
func (t *pyTranslator) boolValue(n *pyNode) (pyOut, error) {
	// A boolean-only chain keeps expr's and / or.
	allBool := true
	for _, k := range n.kids {
		if !pyIsBool(k) {
			allBool = false
		}
	}
	if allBool {
		return t.boolOp(n)
	}
	last, err := t.value(n.kids[len(n.kids)-1])
	if err != nil {
		return pyOut{}, err
	}
	src := last.src
	for i := len(n.kids) - 2; i >= 0; i-- {
		o, err := t.value(n.kids[i])
		if err != nil {
			return pyOut{}, err
		}
		v := t.newLet()
		if n.op == "and" {
			src = "(let " + v + " = " + o.src + "; __py_truthy(" + v + ") ? " + src + " : " + v + ")"
		} else {
			src = "(let " + v + " = " + o.src + "; __py_truthy(" + v + ") ? " + v + " : " + src + ")"
		}
	}
	// Its type is the value's: expr would otherwise type the ?: by one branch.
	return pyOut{src: "__py_value(" + src + ")", class: 'a'}, nil
}

// pyIsBool reports whether n is certainly a boolean in Python.
func pyIsBool(n *pyNode) bool {
	switch n.kind {
	case pyLit, pyCall, pyMethod:
		return n.isBool
	case pyCompare:
		return true
	case pyUnary:
		return n.op == "not"
	case pyBool:
		for _, k := range n.kids {
			if !pyIsBool(k) {
				return false
			}
		}
		return true
	case pyTernary:
		return pyIsBool(n.kids[0]) && pyIsBool(n.kids[2])
	}
	return false
}

// duplicable: evaluating it twice costs nothing and gives the same (a
// literal, a name, a path of them).
func duplicable(n *pyNode) bool {
	switch n.kind {
	case pyLit, pyNameRef:
		return true
	case pyAttr:
		return duplicable(n.kids[0])
	}
	return false
}

// compare translates a comparison; a chain a < b < c becomes a < b and
// b < c, with b evaluated once.
func (t *pyTranslator) compare(n *pyNode) (pyOut, error) {
	outs := make([]pyOut, len(n.kids))
	for i, k := range n.kids {
		o, err := t.value(k)
		if err != nil {
			return pyOut{}, err
		}
		outs[i] = o
	}
	if len(n.ops) == 1 {
		return pyCompareOne(outs[0], n.ops[0], outs[1]), nil
	}
	var lets []string
	for i := 1; i < len(outs)-1; i++ {
		if !duplicable(n.kids[i]) {
			v := t.newLet()
			lets = append(lets, "let "+v+" = "+outs[i].src+"; ")
			outs[i] = pyOut{src: v, class: 'a'}
		}
	}
	parts := make([]string, len(n.ops))
	for i, op := range n.ops {
		c := pyCompareOne(outs[i], op, outs[i+1])
		if c.class != 'a' && c.class != 'c' {
			c.src = "(" + c.src + ")"
		}
		parts[i] = c.src
	}
	src := strings.Join(parts, " and ")
	if len(lets) == 0 {
		return pyOut{src: src, class: '&', bool: true}, nil
	}
	return pyOut{src: "(" + strings.Join(lets, "") + src + ")", class: 'a', bool: true}, nil
}

func pyCompareOne(l pyOut, op string, r pyOut) pyOut {
	switch op {
	case "in":
		return pyOut{src: "__py_in(" + l.src + ", " + r.src + ")", class: 'a', bool: true}
	case "not in":
		return pyOut{src: "!__py_in(" + l.src + ", " + r.src + ")", class: 'a', bool: true}
	case "is":
		op = "=="
	case "is not":
		op = "!="
	}
	return pyOut{src: l.operand() + " " + op + " " + r.operand(), class: 'c', bool: true}
}

func (t *pyTranslator) call(n *pyNode) (pyOut, error) {
	arg := n.kids[0]
	a, err := t.value(arg)
	if err != nil {
		return pyOut{}, err
	}
	switch n.name {
	case "any", "all":
		return pyOut{src: n.name + "(" + a.src + ", __py_truthy(#))", class: 'a', bool: true}, nil
	case "str":
		return pyOut{src: "__py_str(" + a.src + ")", class: 'a'}, nil
	}
	return pyOut{src: n.name + "(" + a.src + ")", class: 'a', bool: n.isBool}, nil
}

func (t *pyTranslator) method(n *pyNode) (pyOut, error) {
	outs := make([]string, len(n.kids))
	for i, k := range n.kids {
		o, err := t.value(k)
		if err != nil {
			return pyOut{}, err
		}
		outs[i] = o.src
	}
	switch n.name {
	case "get":
		def := "nil"
		if len(outs) == 3 {
			def = outs[2]
		}
		return pyOut{src: "__py_dictget(" + outs[0] + ", " + outs[1] + ", " + def + ")", class: 'a'}, nil
	case "startswith", "endswith":
		return pyOut{src: "__py_" + n.name + "(" + outs[0] + ", " + outs[1] + ")", class: 'a', bool: true}, nil
	}
	return pyOut{src: "__py_" + n.name + "(" + outs[0] + ")", class: 'a'}, nil
}

// comprehension translates [elt for v in iter if c...] into expr's map and
// filter, the loop variable bound with let in each predicate.
func (t *pyTranslator) comprehension(n *pyNode) (pyOut, error) {
	iter, err := t.value(n.kids[1])
	if err != nil {
		return pyOut{}, err
	}
	if _, reserved := pyNames[n.name]; reserved {
		return pyOut{}, pyErrorf(n.pos, "the loop variable may not be called %q", n.name)
	}
	t.scopes = append(t.scopes, n.name)
	defer func() { t.scopes = t.scopes[:len(t.scopes)-1] }()
	bind := "let _" + n.name + " = #; "
	src := iter.src
	if len(n.kids) > 2 {
		var conds []string
		for _, c := range n.kids[2:] {
			o, err := t.boolean(c)
			if err != nil {
				return pyOut{}, err
			}
			if o.class != 'a' && o.class != 'c' && o.class != '&' {
				o.src = "(" + o.src + ")"
			}
			conds = append(conds, o.src)
		}
		src = "filter(" + src + ", " + bind + strings.Join(conds, " and ") + ")"
	}
	if elt := n.kids[0]; !(elt.kind == pyNameRef && elt.name == n.name) {
		e, err := t.value(elt)
		if err != nil {
			return pyOut{}, err
		}
		src = "map(" + src + ", " + bind + e.src + ")"
	}
	return pyOut{src: src, class: 'a'}, nil
}

// looksPython reports whether a condition given without `syntax` is
// Python: it reads as Python and uses what only Python writes (True,
// False, None, is, //, any or all of one argument).
func looksPython(src string) bool {
	// Without one of those words a condition is not Python, and most are
	// not: tokenizing each of 10,000 rules' conditions was a tenth of
	// what loading them allocated.
	if !strings.Contains(src, "True") && !strings.Contains(src, "False") && !strings.Contains(src, "None") &&
		!strings.Contains(src, "is") && !strings.Contains(src, "//") && !strings.Contains(src, "any") &&
		!strings.Contains(src, "all") {
		return false
	}
	toks, err := pyTokenize(src)
	if err != nil {
		return false
	}
	for i, t := range toks {
		switch {
		case t.kind == pyName && (t.text == "True" || t.text == "False" || t.text == "None" || t.text == "is"):
			return true
		case t.kind == pyOp && t.text == "//":
			return true
		case t.kind == pyName && (t.text == "any" || t.text == "all") && i+1 < len(toks) && toks[i+1].kind == pyOp && toks[i+1].text == "(":
			if oneArgument(toks[i+2:]) {
				return true
			}
		}
	}
	return false
}

// callsPythonMethod reports whether src calls one of the string and dict
// methods of pyMethods (the seed's context.state.get('k')): expr has no
// methods on maps or strings, so such a call is Python's. The text is
// tokenized only when it holds one of their names after a dot.
func callsPythonMethod(src string) bool {
	if !strings.Contains(src, ".") {
		return false
	}
	maybe := false
	for m := range pyMethods {
		if strings.Contains(src, "."+m) {
			maybe = true
			break
		}
	}
	if !maybe {
		return false
	}
	toks, err := pyTokenize(src)
	if err != nil {
		return false
	}
	for i := 0; i+2 < len(toks); i++ {
		if toks[i].kind == pyOp && toks[i].text == "." && toks[i+1].kind == pyName && toks[i+2].kind == pyOp && toks[i+2].text == "(" {
			if _, ok := pyMethods[toks[i+1].text]; ok {
				return true
			}
		}
	}
	return false
}

// oneArgument reports whether the call whose arguments start at toks (after
// its "(") has one argument: no comma at its own depth.
func oneArgument(toks []pyToken) bool {
	depth := 0
	for _, t := range toks {
		if t.kind != pyOp {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth == 0 {
				return true
			}
			depth--
		case ",":
			if depth == 0 {
				return false
			}
		}
	}
	return false
}

// conditionText is the expr source of an expression condition: as given,
// or translated from Python (syntax = "python", or detected). A Python
// problem is reported at its line and column in the file; ok is false then.
func (c *compiler) conditionText(src Source, cd *condDoc, r *Rule, problems *ruleProblems) (text string, ok bool) {
	expression := *cd.Expression
	syntax := "expr"
	if cd.Syntax != nil {
		syntax = *cd.Syntax
	} else if looksPython(expression) || callsPythonMethod(expression) {
		syntax = "python"
	}
	switch syntax {
	case "expr":
		return expression, true
	case "python":
	default:
		problems.add(locate(src.Text, `"`+syntax+`"`), "syntax %q: use \"expr\" or \"python\"", syntax)
		return "", false
	}
	if len(expression) > maxExpressionBytes { // also bounds the parser's depth
		problems.add(locate(src.Text, expression), "condition (python): %d bytes, more than the %d allowed", len(expression), maxExpressionBytes)
		return "", false
	}
	text, err := translatePython(expression)
	if err == nil {
		return text, true
	}
	pe, _ := err.(*pyError)
	if pe == nil {
		problems.add(locate(src.Text, expression), "condition (python): %v", err)
		return "", false
	}
	line, col := pyErrorAt(src.Text, expression, pe.pos)
	problems.list = append(problems.list, protocol.Problem{File: src.Name, Line: line, Col: col,
		Message: fmt.Sprintf("rule %q: condition (python): %s", r.ID, pe.msg)})
	return "", false
}

// pyErrorAt is the line and column in the file of byte pos of a condition:
// exact when the condition is written in the file as it reads (no
// escapes before pos), else the condition's line and no column.
func pyErrorAt(file []byte, expression string, pos int) (line, col int) {
	if i := bytes.Index(file, []byte(expression)); i >= 0 {
		return lineColAt(file, i+pos)
	}
	if i := bytes.Index(file, []byte(expression[:pos])); i >= 0 && pos > 0 {
		return lineColAt(file, i+pos)
	}
	return locate(file, expression), 0
}
