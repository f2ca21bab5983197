package rules

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/expr-lang/expr"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// An expression that would allocate without bound fails with a memory
// budget error (in the trace, the rule not matching or skipped) after
// allocating little, rather than taking the process down. The sizes here
// are kept to a few hundred MB, so that without a budget the test fails
// rather than exhausting the machine.
func TestBudget_unboundedExpressions(t *testing.T) {
	const maxAlloc = 64 << 20
	conditions := []string{
		// expr's own budget: ranges, arrays, maps.
		"len(1..100000000) > 0",
		"len(map(1..5000, map(1..5000, #))) > 0",
		"len(reduce(1..50, concat(#acc, #acc), [1])) > 0",
		// Strings: doubled in a reduce, by variables, by nesting.
		`len(reduce(1..26, #acc + #acc, "x")) > 0`,
		`let a = "xxxxxxxxxxxxxxxx"; let b = a+a; let c = b+b; let d = c+c; let e = d+d; let f = e+e; let g = f+f; let h = g+g; let i = h+h; let j = i+i; let k = j+j; let l = k+k; let m = l+l; let n = m+m; let o = n+n; let p = o+o; let q = p+p; let r = q+q; let s = r+r; let u = s+s; let v = u+u; let w = v+v; let x = w+w; len(x) > 0`,
		`len(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(map(["x"], #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#), #+#)[0]) > 0`,
		`len(reduce(1..27, replace(#acc, "x", "xx"), "x")) > 0`,
		`let a = "xxxxxxxxxxxxxxxx"; let b = replace(a, "x", a); let c = replace(b, "x", b); let d = replace(c, "x", a); let e = replace(d, "x", a); len(e) > 0`,
		`len(reduce(1..60, toBase64(#acc), "x")) > 0`,
		`len(reduce(1..24, toJSON(#acc), "\"")) > 0`,
		`len(reduce(1..26, join([#acc, #acc], ""), "x")) > 0`,
		`len(reduce(1..25, string([#acc, #acc]), "x")) > 0`,
		`len(reduce(1..24, upper(#acc) + lower(#acc), "x")) > 0`,
		// Values shared many times over, then flattened or serialised.
		`let a = map(1..100, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); let b = map(1..100, a); let c = map(1..50, b); len(toJSON(c)) > 0`,
		`let a = map(1..100, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); let b = map(1..100, a); let c = map(1..50, b); len(string(c)) > 0`,
		`let r = 1..100; let a = map(1..100, r); let b = map(1..100, a); let c = map(1..3, b); len(flatten(c)) > 0`,
		`let a = map(1..100, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); let b = map(1..100, join(a, "")); len(join(map(1..100, join(b, "")), "")) > 0`,
		`let a = join(map(1..2000, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), ""); let b = split(a, ""); let c = [b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b]; len(flatten(c)) > 0`,
		`let a = join(map(1..2000, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), ""); len([split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, ""), split(a, "")]) > 0`,
	}
	for _, cond := range conditions {
		t.Run(cond[:min(len(cond), 60)], func(t *testing.T) {
			set, err := Load([]Source{src("b.toml", rule("b", "on_x", "", cond, notify("x")))}, nil)
			if err != nil {
				if !strings.Contains(err.Error(), "memory budget") {
					t.Fatalf("refused at load, but not for its memory: %v", err)
				}
				return
			}
			var out *Outcome
			n := allocated(func() {
				out = fire(set, &recHost{}, "on_x", map[string]any{}, true)
			})
			if len(out.Fired) != 0 || len(out.Trace) != 1 || !strings.Contains(out.Trace[0].Error, "memory budget exceeded") {
				t.Errorf("fired %d rules, trace %.300v; want a memory budget error", len(out.Fired), out.Trace)
			}
			if n > maxAlloc {
				t.Errorf("allocated %d MB", n>>20)
			}
		})
	}
}

