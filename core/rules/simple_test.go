package rules

import (
	"context"
	"fmt"
	"reflect"
	"testing"
)

func TestParseSimple(t *testing.T) {
	ctxOp := func(path ...string) operand { return operand{root: "context", path: path} }
	thOp := func(path ...string) operand { return operand{root: "thresholds", path: path} }
	lit := func(v Value) operand { return operand{literal: true, value: v} }
	one := func(op string, l, r operand) *simpleCond { return &simpleCond{terms: []comparison{{op, l, r}}} }
	tests := []struct {
		src  string
		want *simpleCond
	}{
		{"context.tool.result_bytes > thresholds.large_result_bytes", one(">", ctxOp("tool", "result_bytes"), thOp("large_result_bytes"))},
		{"  context.n>=1  ", one(">=", ctxOp("n"), lit(Number(1)))},
		{"context.n<=-2.5", one("<=", ctxOp("n"), lit(Number(-2.5)))},
		{"context.n == 1e3", one("==", ctxOp("n"), lit(Number(1000)))},
		{"1 < context.n", one("<", lit(Number(1)), ctxOp("n"))},
		{"context.s != 'a'", one("!=", ctxOp("s"), lit(String("a")))},
		{`context.s == "a'b"`, one("==", ctxOp("s"), lit(String("a'b")))},
		{`context.s == ""`, one("==", ctxOp("s"), lit(String("")))},
		{"context.b == true", one("==", ctxOp("b"), lit(Bool(true)))},
		{"context.b != false", one("!=", ctxOp("b"), lit(Bool(false)))},
		{"context.a == context.b", one("==", ctxOp("a"), ctxOp("b"))},
		{"thresholds.x < context.a_1.B2", one("<", thOp("x"), ctxOp("a_1", "B2"))},
		{"context.n > 1 && context.m > 1", &simpleCond{terms: []comparison{{">", ctxOp("n"), lit(Number(1))}, {">", ctxOp("m"), lit(Number(1))}}}},
		{"context.n > 1 and context.s == 'x' and context.b != true", &simpleCond{terms: []comparison{
			{">", ctxOp("n"), lit(Number(1))}, {"==", ctxOp("s"), lit(String("x"))}, {"!=", ctxOp("b"), lit(Bool(true))}}}},
		{"context.n > 1 or context.m > 1", &simpleCond{or: true, terms: []comparison{{">", ctxOp("n"), lit(Number(1))}, {">", ctxOp("m"), lit(Number(1))}}}},
		{"context.n > 1 || context.m > 1", &simpleCond{or: true, terms: []comparison{{">", ctxOp("n"), lit(Number(1))}, {">", ctxOp("m"), lit(Number(1))}}}},
		// Not simple: expr decides.
		{"1 == 1", nil},
		{"'a' == 'a'", nil},
		{"context == 1", nil},
		{"thresholds > 1", nil},
		{"context.n > 1 and context.m > 1 or context.k > 1", nil},
		{"context.n > 1 and len(context.s) > 1", nil},
		{"context.n > 1 &&context.m > 1", nil},
		{"context.s == 'a and b'", nil},
		{"context.s == 'a b'", nil},
		{`context.s == "a\"b"`, nil},
		{`context.s == 'a\n'`, nil},
		{"context.n > 0x10", nil},
		{"context.n > 1_000", nil},
		{"context.n > nil", nil},
		{"context.n > other.x", nil},
		{"context.list[0] == 1", nil},
		{"context?.n == 1", nil},
		{"context.n.0 == 1", nil},
		{"-context.n > 1", nil},
		{"not context.n > 1", nil},
		{"context.n + 1 > 1", nil},
		{"context.n > 1 > 0", nil},
		{"context.n>1>0", nil},
		{"context.n in [1]", nil},
		{"context.n", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := parseSimple(tc.src); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseSimple(%q) = %+v, want %+v", tc.src, got, tc.want)
		}
	}
}

// exprOnly returns a copy of set bound to thresholds in which no rule has
// a fast form, so that every condition goes through expr.
func exprOnly(set *Set, thresholds map[string]any) *Set {
	var rules []*Rule
	for _, r := range set.Rules() {
		c := *r
		c.simple, c.folded, c.guards, c.foldedGuards = nil, nil, nil, nil
		rules = append(rules, &c)
	}
	return bindSet(rules, thresholds)
}

