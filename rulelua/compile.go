package rulelua

import (
	"fmt"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

const (
	// maxSyntaxDepth bounds the nesting of the AST (Lua 5.1's LUAI_MAXCCALLS is also 200), so
	// the recursive compiler never recurses deeply on hostile sources.
	maxSyntaxDepth = 200
	// protoCacheSize bounds the prototype cache.
	protoCacheSize = 512
	// maxUpvalues is Lua 5.1's LUAI_MAXUPVALUES. gopher-lua stores the count in a uint8 and
	// upvalue indexes in 9-bit operands without checking either; past them the VM panics.
	maxUpvalues = 60
	// maxCodeSize bounds the instructions of one function. gopher-lua range-checks forward
	// jumps only: a loop body over 131071 instructions gets a wrapped backward jump.
	maxCodeSize = 100000
	// concatName is the hidden local (and environment key) holding the guarded concatenation.
	// It is not a valid Lua identifier, so scripts cannot name it.
	concatName = "\x00concat"
)

var protoCache = struct {
	sync.RWMutex
	m map[string]*lua.FunctionProto
}{m: map[string]*lua.FunctionProto{}}

func compileCached(name, source string) (*lua.FunctionProto, error) {
	key := name + "\x00" + source
	protoCache.RLock()
	p := protoCache.m[key]
	protoCache.RUnlock()
	if p != nil {
		return p, nil
	}
	p, err := compileSource(name, source)
	if err != nil {
		return nil, err
	}
	protoCache.Lock()
	if len(protoCache.m) >= protoCacheSize {
		for k := range protoCache.m { // evict an arbitrary entry
			delete(protoCache.m, k)
			break
		}
	}
	protoCache.m[key] = p
	protoCache.Unlock()
	return p, nil
}

func compileSource(name, source string) (*lua.FunctionProto, error) {
	if err := prescan(source); err != nil {
		return nil, newError(KindSyntax, name, name+": "+err.Error(), nil)
	}
	// A source that is one expression (the seed's conditions, `context.turn.token_usage > 0.8`,
	// written as lupa's eval takes them) is compiled as "return <expression>", on the same line.
	chunk, err := parse.Parse(strings.NewReader("return "+source), name)
	if err != nil {
		chunk, err = parse.Parse(strings.NewReader(source), name)
	}
	if err != nil {
		return nil, syntaxError(name, err)
	}
	rw := &rewriter{name: name}
	if msg := rw.run(chunk); msg != "" {
		return nil, newError(KindSyntax, name, msg, nil)
	}
	if rw.concats > 0 {
		// local <concatName> = <concatName>: read once from the environment at chunk start.
		decl := &ast.LocalAssignStmt{Names: []string{concatName}, Exprs: []ast.Expr{&ast.IdentExpr{Value: concatName}}}
		decl.SetLine(1)
		decl.SetLastLine(1)
		chunk = append([]ast.Stmt{decl}, chunk...)
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		if ce, ok := err.(*lua.CompileError); ok {
			return nil, newError(KindSyntax, name, fmt.Sprintf("%s:%d: %s", name, ce.Line, ce.Message), nil)
		}
		return nil, newError(KindSyntax, name, fmt.Sprintf("%s: %v", name, err), nil)
	}
	if msg := checkProto(name, proto); msg != "" {
		return nil, newError(KindSyntax, name, msg, nil)
	}
	patchProto(proto)
	return proto, nil
}

// checkProto refuses prototypes gopher-lua compiled but cannot run correctly (see maxUpvalues
// and maxCodeSize), recursively.
func checkProto(name string, p *lua.FunctionProto) string {
	where, what := name+": main chunk", "main chunk"
	if p.LineDefined > 0 {
		where, what = fmt.Sprintf("%s:%d: function", name, p.LineDefined), "function"
	}
	if n := len(p.DbgUpvalues); n > maxUpvalues {
		return fmt.Sprintf("%s uses %d upvalues (more than %d)", where, n, maxUpvalues)
	}
	if n := len(p.Code); n > maxCodeSize {
		return fmt.Sprintf("%s too long (%d instructions, more than %d per %s)", where, n, maxCodeSize, what)
	}
	for _, c := range p.FunctionPrototypes {
		if msg := checkProto(name, c); msg != "" {
			return msg
		}
	}
	return ""
}

// patchProto adjusts compiled code, recursively:
//
//   - It turns off Lua 5.0's implicit `arg` table in vararg functions that do not use `...` (the
//     main chunk is one): gopher-lua would otherwise build that table, with three Go maps, on
//     every call of the chunk.
//   - It turns every TAILCALL into the plain CALL the compiler made it from (same operands; the
//     RETURN after it returns all results). gopher-lua counts tail calls in the caller's frame
//     and, when an error is caught, writes one stack-trace line per tail call, outside any
//     deadline check: an endless tail-call loop followed by an error would allocate gigabytes.
//     Without proper tail calls, tail recursion is bounded by the call stack like any other.
func patchProto(p *lua.FunctionProto) {
	p.IsVarArg &^= lua.VarArgNeedsArg
	for i, inst := range p.Code {
		if int(inst>>26) == lua.OP_TAILCALL {
			p.Code[i] = inst&0x3ffffff | uint32(lua.OP_CALL)<<26
		}
	}
	for _, c := range p.FunctionPrototypes {
		patchProto(c)
	}
}

func syntaxError(name string, err error) error {
	if pe, ok := err.(*parse.Error); ok {
		msg := strings.TrimSpace(pe.Message)
		if pe.Pos.Line <= 0 {
			return newError(KindSyntax, name, fmt.Sprintf("%s: %s at end of file", name, msg), nil)
		}
		if pe.Token != "" {
			msg += fmt.Sprintf(" near '%s'", pe.Token)
		}
		return newError(KindSyntax, name, fmt.Sprintf("%s:%d: %s", name, pe.Pos.Line, msg), nil)
	}
	return newError(KindSyntax, name, fmt.Sprintf("%s: %s", name, strings.TrimSpace(err.Error())), nil)
}

// rewriter walks the AST once: it bounds nesting depth and replaces every `a .. b .. c` (a
// right-nested chain of concatenations) by a call to the guarded concatenation function, held in
// the hidden local concatName.
type rewriter struct {
	name    string
	depth   int
	line    int
	concats int
}

type tooDeep struct{}

func (r *rewriter) run(chunk []ast.Stmt) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(tooDeep); !ok {
				panic(v)
			}
			msg = fmt.Sprintf("%s: line %d: too many syntax levels (more than %d nested blocks or expressions)", r.name, r.line, maxSyntaxDepth)
		}
	}()
	r.block(chunk)
	return ""
}

