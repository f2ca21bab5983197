package rulelua

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// The direct paths are on with the gopher-lua of go.mod: a version whose LTable or interface
// layout differs would silently take the slow paths, so this says so instead.
func TestTableLayout_known(t *testing.T) {
	if !tableLayoutOK {
		t.Fatal("lua.LTable is not laid out as tableLayout: update ltable.go for this gopher-lua")
	}
	if lstringTab == nil {
		t.Fatal("boxing strings in place is off: the interface layout check failed")
	}
}

// entries lists what Next gives, in its order.
func entries(tb *lua.LTable) []string {
	var out []string
	k, v := tb.Next(lua.LNil)
	for k != lua.LNil {
		out = append(out, fmt.Sprintf("%s=%s", k, v))
		k, v = tb.Next(k)
	}
	return out
}

// A table made by newObjectTable is the one RawSetString makes from the same keys and values,
// for Next (its order included), for lookups and for what is done to it afterwards.
func TestNewObjectTable_sameAsRawSetString(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var boxes valueBoxes
	made := 0
	for i := 0; i < 500; i++ {
		n := 1 + r.Intn(12)
		keys := make([]string, n)
		vals := make([]lua.LValue, n)
		for j := range keys {
			keys[j] = string(rune('a' + r.Intn(14)))
			switch r.Intn(4) {
			case 0:
				vals[j] = boxes.box(strings.Repeat("v", r.Intn(3)))
			case 1:
				vals[j] = lua.LNumber(r.Intn(100))
			case 2:
				vals[j] = lua.LTrue
			default:
				if r.Intn(5) == 0 {
					vals[j] = lua.LNil
				} else {
					vals[j] = lua.LFalse
				}
			}
		}
		want := lua.LTable{Metatable: lua.LNil}
		for j := range keys {
			want.RawSetString(keys[j], vals[j])
		}
		got := newObjectTable(keys, vals, &boxes, nil)
		if got == nil {
			dup := map[string]bool{}
			for j, k := range keys {
				if vals[j] == lua.LNil || dup[k] {
					goto slow // a repeated key or a nil value: the caller sets them one by one
				}
				dup[k] = true
			}
			t.Fatalf("%v %v: no table", keys, vals)
		slow:
			continue
		}
		made++
		if got.Metatable != lua.LNil {
			t.Fatalf("metatable %v", got.Metatable)
		}
		same := func(when string) {
			t.Helper()
			if g, w := entries(got), entries(&want); !reflect.DeepEqual(g, w) {
				t.Fatalf("%s: %v %v:\n got  %v\n want %v", when, keys, vals, g, w)
			}
			for c := 'a'; c <= 'q'; c++ {
				k := string(c)
				if g, w := got.RawGetString(k), want.RawGetString(k); g != w {
					t.Fatalf("%s: [%s] = %v, want %v", when, k, g, w)
				}
				if g, w := got.RawGet(lua.LString(k)), want.RawGet(lua.LString(k)); g != w {
					t.Fatalf("%s: RawGet(%s) = %v, want %v", when, k, g, w)
				}
			}
		}
		same("made")
		// Deletions, new keys, a key set again, a number key: both tables alike.
		for _, tb := range []*lua.LTable{got, &want} {
			tb.RawSetString(keys[0], lua.LNil)
			tb.RawSetString("p", lua.LNumber(1))
			tb.RawSetString(keys[n-1], lua.LString("again"))
			tb.RawSetString("q", lua.LNumber(2))
			tb.RawSetString("p", lua.LNil)
			tb.RawSetH(lua.LNumber(1.5), lua.LTrue)
		}
		same("changed")
	}
	if made < 100 {
		t.Errorf("only %d of 500 tables made directly", made)
	}
}

// Strings boxed in place are strings like any other: equal, usable as keys of tables made
// either way, each its own value.
func TestValueBoxes(t *testing.T) {
	var b valueBoxes
	var vals []lua.LValue
	for i := 0; i < 200; i++ {
		vals = append(vals, b.box(fmt.Sprint("s", i)))
	}
	tb := lua.LTable{Metatable: lua.LNil}
	for i, v := range vals {
		if v != lua.LValue(lua.LString(fmt.Sprint("s", i))) || v.String() != fmt.Sprint("s", i) || v.Type() != lua.LTString {
			t.Fatalf("%d: %v", i, v)
		}
		tb.RawSet(v, lua.LNumber(i))
	}
	for i := range vals {
		if got := tb.RawGetString(fmt.Sprint("s", i)); got != lua.LNumber(i) {
			t.Fatalf("s%d: %v", i, got)
		}
	}
}

