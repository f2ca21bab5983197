package rulelua

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/clara-lib/clara/core/jsonx"
)

// jsonEncoder writes a Lua value as JSON straight into bytes: the same text toGo followed by
// EncodeJSON would give (the same table shapes, sorted keys, encoding/json's numbers and string
// escapes without HTML escaping), without building Go maps on the way. A Lua tool's value goes
// out this way (Script.CallJSON).
type jsonEncoder struct {
	st   *lstate
	c    toGoConv // counts values and polls the deadline as toGo does
	buf  []byte
	keys []jsonKey // scratch for object keys, reused by nested tables
}

type jsonKey struct {
	key   lua.LValue
	val   lua.LValue
	idx   int    // the index of an entry of the array part (key is nil)
	name  string // the key as JSON writes it
	class int    // 0 array part, 1 string key, 2 other key: of equal names the higher class wins, as in toGo (ForEach's order)
}

func (st *lstate) appendJSON(buf []byte, v lua.LValue) ([]byte, error) {
	e := jsonEncoder{st: st, c: toGoConv{st: st}, buf: buf, keys: st.jsonKeys}
	err := e.value(v, 0)
	st.jsonKeys = e.keys[:0] // table cleared the entries it used
	return e.buf, err
}

func (e *jsonEncoder) value(v lua.LValue, depth int) error {
	switch x := v.(type) {
	case *lua.LNilType:
		e.buf = append(e.buf, "null"...)
	case lua.LBool:
		e.buf = strconv.AppendBool(e.buf, bool(x))
	case lua.LNumber:
		return e.number(float64(x))
	case lua.LString:
		e.buf = jsonx.AppendString(e.buf, string(x))
	case *lua.LTable:
		return e.table(x, depth)
	case *lua.LUserData:
		m, ok := x.Value.(map[string]any)
		if !ok {
			return fmt.Errorf("cannot convert a %s value", v.Type().String())
		}
		g, err := e.c.normalize(m, depth)
		if err != nil {
			return err
		}
		data, err := EncodeJSON(g)
		if err != nil {
			return err
		}
		e.buf = append(e.buf, data...)
	default:
		return fmt.Errorf("cannot convert a %s value", v.Type().String())
	}
	return nil
}

// number writes f as encoding/json does.
func (e *jsonEncoder) number(f float64) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		// An integer: the digits AppendFloat would write, without its shortest-form search.
		e.buf = strconv.AppendInt(e.buf, int64(f), 10)
		return nil
	}
	e.buf = jsonx.AppendFloat(e.buf, f)
	return nil
}

func (e *jsonEncoder) table(t *lua.LTable, depth int) error {
	if depth >= maxDepth {
		return fmt.Errorf("table nested more than %d levels (or cyclic)", maxDepth)
	}
	// The entries, without ForEach (which boxes every key it hands out): the array part by
	// index, then the hash part (its map of string keys, or the keys gopher-lua keeps boxed).
	mark := len(e.keys)
	err := e.entries(t, depth, mark)
	clear(e.keys[mark:])
	e.keys = e.keys[:mark]
	return err
}