func (r *rewriter) enter(line int) {
	r.depth++
	if line > 0 {
		r.line = line
	}
	if r.depth > maxSyntaxDepth {
		panic(tooDeep{})
	}
}

func (r *rewriter) leave() { r.depth-- }

func (r *rewriter) block(stmts []ast.Stmt) {
	for _, s := range stmts {
		r.stmt(s)
	}
}

func (r *rewriter) exprs(list []ast.Expr) {
	for i, e := range list {
		list[i] = r.expr(e)
	}
}

func (r *rewriter) stmt(s ast.Stmt) {
	r.enter(s.Line())
	defer r.leave()
	switch s := s.(type) {
	case *ast.AssignStmt:
		r.exprs(s.Lhs)
		r.exprs(s.Rhs)
	case *ast.LocalAssignStmt:
		r.exprs(s.Exprs)
	case *ast.FuncCallStmt:
		s.Expr = r.expr(s.Expr)
	case *ast.DoBlockStmt:
		r.block(s.Stmts)
	case *ast.WhileStmt:
		s.Condition = r.expr(s.Condition)
		r.block(s.Stmts)
	case *ast.RepeatStmt:
		r.block(s.Stmts)
		s.Condition = r.expr(s.Condition)
	case *ast.IfStmt:
		s.Condition = r.expr(s.Condition)
		r.block(s.Then)
		r.block(s.Else)
	case *ast.NumberForStmt:
		s.Init = r.expr(s.Init)
		s.Limit = r.expr(s.Limit)
		if s.Step != nil {
			s.Step = r.expr(s.Step)
		}
		r.block(s.Stmts)
	case *ast.GenericForStmt:
		r.exprs(s.Exprs)
		r.block(s.Stmts)
	case *ast.FuncDefStmt:
		if s.Name != nil {
			if s.Name.Func != nil {
				s.Name.Func = r.expr(s.Name.Func)
			}
			if s.Name.Receiver != nil {
				s.Name.Receiver = r.expr(s.Name.Receiver)
			}
		}
		r.function(s.Func)
	case *ast.ReturnStmt:
		r.exprs(s.Exprs)
	case *ast.BreakStmt, *ast.LabelStmt, *ast.GotoStmt:
	}
}

