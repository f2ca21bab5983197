package toolbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Returns says how a tool's result is encoded.
const (
	ReturnsJSON   = "json"   // the tool produces a JSON value
	ReturnsString = "string" // the tool produces text, sent as a JSON string
)

// Registry maps names to tools; safe for concurrent use.
type Registry struct {
	mu    sync.Mutex // serialises writers
	tools atomic.Pointer[toolSet]

	watchers Watchers
}

// Watchers is a set of functions to call when something changes; the zero
// value is empty and ready. Safe for concurrent use.
type Watchers struct {
	mu   sync.Mutex
	fns  map[int]func()
	next int
}

// Add arranges for fn to run at every Notify until stop is called; fn is
// not called once stop has returned.
func (w *Watchers) Add(fn func()) (stop func()) {
	w.mu.Lock()
	if w.fns == nil {
		w.fns = map[int]func(){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.fns, id)
		w.mu.Unlock()
	}
}

// Notify calls every function added, on the calling goroutine, under the
// set's lock: they must return at once and not add or stop watchers.
func (w *Watchers) Notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fn := range w.fns {
		fn()
	}
}

// toolSet is the registry's content, replaced whole at every change: the
// tools by name, and sorted by name for List (a chat's catalog lists them
// on every call, and sorting some forty tools then cost more than the
// rest of the catalog).
type toolSet struct {
	byName map[string]*Tool
	sorted []*Tool
}

// store makes m the registry's content (r.mu held, or a new registry).
func (r *Registry) store(m map[string]*Tool) {
	sorted := make([]*Tool, 0, len(m))
	for _, t := range m {
		sorted = append(sorted, t)
	}
	slices.SortFunc(sorted, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	r.tools.Store(&toolSet{byName: m, sorted: sorted})
}

// OnChange arranges for fn to run after every change of the registry
// (a registration, a removal, a swap). fn runs on the changing goroutine,
// with the registry's writer lock held: it must return at once and not
// call back into the registry. stop ends it; fn is not called once stop
// has returned.
func (r *Registry) OnChange(fn func()) (stop func()) { return r.watchers.Add(fn) }

// Touch tells the watchers that what the registry offers changed without
// a registration: a tool's Offered now says otherwise.
func (r *Registry) Touch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed()
}

// changed tells the watchers (r.mu held).
func (r *Registry) changed() { r.watchers.Notify() }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.store(map[string]*Tool{})
	return r
}

// ValidName reports whether name is a legal tool name: 1 to 64 of
// [a-zA-Z0-9_-], what OpenAI, Anthropic and MCP all accept.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Lookup returns the tool registered under name. It takes no lock.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	t, ok := r.tools.Load().byName[name]
	return t, ok
}

// Registration errors, for callers that map them to codes.
var (
	ErrBuiltin  = errors.New("is a built-in tool")
	ErrNotFound = errors.New("no such tool")
)

// Register adds t (built by NewTool), replacing any tool of the same name
// that is not built in; the replaced tool is retired (released once its
// running calls finish). Replacing a built-in tool is refused with
// ErrBuiltin unless t is built in too.
func (r *Registry) Register(t *Tool) error {
	if t == nil || t.Run == nil {
		return errors.New("tool has no function")
	}
	r.mu.Lock()
	old := r.tools.Load().byName
	prev := old[t.Name]
	if prev != nil && prev.Builtin && !t.Builtin {
		r.mu.Unlock()
		return fmt.Errorf("cannot replace %q: it %w", t.Name, ErrBuiltin)
	}
	next := make(map[string]*Tool, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[t.Name] = t
	r.store(next)
	r.changed()
	r.mu.Unlock()
	if prev != nil {
		prev.retire()
	}
	return nil
}

// Unregister removes the tool registered under name and retires it (it is
// released once its running calls finish). Built-in tools stay.
func (r *Registry) Unregister(name string) error {
	r.mu.Lock()
	old := r.tools.Load().byName
	prev, ok := old[name]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("cannot unregister %q: %w", name, ErrNotFound)
	}
	if prev.Builtin {
		r.mu.Unlock()
		return fmt.Errorf("cannot unregister %q: it %w", name, ErrBuiltin)
	}
	next := make(map[string]*Tool, len(old))
	for k, v := range old {
		if k != name {
			next[k] = v
		}
	}
	r.store(next)
	r.changed()
	r.mu.Unlock()
	prev.retire()
	return nil
}