// entries writes table t, its entries gathered in e.keys[mark:].
func (e *jsonEncoder) entries(t *lua.LTable, depth, mark int) error {
	if names, strdict := e.st.tables.sortedKeys(t); names != nil {
		return e.sortedEntries(names, strdict, depth)
	}
	maxN := t.MaxN()
	for i := 1; i <= maxN; i++ {
		if v := t.RawGetInt(i); v != lua.LNil {
			e.keys = append(e.keys, jsonKey{val: v, idx: i})
		}
	}
	if strdict, ok := stringKeyed(t); ok {
		// Only string keys in the hash part: its map read in its own order (the entries are
		// sorted below), with no lookup per key, and named already.
		for name, v := range strdict {
			e.keys = append(e.keys, jsonKey{val: v, name: name, class: 1})
		}
	} else if keys, ok := hashKeys(t); ok {
		// Next's order without its lookup of the previous key's position.
		for _, k := range keys {
			if v := t.RawGetH(k); v != lua.LNil {
				e.keys = append(e.keys, hashEntry(k, v))
			}
		}
	} else {
		var k, v lua.LValue = lua.LNil, lua.LNil
		if maxN > 0 {
			k = lua.LNumber(maxN)
		}
		for {
			k, v = t.Next(k)
			if k == lua.LNil {
				break
			}
			e.keys = append(e.keys, hashEntry(k, v))
		}
	}
	entries := e.keys[mark:]
	n := len(entries)
	// A sequence: every key a positive integer, the largest the count (toGo's rule).
	maxK, seq := 0, true
	for _, en := range entries {
		if en.class == 0 {
			maxK = max(maxK, en.idx)
		} else if f, ok := en.key.(lua.LNumber); ok && f >= 1 && f <= 1<<31 && float64(f) == math.Trunc(float64(f)) {
			maxK = max(maxK, int(f))
		} else {
			seq = false
			break
		}
	}
	seq = seq && maxK == n
	if err := e.c.count(n + 1); err != nil {
		return err
	}
	if n > 0 && seq {
		e.buf = append(e.buf, '[')
		for i := 1; i <= n; i++ {
			if i > 1 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(t.RawGetInt(i), depth+1); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
		return nil
	}
	for i := range entries {
		en := &entries[i]
		switch kk := en.key.(type) {
		case nil:
			if en.class == 0 {
				en.name = strconv.Itoa(en.idx)
			}
		case lua.LString:
			en.name = string(kk)
		case lua.LNumber:
			en.name = formatNumber(float64(kk))
		default:
			return fmt.Errorf("cannot convert a table with a %s key", en.key.Type().String())
		}
	}
	// The order to write them in: by name, then class. A tool's objects are small: an insertion
	// sort of their indexes (no entry moved, no write barrier, no SortFunc calls).
	var small [16]uint8
	var order []uint8
	if n <= len(small) {
		order = small[:n]
		for i := range order {
			order[i] = uint8(i)
		}
		for i := 1; i < n; i++ {
			for j := i; j > 0 && keyLess(&entries[order[j]], &entries[order[j-1]]); j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
	} else {
		slices.SortFunc(entries, func(a, b jsonKey) int {
			if c := strings.Compare(a.name, b.name); c != 0 {
				return c
			}
			return a.class - b.class
		})
	}
	e.buf = append(e.buf, '{')
	first := true
	for i := 0; i < n; i++ {
		en, next := &entries[i], i+1
		if order != nil {
			en = &entries[order[i]]
			if next < n {
				next = int(order[next])
			}
		}
		if i+1 < n && entries[next].name == en.name {
			continue // a value under the same name replaced this one in toGo's map
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = jsonx.AppendString(e.buf, en.name)
		e.buf = append(e.buf, ':')
		if err := e.value(en.val, depth+1); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// sortedEntries writes an object of string keys whose names, sorted, are known (a shaped
// table's, see tablePool.sortedKeys): those of names it holds, in that order.
func (e *jsonEncoder) sortedEntries(names []string, strdict map[string]lua.LValue, depth int) error {
	if err := e.c.count(len(strdict) + 1); err != nil {
		return err
	}
	e.buf = append(e.buf, '{')
	first := true
	for _, name := range names {
		v, ok := strdict[name]
		if !ok {
			continue // deleted by the script
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = jsonx.AppendString(e.buf, name)
		e.buf = append(e.buf, ':')
		if err := e.value(v, depth+1); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// keyLess orders entries by name, then class (no two entries share both).
func keyLess(a, b *jsonKey) bool {
	if a.name != b.name {
		return a.name < b.name
	}
	return a.class < b.class
}

// hashEntry is the entry of key k of a table's hash part.
func hashEntry(k, v lua.LValue) jsonKey {
	class := 2
	if _, ok := k.(lua.LString); ok {
		class = 1
	}
	return jsonKey{key: k, val: v, class: class}
}
