package rulelua

import (
	"reflect"
	"slices"
	"strings"
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
func newObjectTable(keys []string, vals []lua.LValue, boxes *valueBoxes, pool *tablePool) *lua.LTable {
	if !tableLayoutOK {
		return nil
	}
	n := len(vals)
	if pool != nil && n <= recycleMaxKeys {
		if t := pool.takeShaped(keys[:n], vals); t != nil {
			return t
		}
	}
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
		pool.made = append(pool.made, madeTable{t: t})
	}
	return t
}

// recycleMaxKeys: tables of at most this many keys (a tool's usual arguments) are recycled.
const recycleMaxKeys = 8

// maxShaped bounds the shaped tables a pool keeps; shapeStart and shapeHitsPerConversion its
// budget of conversions (see tablePool.shape).
const (
	maxShaped              = 8
	shapeStart             = 8
	shapeHitsPerConversion = 4
)

// tablePool recycles the objects of a tool's arguments from run to run on a state: their
// table, maps and key list were most of what a call allocated. It relies on what every run
// guarantees: nothing a run made is reachable once it returned successfully (its globals are
// dropped, its value encoded or converted, its actions' values converted), so the tables
// made for its arguments are free then, whatever the script did with them.
//
// A tool is mostly called with the same keys, in the same order: a shaped table keeps its key
// list and its index of keys (k2i, whose interface keys cost a hash each to set) from run to
// run, with keys of its own, and only its values change. A table with the same keys in the same
// order is all Next, lookups and later writes can see, so reusing it is indistinguishable from
// building it anew.
type tablePool struct {
	free   []*lua.LTable // empty tables with their maps and key list, ready for reuse
	shaped []shapedTable // tables without values that keep their keys, most recently used last
	made   []madeTable   // tables made from the pool's in the run in progress
	taken  []madeTable   // the shaped ones among them (at most maxShaped), for sortedKeys
	// hits and conversions: shaped tables taken, and tables given keys of their own.
	hits, conversions int
	// boxes: the string headers the arguments' strings were boxed in (valueBoxes), while the
	// run is in progress; spare: cleared, for the next run's. nums and spareNums: the same for
	// their numbers.
	boxes, spare    []lua.LString
	nums, spareNums []lua.LNumber
}

// shapedTable is a free table that keeps its keys: names[i] is its key list's i-th key, and
// sorted the same names in the order JSON writes them.
type shapedTable struct {
	t             *lua.LTable
	names, sorted []string
}

// madeTable is a table handed out in the run in progress; names and sorted: its keys when it
// was shaped.
type madeTable struct {
	t             *lua.LTable
	names, sorted []string
}

// takeShaped returns a shaped table of exactly these keys in this order, holding vals, or nil
// (no such table, or a nil value: the table is then built the ordinary way).
func (p *tablePool) takeShaped(keys []string, vals []lua.LValue) *lua.LTable {
	for i := len(p.shaped) - 1; i >= 0; i-- {
		sh := p.shaped[i]
		if len(sh.names) != len(keys) || !sameStrings(sh.names, keys) {
			continue
		}
		for _, v := range vals {
			if v == lua.LNil {
				return nil
			}
		}
		p.shaped = append(p.shaped[:i], p.shaped[i+1:]...)
		p.hits++
		strdict := layoutOf(sh.t).strdict
		for i, v := range vals {
			strdict[keys[i]] = v
		}
		p.made = append(p.made, madeTable(sh))
		p.taken = append(p.taken, madeTable(sh))
		return sh.t
	}
	return nil
}

func sameStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// putBack returns an empty table (never handed out) to the pool, or drops it.
func (p *tablePool) putBack(t *lua.LTable) {
	if p != nil && layoutOf(t).strdict != nil && len(p.free) < cap(p.free) {
		p.free = append(p.free, t)
	}
}

// recycle empties the tables made in the run that just succeeded and keeps those still small
// and plain (no array part, no other keys than strings, at most recycleMaxKeys keys ever): a
// shaped one that still has its keys (the run may have deleted some, but added none) keeps them,
// another is shaped when the budget allows, or else emptied.
func (p *tablePool) recycle() {
	if p.free == nil {
		p.free = make([]*lua.LTable, 0, 16)
	}
	for _, m := range p.made {
		t := m.t
		l := layoutOf(t)
		if l.array != nil || l.dict != nil || len(l.keys) > recycleMaxKeys {
			continue
		}
		t.Metatable = lua.LNil
		clear(l.strdict) // the run's values (and the strings of its keys) are let go of
		if m.names != nil && len(l.keys) == len(m.names) {
			p.keepShaped(shapedTable(m))
			continue
		}
		if len(l.keys) > 0 && p.conversions < shapeStart+p.hits/shapeHitsPerConversion && stringKeys(l.keys) {
			p.conversions++
			p.keepShaped(shape(t))
			continue
		}
		if len(p.free) == cap(p.free) {
			continue
		}
		clear(l.k2i)
		clear(l.keys)
		l.keys = l.keys[:0]
		p.free = append(p.free, t)
	}
	if p.boxes != nil {
		clear(p.boxes)
		p.spare, p.boxes = p.boxes, nil
	}
	if p.nums != nil {
		p.spareNums, p.nums = p.nums, nil
	}
	p.forget()
}

