package rulelua

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

const (
	// maxDepth bounds the nesting of converted values (cyclic tables hit it too).
	maxDepth = 100
	// maxValues bounds the values one conversion visits, so a table graph with shared subtables
	// cannot expand exponentially.
	maxValues = 1 << 18
)

// EncodeJSON encodes a JSON-like Go value (what Result.Value and Action values hold) as compact
// JSON, without HTML escaping; object keys are sorted. It is json.encode inside scripts.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

/* Lua -> Go */

type toGoConv struct {
	st *lstate
	n  int
}

func (st *lstate) toGo(v lua.LValue) (any, error) {
	c := toGoConv{st: st}
	return c.conv(v, 0)
}

func (c *toGoConv) count(n int) error {
	c.n += n
	if c.n > maxValues {
		return newError(KindLimit, c.st.script.name, fmt.Sprintf("value too large to convert (more than %d values)", maxValues), nil)
	}
	if c.n&1023 < n || n >= 1024 {
		if c.st.dctx.expired() {
			return c.st.timeoutError()
		}
	}
	return nil
}

func (c *toGoConv) conv(v lua.LValue, depth int) (any, error) {
	switch x := v.(type) {
	case *lua.LNilType:
		return nil, nil
	case lua.LBool:
		return bool(x), nil
	case lua.LNumber:
		return float64(x), nil
	case lua.LString:
		return string(x), nil
	case *lua.LTable:
		return c.table(x, depth)
	case *lua.LUserData:
		if m, ok := x.Value.(map[string]any); ok {
			return c.normalize(m, depth)
		}
	}
	return nil, fmt.Errorf("cannot convert a %s value", v.Type().String())
}

func (c *toGoConv) table(t *lua.LTable, depth int) (any, error) {
	if depth >= maxDepth {
		return nil, fmt.Errorf("table nested more than %d levels (or cyclic)", maxDepth)
	}
	n, maxK, seq := 0, 0, true
	t.ForEach(func(k, _ lua.LValue) {
		n++
		if f, ok := k.(lua.LNumber); ok && f >= 1 && f <= 1<<31 && float64(f) == math.Trunc(float64(f)) {
			if int(f) > maxK {
				maxK = int(f)
			}
		} else {
			seq = false
		}
	})
	if err := c.count(n + 1); err != nil {
		return nil, err
	}
	if n > 0 && seq && maxK == n {
		out := make([]any, n)
		for i := 1; i <= n; i++ {
			v, err := c.conv(t.RawGetInt(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i-1] = v
		}
		return out, nil
	}
	out := make(map[string]any, n)
	var ferr error
	t.ForEach(func(k, val lua.LValue) {
		if ferr != nil {
			return
		}
		var key string
		switch kk := k.(type) {
		case lua.LString:
			key = string(kk)
		case lua.LNumber:
			key = formatNumber(float64(kk))
		default:
			ferr = fmt.Errorf("cannot convert a table with a %s key", k.Type().String())
			return
		}
		gv, err := c.conv(val, depth+1)
		if err != nil {
			ferr = err
			return
		}
		out[key] = gv
	})
	if ferr != nil {
		return nil, ferr
	}
	return out, nil
}

func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// normalize deep-copies a Go value from the host into the JSON-like shapes.
func (c *toGoConv) normalize(v any, depth int) (any, error) {
	if depth >= maxDepth {
		return nil, fmt.Errorf("value nested more than %d levels", maxDepth)
	}
	if err := c.count(1); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			g, err := c.normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = g
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			g, err := c.normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = g
		}
		return out, nil
	}
	if f, ok := number(v); ok {
		return f, nil
	}
	g, err := viaJSON(v)
	if err != nil {
		return nil, err
	}
	return c.normalize(g, depth)
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// viaJSON converts any other Go value (typed maps, slices, structs) through encoding/json.
func viaJSON(v any) (any, error) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Func || rv.Kind() == reflect.Chan {
		return nil, fmt.Errorf("cannot convert a Go %T", v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot convert a Go %T: %v", v, err)
	}
	var out any
	err = json.Unmarshal(data, &out)
	return out, err
}

/* Go -> Lua */

// toLua converts a Go value into fresh Lua values (tables for maps and slices).
func (st *lstate) toLua(v any) (lua.LValue, error) {
	n := 0
	return st.toLuaDepth(v, 0, &n)
}

func (st *lstate) toLuaDepth(v any, depth int, n *int) (lua.LValue, error) {
	if depth >= maxDepth {
		return nil, fmt.Errorf("value nested more than %d levels", maxDepth)
	}
	*n++
	if *n > maxValues {
		return nil, fmt.Errorf("value too large to convert (more than %d values)", maxValues)
	}
	if *n&1023 == 0 && st.dctx.expired() {
		return nil, st.timeoutError()
	}
	switch x := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(x), nil
	case string:
		return lua.LString(x), nil
	case float64:
		return lua.LNumber(x), nil
	case map[string]any:
		t := st.L.CreateTable(0, len(x))
		for k, e := range x {
			lv, err := st.toLuaDepth(e, depth+1, n)
			if err != nil {
				return nil, err
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := st.L.CreateTable(len(x), 0)
		for i, e := range x {
			lv, err := st.toLuaDepth(e, depth+1, n)
			if err != nil {
				return nil, err
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	}
	if f, ok := number(v); ok {
		return lua.LNumber(f), nil
	}
	g, err := viaJSON(v)
	if err != nil {
		return nil, err
	}
	return st.toLuaDepth(g, depth, n)
}

// lazyLua converts a ctx field: maps stay Go maps behind read-only userdata, lists become fresh
// tables whose map elements are again userdata.
func (st *lstate) lazyLua(v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case float64:
		return lua.LNumber(x)
	case map[string]any:
		return st.newCtx(x)
	case []any:
		if len(x) == 0 {
			return st.L.CreateTable(0, 0)
		}
		// One table per list per run: reading ctx.list[i] in a loop stays linear.
		key := unsafe.SliceData(x)
		if t, ok := st.lists[key]; ok {
			return t
		}
		t := st.L.CreateTable(len(x), 0)
		for i, e := range x {
			t.RawSetInt(i+1, st.lazyLua(e))
		}
		if st.lists == nil {
			st.lists = map[*any]*lua.LTable{}
		}
		st.lists[key] = t
		return t
	}
	if f, ok := number(v); ok {
		return lua.LNumber(f)
	}
	g, err := viaJSON(v)
	if err != nil {
		return lua.LNil
	}
	return st.lazyLua(g)
}