func (r *rewriter) function(f *ast.FunctionExpr) {
	if f != nil {
		r.block(f.Stmts)
	}
}

func (r *rewriter) expr(e ast.Expr) ast.Expr {
	if e == nil {
		return nil
	}
	r.enter(e.Line())
	defer r.leave()
	switch x := e.(type) {
	case *ast.AttrGetExpr:
		x.Object = r.expr(x.Object)
		x.Key = r.expr(x.Key)
	case *ast.TableExpr:
		for _, f := range x.Fields {
			if f.Key != nil {
				f.Key = r.expr(f.Key)
			}
			f.Value = r.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		if x.Func != nil {
			x.Func = r.expr(x.Func)
		}
		if x.Receiver != nil {
			x.Receiver = r.expr(x.Receiver)
		}
		r.exprs(x.Args)
	case *ast.LogicalOpExpr:
		x.Lhs = r.expr(x.Lhs)
		x.Rhs = r.expr(x.Rhs)
	case *ast.RelationalOpExpr:
		x.Lhs = r.expr(x.Lhs)
		x.Rhs = r.expr(x.Rhs)
	case *ast.ArithmeticOpExpr:
		x.Lhs = r.expr(x.Lhs)
		x.Rhs = r.expr(x.Rhs)
	case *ast.UnaryMinusOpExpr:
		x.Expr = r.expr(x.Expr)
	case *ast.UnaryNotOpExpr:
		x.Expr = r.expr(x.Expr)
	case *ast.UnaryLenOpExpr:
		x.Expr = r.expr(x.Expr)
	case *ast.FunctionExpr:
		r.function(x)
	case *ast.StringConcatOpExpr:
		return r.concat(x)
	}
	return e
}

// concat flattens the right spine a .. (b .. (c .. d)) into one call, as Lua's OP_CONCAT does,
// so long chains neither nest deeply nor change the order metamethods see.
func (r *rewriter) concat(x *ast.StringConcatOpExpr) ast.Expr {
	r.concats++
	var operands []ast.Expr
	var cur ast.Expr = x
	for {
		c, ok := cur.(*ast.StringConcatOpExpr)
		if !ok {
			break
		}
		operands = append(operands, c.Lhs)
		cur = c.Rhs
	}
	operands = append(operands, cur)
	for i, op := range operands {
		op = r.expr(op)
		adjustOne(op)
		operands[i] = op
	}
	fn := &ast.IdentExpr{Value: concatName}
	fn.SetLine(x.Line())
	fn.SetLastLine(x.LastLine())
	call := &ast.FuncCallExpr{Func: fn, Args: operands, AdjustRet: true}
	call.SetLine(x.Line())
	call.SetLastLine(x.LastLine())
	return call
}

// adjustOne makes a call or ... operand yield exactly one value, as it would under OP_CONCAT.
func adjustOne(e ast.Expr) {
	switch x := e.(type) {
	case *ast.FuncCallExpr:
		x.AdjustRet = true
	case *ast.Comma3Expr:
		x.AdjustRet = true
	}
}

// returnedFunction returns the prototype of the function a chunk does nothing but return
// (`return function(...) ... end`, compiled to CLOSURE 0 0; RETURN 0 2) when that function has
// no upvalues, else nil. Running such a chunk only makes a closure whose environment is the
// run's globals, which the caller can do without a protected call.
func returnedFunction(p *lua.FunctionProto) *lua.FunctionProto {
	if len(p.Code) != 3 || len(p.FunctionPrototypes) != 1 {
		return nil
	}
	c0, c1 := p.Code[0], p.Code[1]
	if int(c0>>26) != lua.OP_CLOSURE || (c0>>18)&0xff != 0 || c0&0x3ffff != 0 {
		return nil
	}
	if int(c1>>26) != lua.OP_RETURN || (c1>>18)&0xff != 0 || c1&0x1ff != 2 {
		return nil
	}
	if f := p.FunctionPrototypes[0]; f.NumUpvalues == 0 {
		return f
	}
	return nil
}