// Swap removes every tool for which drop returns true and registers add (in
// place of tools of the same names that are not built in), in one change.
// It retires nothing itself: it returns the tools that left the registry,
// for the caller to Retire once it holds no lock of its own, because
// retiring an idle host tool runs its release callback, and a host's
// callback may call back into Clara.
func (r *Registry) Swap(drop func(*Tool) bool, add []*Tool) (left []*Tool, err error) {
	left, refused := r.SwapGuarded(drop, add, nil)
	if len(refused) > 0 {
		problems := make([]string, len(refused))
		for i, e := range refused {
			problems[i] = e.Error()
		}
		err = errors.New(strings.Join(problems, "; "))
	}
	return left, err
}

// SwapGuarded is Swap where a tool of add may take the name of a tool that
// stays only if guard(prev, t) returns nil (a nil guard lets it unless prev
// is built in and t is not). A refused tool stays out of the registry; the
// guard's errors come back, one per refused tool, in add's order. guard
// runs with the registry's writer lock held: it must not call back into
// the registry.
func (r *Registry) SwapGuarded(drop func(*Tool) bool, add []*Tool, guard func(prev, t *Tool) error) (left []*Tool, refused []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tools.Load().byName
	next := make(map[string]*Tool, len(old)+len(add))
	for k, v := range old {
		if drop != nil && drop(v) {
			left = append(left, v)
		} else {
			next[k] = v
		}
	}
	for _, t := range add {
		if prev := next[t.Name]; prev != nil {
			var err error
			switch {
			case guard != nil:
				err = guard(prev, t)
			case prev.Builtin && !t.Builtin:
				err = fmt.Errorf("cannot replace %q: it %w", t.Name, ErrBuiltin)
			}
			if err != nil {
				refused = append(refused, err)
				continue
			}
			left = append(left, prev)
		}
		next[t.Name] = t
	}
	r.store(next)
	r.changed()
	return left, refused
}

// SetLimits replaces the limits of the tool registered under name with
// those limits returns for it, for the calls that start from now on
// (Tool.WithLimits), and returns the tool before and after. limits runs
// under the registry's writer lock (it must not call back into the
// registry); its error is SetLimits'. The tool replaced is retired: it
// lives on while calls run it or while the new one is in use.
func (r *Registry) SetLimits(name string, limits func(*Tool) (Limits, error)) (prev, next *Tool, err error) {
	r.mu.Lock()
	old := r.tools.Load().byName
	prev, ok := old[name]
	if !ok {
		r.mu.Unlock()
		return nil, nil, fmt.Errorf("no tool %q: %w", name, ErrNotFound)
	}
	l, err := limits(prev)
	if err == nil {
		next, err = prev.WithLimits(l)
	}
	if err != nil {
		r.mu.Unlock()
		return nil, nil, err
	}
	m := make(map[string]*Tool, len(old))
	for k, v := range old {
		m[k] = v
	}
	m[name] = next
	r.store(m)
	r.changed()
	r.mu.Unlock()
	prev.retire()
	return prev, next, nil
}

// Retire drops the registry's reference to a tool that left it: the tool
// finishes the calls it is running, then is released.
func (t *Tool) Retire() { t.retire() }

// List returns the registered tools sorted by name, in a slice of the
// caller's.
func (r *Registry) List() []*Tool {
	return slices.Clone(r.tools.Load().sorted)
}