// keepShaped adds a shaped table, dropping the least recently used one when there are
// maxShaped already.
func (p *tablePool) keepShaped(sh shapedTable) {
	if len(p.shaped) == maxShaped {
		copy(p.shaped, p.shaped[1:])
		p.shaped = p.shaped[:maxShaped-1]
	}
	p.shaped = append(p.shaped, sh)
}

// stringKeys: every key is a string (a plain table's are: numbers go to its other parts).
func stringKeys(keys []lua.LValue) bool {
	for _, k := range keys {
		if _, ok := k.(lua.LString); !ok {
			return false
		}
	}
	return true
}

// shape gives t's keys (its key list, strings only) memory of their own, instead of the
// arguments' text and the run's string boxes they point into: one string and one chunk of
// boxes for all, and k2i rebuilt on the new boxes.
func shape(t *lua.LTable) shapedTable {
	l := layoutOf(t)
	size := 0
	for _, k := range l.keys {
		size += len(k.(lua.LString))
	}
	var text strings.Builder
	text.Grow(size)
	for _, k := range l.keys {
		text.WriteString(string(k.(lua.LString)))
	}
	all := text.String()
	names := make([]string, len(l.keys))
	var boxes valueBoxes
	boxes.chunk, boxes.next = make([]lua.LString, len(l.keys)), 1
	clear(l.k2i)
	at := 0
	for i, k := range l.keys {
		name := all[at : at+len(k.(lua.LString))]
		at += len(name)
		names[i] = name
		l.keys[i] = boxes.box(name)
		l.k2i[l.keys[i]] = i
	}
	return shapedTable{t: t, names: names, sorted: slices.Sorted(slices.Values(names))}
}

// sortedKeys returns the keys t may hold, in the order JSON writes them, and its map of them,
// when t is a shaped table handed out in this run that still has no other keys (its key list
// only grows, and a key outside the map part would have made its array or dict): the encoder
// then looks them up in order instead of gathering and sorting them. nil when it is not.
func (p *tablePool) sortedKeys(t *lua.LTable) ([]string, map[string]lua.LValue) {
	for _, m := range p.taken {
		if m.t != t {
			continue
		}
		l := layoutOf(t)
		if l.array != nil || l.dict != nil || len(l.keys) != len(m.names) {
			return nil, nil
		}
		return m.sorted, l.strdict
	}
	return nil, nil
}

// forget drops the list of tables made in the run (a failed run's state is closed).
func (p *tablePool) forget() {
	clear(p.made)
	p.made = p.made[:0]
	clear(p.taken)
	p.taken = p.taken[:0]
	p.boxes, p.nums = nil, nil
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

// numbersFor gives the first chunk of a tool's arguments' number boxes, the spare one when
// there is one.
func (p *tablePool) numbersFor() []lua.LNumber {
	if p.spareNums != nil {
		p.nums, p.spareNums = p.spareNums, nil
	} else {
		p.nums = make([]lua.LNumber, 8)
	}
	return p.nums
}

// hashKeys returns the keys of t's hash part in the order Next gives them (deleted ones
// included: their value is nil), and whether it could (the layout is known).
func hashKeys(t *lua.LTable) ([]lua.LValue, bool) {
	if !tableLayoutOK {
		return nil, false
	}
	return layoutOf(t).keys, true
}

// stringKeyed returns the map of t's string keys when they are all its hash part holds (it has
// no other keys there), and whether it could tell (the layout is known).
func stringKeyed(t *lua.LTable) (map[string]lua.LValue, bool) {
	if !tableLayoutOK {
		return nil, false
	}
	l := layoutOf(t)
	return l.strdict, l.dict == nil
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

// lnumberTab is the itab of lua.LNumber as a lua.LValue; nil when boxing in place is off.
var lnumberTab = func() unsafe.Pointer {
	v := lua.LValue(lua.LNumber(2.5))
	tab := (*ifaceWords)(unsafe.Pointer(&v)).tab
	s := []lua.LNumber{2.5}
	var w lua.LValue
	*(*ifaceWords)(unsafe.Pointer(&w)) = ifaceWords{tab: tab, data: unsafe.Pointer(&s[0])}
	if x, ok := w.(lua.LNumber); !ok || x != 2.5 || w != v || w.Type() != lua.LTNumber {
		return nil
	}
	return tab
}()

// valueBoxes boxes the strings and numbers of one JSON decoding as lua.LValues several to an
// allocation: converting a string to an interface allocates its 16-byte header alone (a float64
// its 8 bytes), and a tool's arguments are mostly strings (their keys and values). Each box is
// written once, before its value is handed out, and never again; a chunk lives while any of its
// values does. Strings and numbers have chunks of their own.
type valueBoxes struct {
	chunk []lua.LString // unused headers
	next  int           // size of the next chunk
	nums  []lua.LNumber // unused numbers
}

// number returns f as a lua.LValue.
func (b *valueBoxes) number(f float64) lua.LValue {
	if lnumberTab == nil {
		return lua.LNumber(f)
	}
	if len(b.nums) == 0 {
		b.nums = make([]lua.LNumber, 8)
	}
	p := &b.nums[0]
	*p = lua.LNumber(f)
	b.nums = b.nums[1:]
	var v lua.LValue
	*(*ifaceWords)(unsafe.Pointer(&v)) = ifaceWords{tab: lnumberTab, data: unsafe.Pointer(p)}
	return v
}

// box returns s as a lua.LValue.
func (b *valueBoxes) box(s string) lua.LValue {
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
