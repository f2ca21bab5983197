package rules

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The tokenizer and parser of Python conditions (pycond.go translates
// the tree into expr): a recursive descent over Python's grammar of
// expressions, from the conditional expression down to atoms, refusing
// what simpleeval does not evaluate or rules do not need.

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
