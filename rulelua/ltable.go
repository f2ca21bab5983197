package rulelua

import (
	"reflect"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// Direct access to gopher-lua's tables, for the two hot paths of a Lua tool: its arguments'
// objects (decoded from JSON) and its value's tables (encoded to JSON). Through the public API,
// an object of n string keys costs a 32-slot map (whatever the hint), a key list grown one
// append at a time, each key boxed twice, and every Next of the encoder hashes a boxed key
// (about 2 µs of the 5 µs a 5-argument tool took). tableLayout mirrors lua.LTable; init checks
// that the mirror matches field for field (names, types, offsets) and, when it does not (another
// gopher-lua version), everything goes through the public API as before.
type tableLayout struct {
	Metatable lua.LValue
	array     []lua.LValue
	dict      map[lua.LValue]lua.LValue
	strdict   map[string]lua.LValue
	keys      []lua.LValue
	k2i       map[lua.LValue]int
}

// tableLayoutOK: lua.LTable is laid out as tableLayout.
var tableLayoutOK = sameLayout(reflect.TypeFor[lua.LTable](), reflect.TypeFor[tableLayout]())

func sameLayout(a, b reflect.Type) bool {
	if a.Size() != b.Size() || a.NumField() != b.NumField() {
		return false
	}
	for i := range a.NumField() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Type != fb.Type || fa.Offset != fb.Offset {
			return false
		}
	}
	return true
}

func layoutOf(t *lua.LTable) *tableLayout { return (*tableLayout)(unsafe.Pointer(t)) }

// newObjectTable makes the table RawSetString would make from keys[i] = vals[i] in order, with
// maps and key list of their final size and each key boxed once; with a pool, from a table of an
// earlier run when one is free, and noted as made in this run. It returns nil when it cannot (the
// layout is unknown, a key repeats or a value is nil: the caller then sets the keys one by one,
// for the same result).
func newObjectTable(keys []string, vals []lua.LValue, boxes *stringBoxes, pool *tablePool) *lua.LTable {
	if !tableLayoutOK {
		return nil
	}
	n := len(vals)
	var t *lua.LTable
	var strdict map[string]lua.LValue
	var k2i map[lua.LValue]int
	var order []lua.LValue
	if pool != nil && n <= recycleMaxKeys && len(pool.free) > 0 {
		t = pool.free[len(pool.free)-1]
		pool.free = pool.free[:len(pool.free)-1]
		l := layoutOf(t)
		strdict, k2i, order = l.strdict, l.k2i, l.keys[:0]
	} else {
		t = &lua.LTable{Metatable: lua.LNil}
		strdict = make(map[string]lua.LValue, n)
		k2i = make(map[lua.LValue]int, n)
		order = make([]lua.LValue, 0, n)
	}
	for i, v := range vals {
		if v == lua.LNil {
			clear(strdict)
			pool.putBack(t)
			return nil
		}
		strdict[keys[i]] = v
	}
	if len(strdict) != n {
		clear(strdict)
		pool.putBack(t)
		return nil
	}
	for i, k := range keys[:n] {
		lk := boxes.box(k)
		order = append(order, lk)
		k2i[lk] = i
	}
	l := layoutOf(t)
	l.strdict, l.keys, l.k2i = strdict, order, k2i
	if pool != nil {
		pool.made = append(pool.made, t)
	}
	return t
}

// recycleMaxKeys: tables of at most this many keys (a tool's usual arguments) are recycled.
const recycleMaxKeys = 8

// tablePool recycles the objects of a tool's arguments from run to run on a state: their
// table, maps and key list were most of what a call allocated. It relies on what every run
// guarantees: nothing a run made is reachable once it returned successfully (its globals are
// dropped, its value encoded or converted, its actions' values converted), so the tables
// made for its arguments are free then, whatever the script did with them.
type tablePool struct {
	free []*lua.LTable // empty tables with their maps and key list, ready for reuse
	made []*lua.LTable // tables made from the pool's in the run in progress
	// boxes: the string headers the arguments' strings were boxed in (stringBoxes), while the
	// run is in progress; spare: cleared, for the next run's.
	boxes, spare []lua.LString
}

// putBack returns an empty table (never handed out) to the pool, or drops it.
func (p *tablePool) putBack(t *lua.LTable) {
	if p != nil && layoutOf(t).strdict != nil && len(p.free) < cap(p.free) {
		p.free = append(p.free, t)
	}
}