// A tool's arguments behave as any table: pairs sees each key once, keys can be removed, added
// and set again, next resumes from a key given as a literal, and the value comes back encoded.
func TestCallJSON_argumentsAreOrdinaryTables(t *testing.T) {
	s := mustCompile(t, "args", `return function(args)
  local seen = {}
  for k, v in pairs(args) do seen[#seen + 1] = k end
  table.sort(seen)
  args.units = nil
  args.extra = {n = #seen, keys = table.concat(seen, ",")}
  args.city = args.city .. "!"
  local k = next(args, "days")
  args.after_days = k ~= nil
  args.nested.b = nil
  args.nested.c = 3
  return args
end`)
	in := `{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false,"nested":{"a":1,"b":2},"list":["x","y"],"nothing":null}`
	res, err := s.CallJSON(context.Background(), []byte(in), nil)
	want := `{"after_days":true,"city":"Lyon!","country":"FR","days":3,"detailed":false,"extra":{"keys":"city,country,days,detailed,list,nested,units","n":7},"list":["x","y"],"nested":{"a":1,"c":3}}`
	if err != nil || string(res.JSON) != want {
		t.Fatalf("got %s, %v\nwant %s", res.JSON, err, want)
	}
	// A repeated key keeps the last value, as encoding/json does.
	res, err = s.CallJSON(context.Background(), []byte(`{"city":"A","city":"B","nested":{"b":1,"b":null},"units":1}`), nil)
	if err != nil || !strings.Contains(string(res.JSON), `"city":"B!"`) || !strings.Contains(string(res.JSON), `"nested":{"c":3}`) {
		t.Fatalf("got %s, %v", res.JSON, err)
	}
}

// A run's globals table is reused by the next run on the state only when no run wrote to it:
// a table that held keys, even deleted ones, is never seen again.
func TestGlobals_reusedOnlyUntouched(t *testing.T) {
	read := mustCompile(t, "read", `return next(_G) == nil and rawget(_G, "x") == nil`)
	write := mustCompile(t, "write", `x = 1; x = nil; return next(_G) == nil`)
	st := newState()
	defer st.close()
	run := func(s *Script) {
		t.Helper()
		res, err := st.run(context.Background(), s, runInput{}, nil)
		st.endRun()
		if err != nil || res.Value != true {
			t.Fatalf("%s: %v, %v", s.Name(), res.Value, err)
		}
	}
	run(read)
	first := st.spareG
	if first == nil {
		t.Fatal("untouched globals not kept")
	}
	run(read)
	if st.spareG != first {
		t.Fatal("untouched globals not reused")
	}
	run(write) // runs on first, and writes to it
	if st.spareG != nil {
		t.Fatal("globals written to kept for reuse")
	}
	run(read)
	if st.spareG == nil || st.spareG == first {
		t.Fatalf("a run after a write had %p, the written table %p", st.spareG, first)
	}
}