// The fast path (simple conditions, thresholds folded in, guards) must
// decide exactly as expr would, or leave it to expr: in a set loaded with
// the thresholds and in one re-bound to them.
func TestSimple_agreesWithExpr(t *testing.T) {
	simpleConds := []string{
		"context.n > 1", "context.n >= 1", "context.n < 1", "context.n <= 1", "context.n == 1", "context.n != 1",
		"1 < context.n", "2.5 >= context.n", "context.n == -1", "context.n == 1e3", "context.n == 010", "context.n == 1.",
		"context.n==2", "context.n>=0.5", "context.n == 9007199254740993", "context.n == context.m", "context.n < context.m",
		"context.s == 'abc'", `context.s != "abc"`, "context.s > 'abb'", "context.s < 'b'", "context.s <= ''", "'x' == context.s",
		"context.s == context.t", "context.s >= context.t",
		"context.b == true", "context.b != false", "context.b == context.c", "context.b != context.c", "context.b < context.c",
		"context.n > thresholds.t", "thresholds.t <= context.n", "context.n == thresholds.t", "thresholds.t != context.s",
		"context.a.b.c == 2", "context.a.b.c > context.n",
		"context.missing == 1", "context.missing != 1", "context.missing > 1", "context.missing == context.other",
		"thresholds.missing < 1", "thresholds.missing == 'x'",
		"context.n == '1'", "context.s == 1", "context.s > 1", "context.b == 1", "context.n != true",
		"context.list == 1", "context.obj == 'x'", "context.obj != 'x'", "context.n.x == 1", "context.nil == 1", "context.nil != 1",
		"context.n > 1 and context.s == 'abc'", "context.n > 1 && context.m < 3", "context.n > 1 or context.s == 'x'",
		"context.missing > 1 or context.n > 1", "context.n > 1 or context.missing > 1", "context.n > 1 and context.missing > 1",
		"context.missing > 1 and context.n > 1", "context.s == 'abc' || context.b == true", "context.n >= thresholds.t and context.n <= 1000",
		"context.s > 1 or context.n > 0", "context.n > 0 or context.s > 1", "context.n > 5 and context.s > 1", "context.n.x > 1 and context.n > 1",
	}
	otherConds := []string{
		"context.n > 1 and len(context.s) > 2", "len(context.s) > 2 and context.n > 1", "context.s == 'abc' and context.b",
		"context.n > 1 and context.m > 1 or context.b", "context.n > thresholds.t and context.s != nil", "context.n.x > 1 and len(context.s) > 1",
		"(context.n ?? 0) > 1 and context.s == 'abc'", "context.s + 'x' == 'abcx' and context.n == 1",
	}
	conds := append(append([]string{}, simpleConds...), otherConds...)
	contexts := []map[string]any{
		{"n": 1.0, "m": 2.0, "s": "abc", "t": "abd", "b": true, "c": false, "a": map[string]any{"b": map[string]any{"c": 2.0}}},
		{"n": 2.0, "m": 2.0, "s": "abd", "t": "abd", "b": false, "c": false, "a": map[string]any{"b": map[string]any{"c": 1.0}}},
		{"n": 0.5, "m": -1.0, "s": "", "t": "", "b": true, "c": true},
		{"n": -1.0, "s": "b", "a": map[string]any{"b": "not a map"}},
		{"n": 1000.0, "s": "x", "t": "X"},
		{"n": 10.0, "s": "1", "list": []any{1.0}, "obj": map[string]any{"x": 1.0}, "nil": nil},
		{"n": 1, "m": int64(2), "s": "abc"},                // Go ints, as a caller may build
		{"n": 9007199254740993.0, "m": 9007199254740992.0}, // beyond float64's integers
		{"n": "1", "s": 1.0, "b": 1.0},                     // types swapped
		{},
	}
	thresholds := []map[string]any{{"t": 1.5}, {"t": "abc"}, {"t": 2}, {}}
	var sources []string
	for i, c := range conds {
		sources = append(sources, rule(fmt.Sprintf("r%d", i), "on_x", fmt.Sprintf("priority = %d", -i), c, notify("x")))
	}
	var files []Source
	for i, s := range sources {
		files = append(files, src(fmt.Sprintf("r%d.toml", i), s))
	}
	plain, err := Load(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range plain.Rules() {
		if (r.simple != nil) != (i < len(simpleConds)) {
			t.Errorf("%q: fast form %v", r.CondSource, r.simple)
		}
	}
	decided := 0
	for _, th := range thresholds {
		slow := exprOnly(plain, th)
		loaded, err := Load(files, th)
		if err != nil {
			t.Fatal(err)
		}
		rebound := plain.withThresholds(th)
		for _, c := range contexts {
			h := &recHost{}
			ref := slow.Fire(context.Background(), Event{Name: "on_x", Context: MapSource(c), Trace: true}, h)
			if len(ref.Trace) != len(conds) {
				t.Fatalf("expr trace of %d entries", len(ref.Trace))
			}
			var want []string
			for _, e := range ref.Trace {
				if e.Matched {
					want = append(want, e.Rule)
				}
			}
			for name, set := range map[string]*Set{"loaded": loaded, "rebound": rebound} {
				traced := set.Fire(context.Background(), Event{Name: "on_x", Context: MapSource(c), Trace: true}, h)
				for i, f := range traced.Trace {
					r := ref.Trace[i]
					if f.Rule != r.Rule || f.Matched != r.Matched || !reflect.DeepEqual(f.Value, r.Value) || f.Error != r.Error {
						t.Errorf("%s: %q with %v, thresholds %v:\n fast %+v\n expr %+v", name, conds[i], c, th, f, r)
					}
				}
				quiet := set.Fire(context.Background(), Event{Name: "on_x", Context: MapSource(c)}, h)
				if got := firedIDs(quiet); !equal(got, append([]string{}, want...)) {
					t.Errorf("%s: with %v, thresholds %v, without trace: fired %q, expr matches %q", name, c, th, got, want)
				}
			}
			// The fast form alone, where it decides, gives expr's value.
			resolve := func(o *operand) (Value, bool) {
				if o.literal {
					return o.value, true
				}
				if o.root == "thresholds" {
					v, ok := walk(th, o.path)
					return valueOf(v), ok
				}
				return MapSource(c).Lookup(o.path)
			}
			for i, rl := range plain.Rules()[:len(simpleConds)] {
				got, ok := rl.simple.eval(resolve)
				if !ok {
					continue
				}
				decided++
				if want := ref.Trace[i]; want.Error != "" || want.Value != got {
					t.Errorf("%q with %v: fast form %v, expr %+v", conds[i], c, got, want)
				}
			}
		}
	}
	if decided < 300 {
		t.Errorf("the fast form decided only %d cases", decided)
	}
}

// countingSource is a ContextSource that counts how often the whole context
// is built.
type countingSource struct {
	m     MapSource
	built int
	tell  bool // false: Lookup cannot tell
}

func (c *countingSource) Lookup(path []string) (Value, bool) {
	if !c.tell {
		return Value{}, false
	}
	return c.m.Lookup(path)
}

func (c *countingSource) Context() map[string]any { c.built++; return c.m }

func TestSimple_contextNotBuilt(t *testing.T) {
	set := mustLoad(t, map[string]any{"limit": 10.0},
		rule("a", "on_x", "", "context.n > thresholds.limit", notify("a")),
		rule("b", "on_x", "", "context.s == 'x'", notify("b")),
	)
	cs := &countingSource{m: MapSource{"n": 5.0, "s": "y"}, tell: true}
	out := set.Fire(context.Background(), Event{Name: "on_x", Context: cs}, &recHost{})
	if cs.built != 0 || len(out.Fired) != 0 {
		t.Errorf("non-matching simple conditions built the context %d times, fired %v", cs.built, out.Fired)
	}
	// A source that cannot tell: the context is built once for the emission.
	cs = &countingSource{m: MapSource{"n": 50.0, "s": "x"}}
	out = set.Fire(context.Background(), Event{Name: "on_x", Context: cs}, &recHost{})
	if cs.built != 1 || !equal(firedIDs(out), []string{"a", "b"}) {
		t.Errorf("built %d times, fired %q", cs.built, firedIDs(out))
	}
	// Mixed types fall back to expr, which builds the context once.
	cs = &countingSource{m: MapSource{"n": "50", "s": "x"}, tell: true}
	out = set.Fire(context.Background(), Event{Name: "on_x", Context: cs}, &recHost{})
	if cs.built != 1 || !equal(firedIDs(out), []string{"b"}) {
		t.Errorf("built %d times, fired %q", cs.built, firedIDs(out))
	}
}

func TestValueOfAndLookup(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want Value
	}{
		{1.5, Number(1.5)}, {3, Number(3)}, {int64(4), Number(4)}, {"s", String("s")}, {true, Bool(true)},
		{nil, Value{}}, {[]any{1.0}, Value{}}, {map[string]any{}, Value{}}, {float32(1), Value{}},
	} {
		if got := valueOf(tc.v); got != tc.want {
			t.Errorf("valueOf(%#v) = %+v, want %+v", tc.v, got, tc.want)
		}
	}
	m := MapSource{"a": map[string]any{"b": 2.0, "list": []any{1.0}}, "nil": nil}
	for _, tc := range []struct {
		path []string
		want Value
		ok   bool
	}{
		{[]string{"a", "b"}, Number(2), true},
		{[]string{"a", "list"}, Value{}, true},
		{[]string{"nil"}, Value{}, true},
		{[]string{"a", "missing"}, Value{}, false},
		{[]string{"a", "b", "c"}, Value{}, false},
		{[]string{"missing", "x"}, Value{}, false},
	} {
		if got, ok := m.Lookup(tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%v) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
	if !reflect.DeepEqual(m.Context(), map[string]any(m)) {
		t.Error("Context")
	}
}
