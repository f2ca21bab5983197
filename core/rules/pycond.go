package rules

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
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

// pyError is a problem in a Python condition, at a byte offset of it.
type pyError struct {
	pos int
	msg string
}

func (e *pyError) Error() string { return e.msg }

func pyErrorf(pos int, format string, args ...any) *pyError {
	return &pyError{pos: pos, msg: fmt.Sprintf(format, args...)}
}

// ---- Tokens -----------------------------------------------------------------

type pyTokKind byte

const (
	pyEOF pyTokKind = iota
	pyName
	pyNumber
	pyString
	pyOp
)

type pyToken struct {
	kind pyTokKind
	pos  int
	text string // a name, an operator, a number's source
	str  string // a string literal's value
	num  string // a number as expr writes it
}

// pyOps are Python's operators and delimiters, longest first.
var pyOps = []string{"**", "//", "==", "!=", "<=", ">=", "<<", ">>", "->", ":=",
	"+", "-", "*", "/", "%", "<", ">", "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "&", "^", "~", "@", ";", "=", "!"}

// pyTokenize splits a Python expression into tokens. Newlines are spaces
// (a condition is one expression); # starts a comment.
func pyTokenize(src string) ([]pyToken, error) {
	var out []pyToken
	i := 0
	for {
		for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r' || src[i] == '\f' ||
			(src[i] == '\\' && i+1 < len(src) && src[i+1] == '\n')) {
			i++
		}
		if i < len(src) && src[i] == '#' {
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		if i >= len(src) {
			return append(out, pyToken{kind: pyEOF, pos: i}), nil
		}
		c := src[i]
		start := i
		switch {
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			tok, n, err := pyNumberAt(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, tok)
			i += n
		case c == '_' || c < utf8.RuneSelf && unicode.IsLetter(rune(c)) || c >= utf8.RuneSelf:
			for i < len(src) {
				r, size := utf8.DecodeRuneInString(src[i:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				i += size
			}
			if i == start {
				return nil, pyErrorf(start, "unexpected character %q", src[start:start+1])
			}
			word := src[start:i]
			if i < len(src) && (src[i] == '\'' || src[i] == '"') && isStringPrefix(word) {
				tok, n, err := pyStringAt(src, start, len(word))
				if err != nil {
					return nil, err
				}
				out = append(out, tok)
				i = start + n
				continue
			}
			out = append(out, pyToken{kind: pyName, pos: start, text: word})
		case c == '\'' || c == '"':
			tok, n, err := pyStringAt(src, i, 0)
			if err != nil {
				return nil, err
			}
			out = append(out, tok)
			i += n
		default:
			op := ""
			for _, o := range pyOps {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return nil, pyErrorf(i, "unexpected character %q", r)
			}
			out = append(out, pyToken{kind: pyOp, pos: i, text: op})
			i += len(op)
		}
	}
}

func isStringPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "f", "br", "rb", "fr", "rf":
		return true
	}
	return false
}

// pyNumberAt reads the number at src[i:]: integers (decimal, 0x, 0o, 0b,
// with _), floats. It returns the token and its length.
func pyNumberAt(src string, i int) (pyToken, int, error) {
	j := i
	isWord := func(b byte) bool {
		return b == '_' || b == '.' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	for j < len(src) && (isWord(src[j]) || (src[j] == '+' || src[j] == '-') && (src[j-1] == 'e' || src[j-1] == 'E') &&
		!strings.HasPrefix(strings.ToLower(src[i:j]), "0x")) {
		j++
	}
	text := src[i:j]
	// A name after a number (1.real, 1if) is not a number of ours.
	tok := pyToken{kind: pyNumber, pos: i, text: text}
	lower := strings.ToLower(text)
	if strings.HasSuffix(lower, "j") {
		return tok, 0, pyErrorf(i, "complex numbers are not supported")
	}
	if strings.Contains(text, "__") || strings.HasSuffix(text, "_") || strings.Contains(text, "_.") || strings.Contains(text, "._") {
		return tok, 0, pyErrorf(i, "invalid number %q", text)
	}
	clean := strings.ReplaceAll(text, "_", "")
	isInt := !strings.ContainsAny(lower, ".e") || strings.HasPrefix(lower, "0x")
	if isInt {
		if len(clean) > 1 && clean[0] == '0' && clean[1] >= '0' && clean[1] <= '9' {
			if strings.Trim(clean, "0") != "" {
				return tok, 0, pyErrorf(i, "invalid number %q: leading zeros are not allowed (use 0o for octal)", text)
			}
			clean = "0"
		}
		n, err := strconv.ParseInt(clean, 0, 64)
		if err != nil {
			return tok, 0, pyErrorf(i, "invalid number %q", text)
		}
		tok.num = strconv.FormatInt(n, 10)
		return tok, j - i, nil
	}
	f, err := strconv.ParseFloat(clean, 64)
	if err != nil || math.IsInf(f, 0) {
		return tok, 0, pyErrorf(i, "invalid number %q", text)
	}
	tok.num = pyFloat(f)
	return tok, j - i, nil
}

// pyFloat writes a float so that expr reads it back as a float.
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// pyStringAt reads the string literal at src[i:] whose prefix (r, u, b,
// f...) is plen bytes long. It returns the token and the literal's length.
func pyStringAt(src string, i, plen int) (pyToken, int, error) {
	prefix := strings.ToLower(src[i : i+plen])
	if strings.Contains(prefix, "b") {
		return pyToken{}, 0, pyErrorf(i, "bytes literals are not supported")
	}
	if strings.Contains(prefix, "f") {
		return pyToken{}, 0, pyErrorf(i, "f-strings are not supported")
	}
	raw := strings.Contains(prefix, "r")
	j := i + plen
	q := src[j : j+1]
	if strings.HasPrefix(src[j:], q+q+q) {
		q = q + q + q
	}
	j += len(q)
	var b strings.Builder
	for {
		if j >= len(src) || len(q) == 1 && src[j] == '\n' {
			return pyToken{}, 0, pyErrorf(i, "unterminated string")
		}
		if strings.HasPrefix(src[j:], q) {
			j += len(q)
			break
		}
		c := src[j]
		if c != '\\' {
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(src) {
			return pyToken{}, 0, pyErrorf(i, "unterminated string")
		}
		if raw {
			b.WriteString(src[j : j+2])
			j += 2
			continue
		}
		e := src[j+1]
		j += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			k := j - 1
			for k < len(src) && k < j+2 && src[k] >= '0' && src[k] <= '7' {
				k++
			}
			n, _ := strconv.ParseUint(src[j-1:k], 8, 32)
			b.WriteRune(rune(n))
			j = k
		case 'x', 'u', 'U':
			size := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if j+size > len(src) {
				return pyToken{}, 0, pyErrorf(j-2, "truncated \\%c escape", e)
			}
			n, err := strconv.ParseUint(src[j:j+size], 16, 32)
			if err != nil || n > unicode.MaxRune {
				return pyToken{}, 0, pyErrorf(j-2, "invalid \\%c escape", e)
			}
			b.WriteRune(rune(n))
			j += size
		case 'N':
			return pyToken{}, 0, pyErrorf(j-2, "\\N{...} escapes are not supported")
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return pyToken{kind: pyString, pos: i, text: src[i:j], str: b.String()}, j - i, nil
}

// ---- Syntax tree ------------------------------------------------------------

type pyKind byte

const (
	pyLit     pyKind = iota + 1 // text: expr source of a literal; bool when True/False
	pyNameRef                   // name
	pyAttr                      // kids[0].name
	pyIndex                     // kids[0][kids[1]]
	pySlice                     // kids[0][kids[1]:kids[2]] (nil bounds absent)
	pyCall                      // name(kids...)
	pyMethod                    // kids[0].name(kids[1:]...)
	pyUnary                     // op kids[0]: not, -, +
	pyBin                       // kids[0] op kids[1]: + - * / // % **
	pyBool                      // kids joined by op: and, or
	pyCompare                   // kids[0] ops[0] kids[1] ops[1] kids[2] ...
	pyTernary                   // kids[0] if kids[1] else kids[2]
	pyList                      // [kids...] (tuples too)
	pyDict                      // {keys[i]: kids[i]}
	pyComp                      // [kids[0] for name in kids[1] if kids[2:]...]
)

type pyNode struct {
	kind   pyKind
	pos    int
	op     string
	name   string
	text   string
	isBool bool
	isNone bool
	kids   []*pyNode
	ops    []string
	keys   []string
}

// ---- Parser -----------------------------------------------------------------

type pyParser struct {
	toks []pyToken
	i    int
}

func (p *pyParser) peek() pyToken { return p.toks[p.i] }
func (p *pyParser) next() pyToken {
	t := p.toks[p.i]
	if t.kind != pyEOF {
		p.i++
	}
	return t
}

func (p *pyParser) isOp(op string) bool {
	t := p.peek()
	return t.kind == pyOp && t.text == op
}

func (p *pyParser) isWord(w string) bool {
	t := p.peek()
	return t.kind == pyName && t.text == w
}

func (p *pyParser) expect(op string) error {
	if !p.isOp(op) {
		return p.unexpected(fmt.Sprintf("%q", op))
	}
	p.next()
	return nil
}

func (p *pyParser) unexpected(want string) error {
	t := p.peek()
	if t.kind == pyEOF {
		return pyErrorf(t.pos, "unexpected end of expression (expected %s)", want)
	}
	return pyErrorf(t.pos, "unexpected %s (expected %s)", describeTok(t), want)
}

func describeTok(t pyToken) string {
	switch t.kind {
	case pyString:
		return "string " + t.text
	case pyNumber:
		return "number " + t.text
	case pyName:
		return fmt.Sprintf("%q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

// pyKeywords may not be names.
var pyKeywords = map[string]bool{"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true,
	"for": true, "lambda": true, "True": true, "False": true, "None": true, "await": true, "yield": true,
	"import": true, "del": true, "pass": true, "return": true, "class": true, "def": true, "while": true,
	"with": true, "as": true, "from": true, "global": true, "nonlocal": true, "try": true, "except": true,
	"finally": true, "raise": true, "assert": true, "break": true, "continue": true, "elif": true, "async": true}

// parsePython parses a whole Python condition.
func parsePython(src string) (*pyNode, error) {
	toks, err := pyTokenize(src)
	if err != nil {
		return nil, err
	}
	p := &pyParser{toks: toks}
	if p.peek().kind == pyEOF {
		return nil, pyErrorf(0, "empty expression")
	}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != pyEOF {
		return nil, p.unexpected("the end of the expression")
	}
	return n, nil
}

func (p *pyParser) expr() (*pyNode, error) {
	if p.isWord("lambda") {
		return nil, pyErrorf(p.peek().pos, "lambda is not supported")
	}
	n, err := p.orTest()
	if err != nil {
		return nil, err
	}
	if p.isOp(":=") {
		return nil, pyErrorf(p.peek().pos, "assignment expressions (:=) are not supported")
	}
	if !p.isWord("if") {
		return n, nil
	}
	pos := p.next().pos
	cond, err := p.orTest()
	if err != nil {
		return nil, err
	}
	if !p.isWord("else") {
		return nil, p.unexpected(`"else"`)
	}
	p.next()
	other, err := p.expr()
	if err != nil {
		return nil, err
	}
	return &pyNode{kind: pyTernary, pos: pos, kids: []*pyNode{n, cond, other}}, nil
}

func (p *pyParser) orTest() (*pyNode, error) { return p.boolOp("or", p.andTest) }

func (p *pyParser) andTest() (*pyNode, error) { return p.boolOp("and", p.notTest) }

func (p *pyParser) boolOp(op string, operand func() (*pyNode, error)) (*pyNode, error) {
	n, err := operand()
	if err != nil || !p.isWord(op) {
		return n, err
	}
	out := &pyNode{kind: pyBool, pos: n.pos, op: op, kids: []*pyNode{n}}
	for p.isWord(op) {
		p.next()
		k, err := operand()
		if err != nil {
			return nil, err
		}
		out.kids = append(out.kids, k)
	}
	return out, nil
}

func (p *pyParser) notTest() (*pyNode, error) {
	if p.isWord("not") {
		pos := p.next().pos
		k, err := p.notTest()
		if err != nil {
			return nil, err
		}
		return &pyNode{kind: pyUnary, pos: pos, op: "not", kids: []*pyNode{k}}, nil
	}
	return p.comparison()
}

// compOp reads a comparison operator, or returns "".
func (p *pyParser) compOp() string {
	t := p.peek()
	switch {
	case t.kind == pyOp && (t.text == "<" || t.text == ">" || t.text == "==" || t.text == "!=" || t.text == "<=" || t.text == ">="):
		p.next()
		return t.text
	case t.kind == pyName && t.text == "in":
		p.next()
		return "in"
	case t.kind == pyName && t.text == "not" && p.toks[p.i+1].kind == pyName && p.toks[p.i+1].text == "in":
		p.next()
		p.next()
		return "not in"
	case t.kind == pyName && t.text == "is":
		p.next()
		if p.isWord("not") {
			p.next()
			return "is not"
		}
		return "is"
	}
	return ""
}

func (p *pyParser) comparison() (*pyNode, error) {
	n, err := p.bitwise()
	if err != nil {
		return nil, err
	}
	var out *pyNode
	for {
		pos := p.peek().pos
		op := p.compOp()
		if op == "" {
			break
		}
		k, err := p.bitwise()
		if err != nil {
			return nil, err
		}
		if op == "is" || op == "is not" {
			if k.kind != pyLit || (!k.isBool && !k.isNone) {
				return nil, pyErrorf(pos, "%q compares with None, True or False only (use == or !=)", op)
			}
		}
		if out == nil {
			out = &pyNode{kind: pyCompare, pos: n.pos, kids: []*pyNode{n}}
		}
		out.ops = append(out.ops, op)
		out.kids = append(out.kids, k)
	}
	if out == nil {
		return n, nil
	}
	return out, nil
}

// bitwise refuses Python's bitwise operators, which simpleeval has but
// rules do not need; what binds tighter is arithmetic.
func (p *pyParser) bitwise() (*pyNode, error) {
	n, err := p.arith()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == pyOp && (t.text == "|" || t.text == "&" || t.text == "^" || t.text == "<<" || t.text == ">>") {
		return nil, pyErrorf(t.pos, "the bitwise operator %s is not supported", t.text)
	}
	return n, nil
}

func (p *pyParser) arith() (*pyNode, error) {
	n, err := p.term()
	for err == nil && (p.isOp("+") || p.isOp("-")) {
		t := p.next()
		var k *pyNode
		if k, err = p.term(); err == nil {
			n = &pyNode{kind: pyBin, pos: t.pos, op: t.text, kids: []*pyNode{n, k}}
		}
	}
	return n, err
}

func (p *pyParser) term() (*pyNode, error) {
	n, err := p.factor()
	for err == nil && (p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") || p.isOp("@")) {
		t := p.next()
		if t.text == "@" {
			return nil, pyErrorf(t.pos, "the operator @ is not supported")
		}
		var k *pyNode
		if k, err = p.factor(); err == nil {
			n = &pyNode{kind: pyBin, pos: t.pos, op: t.text, kids: []*pyNode{n, k}}
		}
	}
	return n, err
}

func (p *pyParser) factor() (*pyNode, error) {
	if p.isOp("-") || p.isOp("+") || p.isOp("~") {
		t := p.next()
		if t.text == "~" {
			return nil, pyErrorf(t.pos, "the bitwise operator ~ is not supported")
		}
		k, err := p.factor()
		if err != nil {
			return nil, err
		}
		return &pyNode{kind: pyUnary, pos: t.pos, op: t.text, kids: []*pyNode{k}}, nil
	}
	return p.power()
}

func (p *pyParser) power() (*pyNode, error) {
	n, err := p.primary()
	if err != nil || !p.isOp("**") {
		return n, err
	}
	t := p.next()
	k, err := p.factor() // right-associative; -x binds looser on the left only
	if err != nil {
		return nil, err
	}
	return &pyNode{kind: pyBin, pos: t.pos, op: "**", kids: []*pyNode{n, k}}, nil
}

func (p *pyParser) primary() (*pyNode, error) {
	n, err := p.atom()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == pyOp && t.text == ".":
			p.next()
			name := p.next()
			if name.kind != pyName || pyKeywords[name.text] {
				p.i--
				return nil, p.unexpected("an attribute name")
			}
			if strings.HasPrefix(name.text, "_") {
				return nil, pyErrorf(name.pos, "attribute %q: names starting with _ are not allowed", name.text)
			}
			if p.isOp("(") {
				m, err := p.method(n, name)
				if err != nil {
					return nil, err
				}
				n = m
				continue
			}
			n = &pyNode{kind: pyAttr, pos: name.pos, name: name.text, kids: []*pyNode{n}}
		case t.kind == pyOp && t.text == "[":
			p.next()
			if n, err = p.subscript(n, t.pos); err != nil {
				return nil, err
			}
		case t.kind == pyOp && t.text == "(":
			if n.kind != pyNameRef {
				return nil, pyErrorf(t.pos, "only the functions %s may be called", funcList())
			}
			if n, err = p.call(n); err != nil {
				return nil, err
			}
		default:
			return n, nil
		}
	}
}

func funcList() string {
	return "context_above_threshold, tool_completed, tool_failed, any, all, len, int, float and str"
}

func (p *pyParser) subscript(n *pyNode, pos int) (*pyNode, error) {
	var lo, hi *pyNode
	var err error
	if !p.isOp(":") {
		if lo, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if !p.isOp(":") {
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		if lo == nil {
			return nil, pyErrorf(pos, "empty subscript")
		}
		return &pyNode{kind: pyIndex, pos: pos, kids: []*pyNode{n, lo}}, nil
	}
	p.next()
	if !p.isOp("]") && !p.isOp(":") {
		if hi, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if p.isOp(":") {
		return nil, pyErrorf(p.peek().pos, "slices with a step are not supported")
	}
	if err := p.expect("]"); err != nil {
		return nil, err
	}
	return &pyNode{kind: pySlice, pos: pos, kids: []*pyNode{n, lo, hi}}, nil
}

// args reads call arguments up to ")"; a lone generator expression
// (any(x > 1 for x in xs)) is read as a list comprehension.
func (p *pyParser) args() ([]*pyNode, error) {
	p.next() // (
	var out []*pyNode
	for !p.isOp(")") {
		if p.peek().kind == pyName && p.toks[p.i+1].kind == pyOp && p.toks[p.i+1].text == "=" {
			return nil, pyErrorf(p.peek().pos, "keyword arguments are not supported")
		}
		if p.isOp("*") || p.isOp("**") {
			return nil, pyErrorf(p.peek().pos, "argument unpacking is not supported")
		}
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.isWord("for") {
			if len(out) > 0 {
				return nil, pyErrorf(p.peek().pos, "a generator expression must be the only argument")
			}
			if a, err = p.comprehension(a); err != nil {
				return nil, err
			}
			if !p.isOp(")") {
				return nil, p.unexpected(`")"`)
			}
		}
		out = append(out, a)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return out, p.expect(")")
}

func (p *pyParser) call(fn *pyNode) (*pyNode, error) {
	if !pyFuncs[fn.name] {
		return nil, pyErrorf(fn.pos, "function %q is not defined (the functions are %s)", fn.name, funcList())
	}
	args, err := p.args()
	if err != nil {
		return nil, err
	}
	if len(args) != 1 {
		return nil, pyErrorf(fn.pos, "%s() takes one argument, not %d", fn.name, len(args))
	}
	return &pyNode{kind: pyCall, pos: fn.pos, name: fn.name, kids: args, isBool: pyBoolFuncs[fn.name]}, nil
}

func (p *pyParser) method(recv *pyNode, name pyToken) (*pyNode, error) {
	want, ok := pyMethods[name.text]
	if !ok {
		return nil, pyErrorf(name.pos, "method %q is not supported (startswith, endswith, lower, upper, strip, get)", name.text)
	}
	args, err := p.args()
	if err != nil {
		return nil, err
	}
	if want >= 0 && len(args) != want || want < 0 && (len(args) < 1 || len(args) > 2) {
		return nil, pyErrorf(name.pos, "%s() does not take %d arguments", name.text, len(args))
	}
	return &pyNode{kind: pyMethod, pos: name.pos, name: name.text, kids: append([]*pyNode{recv}, args...),
		isBool: name.text == "startswith" || name.text == "endswith"}, nil
}

// comprehension reads `for name in iterable [if cond]...` after elt.
func (p *pyParser) comprehension(elt *pyNode) (*pyNode, error) {
	pos := p.next().pos // for
	v := p.next()
	if v.kind != pyName || pyKeywords[v.text] {
		p.i--
		return nil, p.unexpected("a loop variable")
	}
	if p.isOp(",") {
		return nil, pyErrorf(p.peek().pos, "a comprehension takes one loop variable")
	}
	if !p.isWord("in") {
		return nil, p.unexpected(`"in"`)
	}
	p.next()
	iter, err := p.orTest()
	if err != nil {
		return nil, err
	}
	n := &pyNode{kind: pyComp, pos: pos, name: v.text, kids: []*pyNode{elt, iter}}
	for p.isWord("if") {
		p.next()
		c, err := p.orTest()
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, c)
	}
	if p.isWord("for") {
		return nil, pyErrorf(p.peek().pos, "a comprehension takes one for")
	}
	return n, nil
}

func (p *pyParser) atom() (*pyNode, error) {
	t := p.next()
	switch t.kind {
	case pyNumber:
		return &pyNode{kind: pyLit, pos: t.pos, text: t.num}, nil
	case pyString:
		s := t.str
		for p.peek().kind == pyString { // 'a' 'b' is 'ab'
			s += p.next().str
		}
		return &pyNode{kind: pyLit, pos: t.pos, text: exprString(s)}, nil
	case pyName:
		switch t.text {
		case "True", "False":
			return &pyNode{kind: pyLit, pos: t.pos, text: strings.ToLower(t.text), isBool: true}, nil
		case "None":
			return &pyNode{kind: pyLit, pos: t.pos, text: "nil", isNone: true}, nil
		}
		if pyKeywords[t.text] {
			p.i--
			return nil, p.unexpected("a value")
		}
		return &pyNode{kind: pyNameRef, pos: t.pos, name: t.text}, nil
	case pyOp:
		switch t.text {
		case "(":
			return p.sequence(t.pos, ")", true)
		case "[":
			return p.sequence(t.pos, "]", false)
		case "{":
			return p.dict(t.pos)
		}
	}
	p.i--
	return nil, p.unexpected("a value")
}

// sequence reads a parenthesised expression, a tuple or a list (a list
// comprehension too) up to close.
func (p *pyParser) sequence(pos int, close string, paren bool) (*pyNode, error) {
	list := &pyNode{kind: pyList, pos: pos}
	if p.isOp(close) {
		p.next()
		return list, nil
	}
	first, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.isWord("for") {
		c, err := p.comprehension(first)
		if err != nil {
			return nil, err
		}
		return c, p.expect(close)
	}
	if paren && p.isOp(")") {
		p.next()
		return first, nil
	}
	list.kids = append(list.kids, first)
	for p.isOp(",") {
		p.next()
		if p.isOp(close) {
			break
		}
		k, err := p.expr()
		if err != nil {
			return nil, err
		}
		list.kids = append(list.kids, k)
	}
	return list, p.expect(close)
}

func (p *pyParser) dict(pos int) (*pyNode, error) {
	d := &pyNode{kind: pyDict, pos: pos}
	for !p.isOp("}") {
		k := p.peek()
		key, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return nil, pyErrorf(k.pos, "sets are not supported (a dict needs key: value)")
		}
		if key.kind != pyLit || k.kind != pyString {
			return nil, pyErrorf(k.pos, "dict keys must be strings")
		}
		p.next()
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, key.text)
		d.kids = append(d.kids, v)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return d, p.expect("}")
}

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
	} else if looksPython(expression) {
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
