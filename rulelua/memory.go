package rulelua

import (
	"runtime/metrics"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// The memory cap (Limits.MaxMemoryBytes). gopher-lua has no allocator hook, so what a script
// holds is measured by walking it: the run's globals, every local and temporary of every call
// frame, and from there every table (array slots, hash entries, keys, metatable), string and
// function (upvalues) reachable, each counted once. The walk is paced by what the process
// allocated: the first memCheckEvery instructions of a run end with a walk; after that, every
// memCheckEvery instructions the VM reads the Go runtime's count of bytes allocated, and walks
// only when it grew by half of what the cap still allows (at least memMinStep) since the last
// walk. A run that allocates little never walks; one that builds a
// large table walks a few times, each walk costing about as much as building half of what it
// measures. What a run allocates and drops is not held: garbage does not count.

const (
	// memCheckEvery is how many instructions pass between two reads of the allocation count
	// (a multiple of pollEvery).
	memCheckEvery = 8 * pollEvery
	// memMinStep is the least the process must allocate between two walks.
	memMinStep = 1 << 20

	// Estimates of what gopher-lua values take (64-bit, gopher-lua v1.1.2).
	memTable    = 112 // an LTable
	memSlot     = 16  // an array slot (an interface)
	memHashKey  = 96  // a hash entry: the map entry, the key list's slot and its index entry
	memString   = 16  // a string's header, besides its bytes
	memFunction = 80  // an LFunction
	memUpvalue  = 40  // an upvalue
)

var heapAllocs = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// processAllocs is the total of bytes the Go runtime allocated so far (every goroutine).
func processAllocs() uint64 {
	s := []metrics.Sample{heapAllocs[0]}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// memWatch is the memory accounting of the run in progress.
type memWatch struct {
	limit int64  // bytes; 0: no cap
	next  uint64 // walk when processAllocs passes this
	held  int64  // what the last walk measured
	walks int    // walks this run (tests read it)
}

// begin starts a run's accounting. Nothing is read yet: a run shorter than memCheckEvery
// instructions costs nothing; the first check walks at once and reads the allocation count.
func (m *memWatch) begin(limit int64) {
	m.limit, m.held, m.walks, m.next = limit, 0, 0, 0
}

func (m *memWatch) step() uint64 {
	return uint64(max(memMinStep, (m.limit-m.held)/2))
}

// checkMemory is called by the VM's clock every memCheckEvery instructions. It returns false
// when the run holds more than its cap (st.fatal then says so).
func (st *lstate) checkMemory() bool {
	m := &st.mem
	if m.limit <= 0 {
		return true
	}
	if m.next != 0 && processAllocs() < m.next {
		return true
	}
	m.held = st.measure()
	m.walks++
	if m.held > m.limit {
		name := st.script.name
		st.fail(newError(KindLimit, name, sprintf("%s: the script holds about %d MiB, over its memory limit of %d MiB (memory_mb)",
			name, (m.held+(1<<20)-1)>>20, m.limit>>20), nil))
		return false
	}
	m.next = processAllocs() + m.step()
	return true
}

// measure walks what the running script can reach and returns its estimated size in bytes.
func (st *lstate) measure() int64 {
	w := memWalker{tables: map[*lua.LTable]struct{}{}, funcs: map[*lua.LFunction]struct{}{}, strs: map[*byte]struct{}{}}
	// The state's own tables (environment, library proxies, metatables) are not the script's.
	for _, t := range []*lua.LTable{st.env, st.envMT, st.toolEnv, st.toolEnvMT, st.ctxMT, st.stateMT, st.ro} {
		if t != nil {
			w.tables[t] = struct{}{}
		}
	}
	L := st.L
	if st.G != nil {
		w.value(st.G)
	}
	for level := 0; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		for i := 1; ; i++ {
			name, v := L.GetLocal(dbg, i)
			if name == "" {
				break
			}
			w.value(v)
		}
	}
	for len(w.todo) > 0 {
		v := w.todo[len(w.todo)-1]
		w.todo = w.todo[:len(w.todo)-1]
		w.expand(v)
	}
	return w.size
}

type memWalker struct {
	tables map[*lua.LTable]struct{}
	funcs  map[*lua.LFunction]struct{}
	strs   map[*byte]struct{} // strings of 64 bytes or more, counted once however often held
	todo   []lua.LValue
	size   int64
}

// value counts v if it was not seen, and queues what it holds.
func (w *memWalker) value(v lua.LValue) {
	switch x := v.(type) {
	case lua.LString:
		n := len(x)
		if n >= 64 {
			p := unsafe.StringData(string(x))
			if _, seen := w.strs[p]; seen {
				return
			}
			w.strs[p] = struct{}{}
		}
		w.size += int64(memString + n)
	case *lua.LTable:
		if _, seen := w.tables[x]; seen {
			return
		}
		w.tables[x] = struct{}{}
		w.size += memTable
		w.todo = append(w.todo, x)
	case *lua.LFunction:
		if _, seen := w.funcs[x]; seen {
			return
		}
		w.funcs[x] = struct{}{}
		w.size += memFunction
		w.todo = append(w.todo, x)
	}
}

func (w *memWalker) expand(v lua.LValue) {
	switch x := v.(type) {
	case *lua.LTable:
		maxN := x.MaxN()
		w.size += int64(maxN) * memSlot
		for i := 1; i <= maxN; i++ {
			w.value(x.RawGetInt(i))
		}
		var k, val lua.LValue = lua.LNil, lua.LNil
		if maxN > 0 {
			k = lua.LNumber(maxN)
		}
		for {
			k, val = x.Next(k)
			if k == lua.LNil {
				break
			}
			w.size += memHashKey
			w.value(k)
			w.value(val)
		}
		if x.Metatable != nil {
			w.value(x.Metatable)
		}
	case *lua.LFunction:
		w.size += int64(len(x.Upvalues)) * memUpvalue
		for _, uv := range x.Upvalues {
			if uv != nil {
				w.value(uv.Value())
			}
		}
	}
}