// recycle empties the tables made in the run that just succeeded and keeps those still small
// and plain (no array part, no other keys than strings, at most recycleMaxKeys keys ever).
func (p *tablePool) recycle() {
	if p.free == nil {
		p.free = make([]*lua.LTable, 0, 16)
	}
	for _, t := range p.made {
		l := layoutOf(t)
		if len(p.free) == cap(p.free) || l.array != nil || l.dict != nil || len(l.keys) > recycleMaxKeys {
			continue
		}
		clear(l.strdict)
		clear(l.k2i)
		clear(l.keys)
		l.keys = l.keys[:0]
		t.Metatable = lua.LNil
		p.free = append(p.free, t)
	}
	if p.boxes != nil {
		clear(p.boxes)
		p.spare, p.boxes = p.boxes, nil
	}
	p.forget()
}

// forget drops the list of tables made in the run (a failed run's state is closed).
func (p *tablePool) forget() {
	clear(p.made)
	p.made = p.made[:0]
	p.boxes = nil
}

// boxesFor gives the first chunk of a tool's arguments' string boxes: the spare one when it has
// the n headers wanted, a new one otherwise.
func (p *tablePool) boxesFor(n int) []lua.LString {
	if len(p.spare) >= n {
		p.boxes, p.spare = p.spare, nil
	} else {
		p.boxes = make([]lua.LString, n)
	}
	return p.boxes
}

// hashKeys returns the keys of t's hash part in the order Next gives them (deleted ones
// included: their value is nil), and whether it could (the layout is known).
func hashKeys(t *lua.LTable) ([]lua.LValue, bool) {
	if !tableLayoutOK {
		return nil, false
	}
	return layoutOf(t).keys, true
}

// ifaceWords is how Go lays out a non-empty interface value (runtime.iface): its itab and a
// pointer to the value.
type ifaceWords struct {
	tab  unsafe.Pointer
	data unsafe.Pointer
}

// lstringTab is the itab of lua.LString as a lua.LValue; nil when boxing in place is off.
var lstringTab = func() unsafe.Pointer {
	v := lua.LValue(lua.LString("probe"))
	tab := (*ifaceWords)(unsafe.Pointer(&v)).tab
	// Check the layout on a value boxed in place: it must be the string, equal to one Go boxed.
	s := []lua.LString{"probe"}
	var w lua.LValue
	*(*ifaceWords)(unsafe.Pointer(&w)) = ifaceWords{tab: tab, data: unsafe.Pointer(&s[0])}
	if x, ok := w.(lua.LString); !ok || x != "probe" || w != v || w.Type() != lua.LTString {
		return nil
	}
	return tab
}()

// stringBoxes boxes the strings of one JSON decoding as lua.LValues several to an allocation:
// converting a string to an interface allocates its 16-byte header alone, and a tool's
// arguments are mostly strings (their keys and values). Each header is written once, before its
// value is handed out, and never again; a chunk lives while any of its values does.
type stringBoxes struct {
	chunk []lua.LString // unused headers
	next  int           // size of the next chunk
}

// box returns s as a lua.LValue.
func (b *stringBoxes) box(s string) lua.LValue {
	if lstringTab == nil {
		return lua.LString(s)
	}
	if len(b.chunk) == 0 {
		n := b.next
		if n <= 0 {
			n = 16
		}
		b.chunk, b.next = make([]lua.LString, n), 64
	}
	p := &b.chunk[0]
	*p = lua.LString(s)
	b.chunk = b.chunk[1:]
	var v lua.LValue
	*(*ifaceWords)(unsafe.Pointer(&v)) = ifaceWords{tab: lstringTab, data: unsafe.Pointer(p)}
	return v
}

// setExisting sets t[key] = v (v not nil) when key is already in t's hash part (the caller
// knows): as RawSetString does, without its lookup of the key's position in the key list (a
// hash of the boxed key).
func setExisting(t *lua.LTable, key string, v lua.LValue) {
	if tableLayoutOK {
		if l := layoutOf(t); l.strdict != nil {
			l.strdict[key] = v
			return
		}
	}
	t.RawSetString(key, v)
}

// untouched: t never held a key (its array part, maps and key list were never made), so it is
// indistinguishable from a new table with the same metatable. False when the layout is unknown.
func untouched(t *lua.LTable) bool {
	if !tableLayoutOK || t == nil {
		return false
	}
	l := layoutOf(t)
	return l.array == nil && l.dict == nil && l.strdict == nil && l.keys == nil && l.k2i == nil
}