// A tool's argument objects are recycled from run to run on a state, and nothing of a run shows
// in the next: not its keys (set, added or deleted), not a metatable it set.
func TestCallJSON_recycledArguments(t *testing.T) {
	s := mustCompile(t, "recycle", `return function(args)
  local ks = {}
  for k in pairs(args) do ks[#ks + 1] = k end
  table.sort(ks)
  local out = {keys = table.concat(ks, ","), plain = getmetatable(args) == nil and args.zz == nil}
  if args.o then out.o = next(args.o) or "empty"; args.o.added = 1; args.o.p = nil end
  args.added = true
  args.a = nil
  setmetatable(args, {__index = function() return "leak" end})
  return out
end`)
	drainPool()
	for i, c := range []struct{ in, want string }{
		{`{"a":1,"b":2,"o":{"p":1}}`, `{"keys":"a,b,o","o":"p","plain":true}`},
		{`{"x":"y","o":{}}`, `{"keys":"o,x","o":"empty","plain":true}`},
		{`{"b":1,"o":{"q":true}}`, `{"keys":"b,o","o":"q","plain":true}`},
		{`{"b":1,"b":2}`, `{"keys":"b","plain":true}`},
		{`{}`, `{"keys":"","plain":true}`},
		{`{"n":null,"c":1}`, `{"keys":"c","plain":true}`},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}`, `{"keys":"a,b,c,d,e,f,g,h,i","plain":true}`},
		{`{"z":1}`, `{"keys":"z","plain":true}`},
	} {
		res, err := s.CallJSON(context.Background(), []byte(c.in), nil)
		if err != nil || string(res.JSON) != c.want {
			t.Fatalf("run %d %s: got %s, %v; want %s", i, c.in, res.JSON, err, c.want)
		}
	}
	st := getState()
	defer putState(st)
	if len(st.tables.free)+len(st.tables.shaped) == 0 {
		t.Error("no table recycled")
	}
}

// budgetCtx is a context that states its budget, as toolbox's does for a Lua tool.
type budgetCtx struct {
	context.Context
	budget time.Duration
}

func (c budgetCtx) Budget() time.Duration { return c.budget }

// A context that states its budget is taken at its word for the timeout's message (no clock
// read at the start of the run); the deadline is still its own, and a runaway tool still stops.
func TestCallJSON_budgetedContext(t *testing.T) {
	s := mustCompile(t, "loop", `return function() while true do end end`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := s.CallJSON(budgetCtx{ctx, 7 * time.Second}, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "lua: deadline of 7s exceeded" {
		t.Fatalf("got %v", err)
	}
	// A script's own timeout (Limits.Deadline) still reads the clock and wins when earlier.
	own, _ := CompileWithLimits("own", `return function() while true do end end`, Limits{Deadline: 10 * time.Millisecond})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	_, err = own.CallJSON(budgetCtx{ctx2, 5 * time.Second}, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "lua: deadline of 10ms exceeded" {
		t.Fatalf("own deadline: got %v", err)
	}
}

// Tool runs on several goroutines at once, each with its own arguments, see only their own
// (states and their recycled tables are never shared by two runs).
func TestCallJSON_concurrentArguments(t *testing.T) {
	s := mustCompile(t, "echo", `return function(args) args.n = args.n + 1 return args end`)
	// Not about time: eight goroutines on two cores under -race may wait past the 50 ms default.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				in := fmt.Sprintf(`{"g":"g%d","n":%d}`, g, i)
				want := fmt.Sprintf(`{"g":"g%d","n":%d}`, g, i+1)
				res, err := s.CallJSON(ctx, []byte(in), nil)
				if err != nil || string(res.JSON) != want {
					errs <- fmt.Errorf("%s: got %s, %v", in, res.JSON, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// CallJSON's value is the caller's: a later run on the state (which encodes into the same
// buffer) leaves it as it was, small or large.
func TestCallJSON_valueIsTheCallers(t *testing.T) {
	s := mustCompile(t, "rep", `return function(args) return {s = string.rep(args.c, args.n)} end`)
	drainPool()
	var kept [][]byte
	var want []string
	for _, c := range []struct {
		c string
		n int
	}{{"a", 3}, {"b", 5000}, {"c", 4}, {"d", 6000}, {"e", 2}, {"f", 1}} {
		res, err := s.CallJSON(context.Background(), []byte(fmt.Sprintf(`{"c":%q,"n":%d}`, c.c, c.n)), nil)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, res.JSON)
		want = append(want, `{"s":"`+strings.Repeat(c.c, c.n)+`"}`)
	}
	for i := range kept {
		if string(kept[i]) != want[i] {
			t.Errorf("value %d changed: %.40s...", i, kept[i])
		}
	}
}

// Shaped tables (a tool's arguments keep their keys from run to run) are indistinguishable from
// tables built anew: runs on one state, with keys from a few shapes and others drawn at random,
// nulls, and scripts that delete, add and re-set keys, see in pairs() exactly the keys of their
// own arguments, in the order of the JSON text, with their own values.
func TestCallJSON_shapedArgumentsAreFresh(t *testing.T) {
	s := mustCompile(t, "shaped", `return function(args)
  local function list(o)
    local out = {}
    for k, v in pairs(o) do
      if type(v) == "table" then v = "{" .. list(v) .. "}" end
      out[#out + 1] = k .. "=" .. tostring(v)
    end
    return table.concat(out, ",")
  end
  local seen = list(args)
  if args.del then args[args.del] = nil end
  if args.add then args[args.add] = 1 end
  if args.o then args.o.p = nil; args.o.x = 2 end
  setmetatable(args, {})
  return seen
end`)
	drainPool()
	shapes := [][]string{{"a", "b", "c"}, {"b", "a", "c"}, {"city", "country", "days", "units", "detailed"}, {"a", "o"}, {"del", "a", "b"}, {"add", "a"}}
	r := rand.New(rand.NewSource(11))
	for i := 0; i < 3000; i++ {
		var keys []string
		if r.Intn(4) == 0 {
			for j := r.Intn(6); j >= 0; j-- {
				k := string(rune('a' + r.Intn(8)))
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		} else {
			keys = shapes[r.Intn(len(shapes))]
		}
		var in, want strings.Builder
		in.WriteByte('{')
		for j, k := range keys {
			if j > 0 {
				in.WriteByte(',')
			}
			var v, shown string
			switch {
			case k == "del" || k == "add":
				v = `"` + keys[len(keys)-1] + `"`
				shown = keys[len(keys)-1]
				if k == "add" {
					v, shown = `"zz"`, "zz"
				}
			case k == "o":
				v, shown = `{"p":1,"q":true}`, "{p=1,q=true}"
			case r.Intn(6) == 0:
				v = "null"
			default:
				n := r.Intn(100)
				v, shown = strconv.Itoa(n), strconv.Itoa(n)
			}
			fmt.Fprintf(&in, "%q:%s", k, v)
			if v != "null" {
				if want.Len() > 0 {
					want.WriteByte(',')
				}
				want.WriteString(k + "=" + shown)
			}
		}
		in.WriteByte('}')
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a broken Next loops
		res, err := s.CallJSON(ctx, []byte(in.String()), nil)
		cancel()
		if err != nil || res.Value != want.String() {
			t.Fatalf("run %d %s: got %v, %v; want %s", i, in.String(), res.Value, err, want.String())
		}
	}
	st := getState()
	defer putState(st)
	p := &st.tables
	if len(p.shaped) == 0 || p.hits == 0 {
		t.Fatalf("no shaped table used: %d kept, %d hits", len(p.shaped), p.hits)
	}
	// Random keys are shaped only within the budget, and a shaped table holds no value of a run
	// and no byte of its arguments' text.
	if p.conversions > shapeStart+p.hits/shapeHitsPerConversion {
		t.Errorf("%d conversions for %d hits", p.conversions, p.hits)
	}
	for _, sh := range p.shaped {
		if l := layoutOf(sh.t); len(l.strdict) != 0 || sh.t.Metatable != lua.LNil {
			t.Errorf("a shaped table keeps %v, metatable %v", l.strdict, sh.t.Metatable)
		}
	}
}

// A shaped table the script returns is written with its keys sorted, as any table is, whatever
// the script did to it first: values replaced, keys deleted, deleted and set again, keys added
// (a string, an index, a key of another type), nested objects changed. CallJSON (which writes a
// shaped table from its known sorted keys) must give the text of Call on the same arguments
// (encoding/json's decoding, no shaped tables) through EncodeJSON.
func TestCallJSON_shapedTablesEncodeAsAnyTable(t *testing.T) {
	s := mustCompile(t, "reshape", `return function(args)
  local op = args.op
  if op == "set" then args.m = "changed"
  elseif op == "del" then args.m = nil
  elseif op == "delall" then for k in pairs(args) do args[k] = nil end
  elseif op == "readd" then args.m = nil; args.m = {1, 2}
  elseif op == "add" then args.aaa = true
  elseif op == "index" then args[1] = "first"
  elseif op == "float" then args[2.5] = "x"
  elseif op == "nested" then args.o.q = nil; args.o.r = "new"
  end
  return args
end`)
	drainPool()
	ops := []string{"none", "set", "del", "delall", "readd", "add", "index", "float", "nested"}
	r := rand.New(rand.NewSource(5))
	for i := 0; i < 2000; i++ {
		op := ops[r.Intn(len(ops))]
		m := r.Intn(100)
		in := fmt.Sprintf(`{"z":%d,"op":%q,"m":"v%d","o":{"q":1,"p":[true]},"b":null}`, m, op, m)
		if r.Intn(2) == 0 {
			in = fmt.Sprintf(`{"op":%q,"o":{"q":1,"p":[true]},"m":"v%d"}`, op, m)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(in), &args); err != nil {
			t.Fatal(err)
		}
		want, werr := s.Call(context.Background(), args, nil)
		got, gerr := s.CallJSON(context.Background(), []byte(in), nil)
		if werr != nil || gerr != nil {
			t.Fatalf("%s: Call %v, CallJSON %v", in, werr, gerr)
		}
		text, err := EncodeJSON(want.Value)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.JSON) != string(text) {
			t.Fatalf("run %d %s:\n CallJSON %s\n Call     %s", i, in, got.JSON, text)
		}
	}
	st := getState()
	defer putState(st)
	if st.tables.hits == 0 {
		t.Fatal("no shaped table used")
	}
}

// Objects whose keys change from call to call (a map of names) are not given keys of their own
// on every run: once the budget is spent, they take the ordinary way.
func TestCallJSON_shapesBudgeted(t *testing.T) {
	s := mustCompile(t, "names", `return function(args) return args end`)
	drainPool()
	for i := 0; i < 500; i++ {
		in := fmt.Sprintf(`{"user%d":1,"user%d":2}`, i, i+1000)
		if _, err := s.CallJSON(context.Background(), []byte(in), nil); err != nil {
			t.Fatal(err)
		}
	}
	st := getState()
	defer putState(st)
	if st.tables.conversions > shapeStart {
		t.Errorf("%d conversions for keys that never repeat (budget %d)", st.tables.conversions, shapeStart)
	}
}

// AppendCallJSON appends the value's JSON to the caller's buffer, after what it holds, and
// gives the same text as CallJSON.
func TestAppendCallJSON(t *testing.T) {
	s := mustCompile(t, "append", `return function(args) return {n = args.n + 1, s = "x"} end`)
	buf := make([]byte, 0, 64)
	buf = append(buf, "prefix:"...)
	res, err := s.AppendCallJSON(buf, context.Background(), []byte(`{"n":1}`), nil)
	if err != nil || string(res.JSON) != `prefix:{"n":2,"s":"x"}` || &res.JSON[0] != &buf[:1][0] {
		t.Fatalf("got %s, %v (same buffer %v)", res.JSON, err, len(res.JSON) > 0 && &res.JSON[0] == &buf[:1][0])
	}
	plain, err := s.CallJSON(context.Background(), []byte(`{"n":1}`), nil)
	if err != nil || string(plain.JSON) != string(res.JSON[len("prefix:"):]) {
		t.Fatalf("CallJSON gave %s, %v", plain.JSON, err)
	}
}

// smallInteger gives what ParseFloat gives, for the integers it takes, and leaves the others.
func TestSmallInteger_sameAsParseFloat(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "-12", "42", "123456789012345", "-999999999999999", "1234567890123456", "9007199254740993", "-"} {
		f, ok := smallInteger(s)
		want, err := strconv.ParseFloat(s, 64)
		if !ok {
			if len(strings.TrimPrefix(s, "-")) <= 15 && s != "-0" && s != "-" {
				t.Errorf("%s: not taken", s)
			}
			continue
		}
		if err != nil || f != want || math.Signbit(f) != math.Signbit(want) {
			t.Errorf("%s: %v, ParseFloat %v %v", s, f, want, err)
		}
	}
	// Numbers decoded into a tool's arguments keep their values, boxed several to a chunk.
	s := mustCompile(t, "nums", `return function(args) local t = 0 for _, v in ipairs(args.a) do t = t + v end return {t = t, negzero = 1/args.z < 0} end`)
	res, err := s.CallJSON(context.Background(), []byte(`{"a":[1,2,3,4,5,6,7,8,9,10,11,12.5,-3,1e2],"z":-0}`), nil)
	if err != nil || string(res.JSON) != `{"negzero":true,"t":175.5}` {
		t.Fatalf("got %s, %v", res.JSON, err)
	}
}
