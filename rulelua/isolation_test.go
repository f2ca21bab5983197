package rulelua

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// drainPool closes every pooled state, so that the next runs share one state.
func drainPool() {
	pool.Lock()
	free := append([]*lstate(nil), pool.free...)
	clear(pool.free)
	pool.free = pool.free[:0]
	pool.Unlock()
	for _, st := range free {
		st.close()
	}
}

// A run that sets and clears globals must not pass the table (and the keys gopher-lua keeps in
// it) to the next run of the state: the key order of next() would carry data across scripts.
func TestRun_globalsNotShared(t *testing.T) {
	writer := mustCompile(t, "writer.lua", `
local secret = ctx.secret
for i = 1, #secret do
  local k = "m" .. i .. "_" .. secret:byte(i)
  _G[k] = true; _G[k] = nil
end
return "done"`)
	reader := mustCompile(t, "reader.lua", `
local out = {}
for i = 1, 16 do
  for c = 32, 126 do
    local k = "m" .. i .. "_" .. c
    _G.zz = true; _G[k] = true
    local first = next(_G)
    _G.zz = nil; _G[k] = nil
    if first == k then out[#out + 1] = string.char(c) break end
  end
end
return table.concat(out)`)
	drainPool()
	created := atomic.LoadInt64(&statesCreated)
	if _, err := writer.Run(context.Background(), map[string]any{"secret": "hunter2-TOKEN"}, nil); err != nil {
		t.Fatal(err)
	}
	// 1,520 probes take longer than the 50 ms default under -race on a busy
	// machine; this test is about what the globals carry, not about time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := reader.Run(ctx, map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := atomic.LoadInt64(&statesCreated) - created; n != 1 {
		t.Fatalf("%d states created, want both runs on one", n)
	}
	if res.Value != "" {
		t.Fatalf("the second script read %q from the first's globals", res.Value)
	}
}

// Deleted globals must not pile up from run to run (gopher-lua keeps deleted keys).
func TestRun_globalsDeadKeysNotRetained(t *testing.T) {
	s := mustCompile(t, "gleak.lua", `
local base = string.rep("x", 1e6 - 20)
for j = 1, 20 do
  local k = base .. math.random()
  _G[k] = true
  _G[k] = nil
end
return "ok"`)
	drainPool()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Run(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 4; i++ {
		if _, err := s.Run(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc > before.HeapAlloc && after.HeapAlloc-before.HeapAlloc > 8<<20 {
		t.Fatalf("4 runs retained %d MiB", (after.HeapAlloc-before.HeapAlloc)>>20)
	}
}

// deadKeysTable is a table with one live key after n deleted ones of 8 KiB each (substrings of
// one string): every LTable.Next walks and hashes them all.
func deadKeysTable(n int) *lua.LTable {
	b := make([]byte, n+8192)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	src := string(b)
	t := &lua.LTable{Metatable: lua.LNil}
	for i := 0; i < n; i++ {
		k := src[i : i+8192]
		t.RawSetString(k, lua.LTrue)
		t.RawSetString(k, lua.LNil)
	}
	t.RawSetString("last", lua.LTrue)
	return t
}

// next (what pairs returns, and what `__index = next` calls) polls the deadline on each call.
func TestNext_pollsDeadline(t *testing.T) {
	big := deadKeysTable(100000)
	for _, src := range []string{
		`local n = next while true do n(big) end`,
		`for i = 1, 1e9 do for k in pairs(big) do end end`,
		`setmetatable(big, {__index = next}) local x while true do x = big.q x = big.q x = big.q x = big.q end`,
	} {
		s := mustCompile(t, "next.lua", src)
		drainPool()
		st := newState()
		st.env.RawSetString("big", big)
		putState(st)
		start := time.Now()
		_, err := s.Run(context.Background(), nil, nil)
		elapsed := time.Since(start)
		big.Metatable = lua.LNil
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want a timeout", src, err)
		}
		if limit := DefaultRuleDeadline + 150*time.Millisecond*raceScale; elapsed > limit {
			t.Errorf("%s: took %v, over %v", src, elapsed, limit)
		}
	}
}

type slowLogHost struct{ testHost }

func (h *slowLogHost) Log(level, message string) { time.Sleep(80 * time.Millisecond) }

// A run that returns after its deadline is a timeout, whatever it returned.
func TestRun_lateReturnIsTimeout(t *testing.T) {
	s := mustCompile(t, "late.lua", `log("info", "slow host") return 1`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	res, err := s.Run(ctx, nil, &slowLogHost{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, %v; want a timeout", res.Value, err)
	}
}

// json.decode decodes straight into Lua values; the result must be what encoding/json gives.
func TestJSONDecode_matchesdecodeJSON(t *testing.T) {
	inputs := []string{
		`null`, `true`, `false`, `0`, `-0`, `12`, `-1.5e3`, `1E+2`, `0.25`, `""`, `"abc"`,
		`"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"\ud800"`, "\"\xff\xfe\"", `"héllo"`,
		`[]`, `{}`, `[1, "a", null, true, [2, [3]], {"x": {"y": []}}]`, ` { "a" : 1 , "b" : [ ] } `,
		`{"a": 1, "a": 2}`, `{"n": null}`, `[null, 1]`,
		``, ` `, `[`, `]`, `{`, `{"a"}`, `{"a":}`, `{1: 2}`, `[1,]`, `[1 2]`, `01`, `1.`, `.5`, `-`,
		`1e`, `1e+`, `tru`, `nul`, `"abc`, "\"a\tb\"", `"\x"`, `1 2`, `[1] x`, `1e400`, `"\u12"`,
	}
	st := newState()
	defer st.close()
	st.begin(context.Background(), mustCompile(t, "j.lua", "return 1"), nil)
	st.dctx.deadline = time.Now().Add(time.Hour)
	for _, in := range inputs {
		want, werr := decodeJSON([]byte(in))
		var got any
		var gerr error
		func() {
			defer func() {
				if r := recover(); r != nil {
					gerr = errors.New("raised")
				}
			}()
			lv, err := st.decodeJSONLua(st.L, in)
			if err != nil {
				gerr = err
				return
			}
			got, gerr = st.toGo(lv)
		}()
		if (werr != nil) != (gerr != nil) {
			t.Errorf("%q: encoding/json error %v, json.decode error %v", in, werr, gerr)
			continue
		}
		if werr == nil && !reflect.DeepEqual(normalizeEmpty(want), got) {
			t.Errorf("%q: encoding/json %#v, json.decode %#v", in, want, got)
		}
	}
}

// normalizeEmpty turns empty lists into empty maps and drops nil map values, as the round
// trip through Lua does.
func normalizeEmpty(v any) any {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return map[string]any{}
		}
		holes := false
		for _, e := range x {
			holes = holes || e == nil
		}
		if holes {
			m := map[string]any{}
			for i, e := range x {
				if e != nil {
					m[formatNumber(float64(i+1))] = normalizeEmpty(e)
				}
			}
			return m
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeEmpty(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e != nil {
				out[k] = normalizeEmpty(e)
			}
		}
		return out
	}
	return v
}

// decodeJSON is encoding/json's reading of one value: the reference the
// sandbox's own decoder (json.decode) is held to.
func decodeJSON(data []byte) (any, error) {
	var v any
	err := json.Unmarshal(data, &v)
	return v, err
}