// Templates have the same budget: a rule whose template builds too much is
// skipped, and so is one whose value would be enormous once serialised.
func TestBudget_templates(t *testing.T) {
	const maxAlloc = 64 << 20
	big := strings.Repeat("x", 1<<20) // 200 times over: 200 MB of message
	for _, tmpl := range []string{
		`{{ reduce(1..26, #acc + #acc, "x") }}`,
		`{{ let a = map(1..100, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); let b = map(1..100, a); map(1..50, b) }}`,
		`{{ let a = map(1..100, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); let b = map(1..100, a); map(1..50, b) | json }}`,
		strings.Repeat(`{{ context.big }}`, 200),
		strings.Repeat(`{{ join(map(1..4000, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), "") }}`, 100),
	} {
		for _, action := range []string{notify(tmpl), "type = \"set_state\"\nkey = \"k\"\nvalue = '" + tmpl + "'"} {
			set := mustLoad(t, nil, rule("b", "on_x", "", "", action))
			var out *Outcome
			h := &recHost{}
			n := allocated(func() {
				out = fire(set, h, "on_x", map[string]any{"big": big}, true)
			})
			if len(out.Fired) != 0 || len(out.Trace) != 1 || !strings.Contains(out.Trace[0].Skipped, "memory budget exceeded") || len(h.applied) != 0 {
				t.Errorf("%.60s: fired %d rules, trace %.300v; want skipped for the memory budget", tmpl, len(out.Fired), out.Trace)
			}
			if n > maxAlloc {
				t.Errorf("%.60s: allocated %d MB", tmpl, n>>20)
			}
		}
	}
}

// The budget leaves ordinary work alone, including strings from the
// context much larger than any a rule builds.
func TestBudget_ordinaryWork(t *testing.T) {
	big := strings.Repeat("ab", 50_000)
	set := mustLoad(t, nil,
		rule("a", "on_x", "priority = 3", `len(upper(context.big) + lower(context.big)) == 200000 && len(split(context.big, "a")) == 50001`, notify("{{ len(replace(context.big, 'a', 'xy')) }}")),
		rule("b", "on_x", "priority = 2", `len(toJSON(map(1..1000, context.s))) > 0 && len(join(map(1..1000, context.s), ",")) == 3999`, notify("{{ context.s + '!' | upper }}")),
		rule("c", "on_x", "priority = 1", `reduce(1..9, #acc + #acc, "x") == "`+strings.Repeat("x", 512)+`"`, notify("{{ len(flatten(map(1..100, 1..10))) }}")),
	)
	out := fire(set, &recHost{}, "on_x", map[string]any{"big": big, "s": "abc"}, true)
	if got := messages(out); !equal(got, []string{"150000", "ABC!", "1000"}) {
		t.Errorf("notices %q; trace %+v", got, out.Trace)
	}
}

// The bounded forms of + and of the built-ins give expr's results.
func TestBudget_sameResultsAsExpr(t *testing.T) {
	env := map[string]any{
		"context":    map[string]any{"s": "ab", "n": 2.0, "i": 3, "list": []any{1.0, []any{2.0, "x"}}, "m": map[string]any{"k": "v"}},
		"thresholds": map[string]any{},
	}
	exprs := []string{
		`"a" + "b"`, `1 + 2`, `1.5 + 1`, `context.s + "x"`, `"x" + context.s`, `context.s + context.s`, `context.n + 1`,
		`context.n + context.i`, `context.i + context.i`, `context.s + context.n`, `context.list + context.list`,
		`reduce(1..4, #acc + #, 0)`, `reduce(1..4, #acc + "x", "")`, `reduce(["a", "b"], #acc + #, "")`,
		`(context.s + "c") + ("d" + context.s)`, `"a" + string(1)`, `upper(context.s + "c")`,
		`replace("aXbX", "X", "-")`, `replace("aaa", "a", "b", 2)`, `replace(context.s, "", "-")`, `replace(context.s, 1, 2)`,
		`join(["a", "b"], ",")`, `join(["a", "b"])`, `join(context.list, ",")`, `join([])`,
		`split("a,b", ",")`, `split("a,b,c", ",", 2)`, `split("abc", "")`, `splitAfter("a,b", ",")`, `splitAfter("a,b,c", ",", 2)`,
		`flatten([1, [2, [3, "x"]]])`, `flatten(context.list)`, `flatten([])`, `flatten(1)`,
		`toJSON({"a": [1, 2], "b": "x"})`, `toJSON(context.m)`, `toJSON(context.s)`, `fromJSON("[1, 2]")`, `fromJSON(toJSON(context.list))`, `fromJSON("{")`,
		`string(12)`, `string([1, 2])`, `string(context.m)`, `string(nil)`, `toBase64("hi")`, `fromBase64(toBase64(context.s))`,
		`upper("aß")`, `lower("ABC")`, `context.s | upper()`, `upper(1)`,
	}
	c := newCompiler()
	for _, e := range exprs {
		want, wantErr := expr.Eval(e, env)
		p, err := c.compile(e, false)
		if err != nil {
			// Rejected at compile: expr must reject it too.
			if _, cerr := expr.Compile(e, expr.Env(env)); cerr == nil {
				t.Errorf("%s: compile error %v, expr compiles it", e, err)
			}
			continue
		}
		r := runners.Get().(*runner)
		r.env = exprEnv{Context: env["context"].(map[string]any), Thresholds: env["thresholds"].(map[string]any)}
		got, gotErr := r.fresh().run(p)
		r.env = exprEnv{}
		runners.Put(r)
		if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, %v; expr gives %#v, %v", e, got, gotErr, want, wantErr)
		}
	}
}

// Type errors in calls of the bounded built-ins are still found at load.
func TestBudget_loadTimeChecks(t *testing.T) {
	for _, cond := range []string{`replace(1) == ""`, `upper("a", "b") == ""`, `"a" + 1 == "a1"`, `join(1) == ""`, `len(split()) > 0`, `toJSON() == ""`} {
		msg := loadErr(t, src("c.toml", rule("c", "on_x", "", cond, notify("x"))))
		if !strings.Contains(msg, "c.toml:6: rule \"c\": condition: ") {
			t.Errorf("%s: %q", cond, msg)
		}
	}
}

// The budget is per evaluation: a runner reused from the pool starts afresh.
func TestBudget_perEvaluation(t *testing.T) {
	set := mustLoad(t, nil, rule("a", "on_x", "", `len(reduce(1..20, #acc + #acc, "x")) > 0`, notify(`{{ len(reduce(1..20, #acc + #acc, "x")) }}`)))
	for i := 0; i < 20; i++ {
		out := fire(set, &recHost{}, "on_x", nil, true)
		if got := messages(out); !equal(got, []string{"1048576"}) {
			t.Fatalf("run %d: %q %+v", i, got, out.Trace)
		}
	}
	_ = context.Background
}

// Predicates nested over the same data run no more than maxSteps steps (or
// stop sooner on the memory budget, when they build ranges as they go):
// without the budget, all(a, all(a, all(a, true))) on 5,000 elements runs
// for about half an hour without allocating (and the test times out).
// Their error says which budget stopped them; no clock is read, as the
// machine may be slow.
func TestIterationBudget(t *testing.T) {
	for _, cond := range []string{
		"let a = 1..5000; all(a, all(a, all(a, true)))",
		"all([1,2,3,4,5,6,7,8,9,10], all(1..9000, all(1..9000, # > 0)))",
		"any(context.items, any(context.items, any(context.items, # == -1)))",
		"count(1..5000, count(1..5000, true) > 0) > 0",
	} {
		set, err := Load([]Source{{Name: "s.toml", Text: []byte("[rule]\nid = \"s\"\ntrigger = \"e\"\n[condition]\nexpression = '" + cond + "'\n[action]\ntype = \"log\"\nmessage = \"m\"\n")}}, nil)
		if err != nil {
			t.Fatalf("%s: %v", cond, err)
		}
		items := make([]any, 3000)
		for i := range items {
			items[i] = float64(i)
		}
		out := set.Fire(context.Background(), Event{Name: "e", Context: MapSource{"items": items}, Trace: true}, benchHost{})
		if len(out.Fired) != 0 || !strings.Contains(out.Trace[0].Error, "budget exceeded") {
			t.Errorf("%s: want a budget error, got %+v", cond, out.Trace[0])
		}
	}
	// Ordinary predicates are unaffected.
	set, err := Load([]Source{{Name: "ok.toml", Text: []byte("[rule]\nid = \"ok\"\ntrigger = \"e\"\n[condition]\nexpression = 'all(context.items, # >= 0) and count(context.items, # > 10) == 2 and map(context.items, # * 2)[2] == 4'\n[action]\ntype = \"log\"\nmessage = \"m\"\n")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := set.Fire(context.Background(), Event{Name: "e", Context: MapSource{"items": []any{1.0, 5.0, 2.0, 11.0, 12.0}}, Trace: true}, benchHost{})
	if len(out.Fired) != 1 {
		t.Errorf("ordinary predicates: %+v", out.Trace)
	}
}

// TestSizeOf_scalars: a scalar counts as walk counts it (16 for the
// element, 8 for a number, bool or null, its bytes for a string), whether
// or not the limit lets it be counted whole.
func TestSizeOf_scalars(t *testing.T) {
	for _, c := range []struct {
		v     any
		limit int64
		want  int64
	}{{"abc", 1000, 19}, {"", 1000, 16}, {1.5, 1000, 24}, {nil, 1000, 24}, {true, 1000, 24}, {int64(3), 1000, 24},
		{"abc", 10, 16}, {1.5, 10, 16}, {"abc", 16, 19}, {[]any{"abc"}, 1000, 16 + 17 + 3}} {
		if got := sizeOf(c.v, c.limit); got != c.want {
			t.Errorf("sizeOf(%#v, %d) = %d, want %d", c.v, c.limit, got, c.want)
		}
	}
}
