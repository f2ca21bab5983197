package toolbox

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Returns says how a tool's result is encoded.
const (
	ReturnsJSON   = "json"   // the tool produces a JSON value
	ReturnsString = "string" // the tool produces text, sent as a JSON string
)

// Descriptor describes a tool to callers and to the catalog.
type Descriptor struct {
	Name        string // matches ^[a-zA-Z0-9_-]{1,64}$
	Description string
	Returns     string // ReturnsJSON (default) or ReturnsString
}

// Call is one invocation of a tool.
type Call struct {
	Session   string
	Arguments []byte // a compact JSON object; borrowed: valid only until the tool returns
}

// Func runs a tool. It returns a JSON value (or text, for ReturnsString)
// that may alias call.Arguments, or an error: a *protocol.Error keeps its
// code, any other error becomes tool_failed with its message.
type Func func(ctx context.Context, call Call) ([]byte, error)

// Tool is a registered tool. It must not be modified after Register.
type Tool struct {
	Descriptor
	Run     Func
	Builtin bool // shipped with Clara; survives Reset-style clearing
}

// Registry maps names to tools; safe for concurrent use.
type Registry struct {
	mu    sync.Mutex // serialises writers
	tools atomic.Pointer[map[string]*Tool]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	m := map[string]*Tool{}
	r.tools.Store(&m)
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
	t, ok := (*r.tools.Load())[name]
	return t, ok
}

// Register adds t, replacing any tool of the same name, and returns the
// replaced tool (nil if none).
func (r *Registry) Register(t *Tool) (*Tool, error) {
	if t == nil || t.Run == nil {
		return nil, fmt.Errorf("tool has no function")
	}
	if !ValidName(t.Name) {
		return nil, fmt.Errorf("invalid tool name %q: use 1 to 64 letters, digits, '_' or '-'", t.Name)
	}
	switch t.Returns {
	case "":
		t.Returns = ReturnsJSON
	case ReturnsJSON, ReturnsString:
	default:
		return nil, fmt.Errorf("tool %q: returns must be \"json\" or \"string\", not %q", t.Name, t.Returns)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.tools.Load()
	next := make(map[string]*Tool, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	prev := old[t.Name]
	next[t.Name] = t
	r.tools.Store(&next)
	return prev, nil
}

// Unregister removes the tool registered under name and returns it.
func (r *Registry) Unregister(name string) (*Tool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.tools.Load()
	prev, ok := old[name]
	if !ok {
		return nil, false
	}
	next := make(map[string]*Tool, len(old))
	for k, v := range old {
		if k != name {
			next[k] = v
		}
	}
	r.tools.Store(&next)
	return prev, true
}

// RemoveIf removes every tool for which drop returns true and returns them.
func (r *Registry) RemoveIf(drop func(*Tool) bool) []*Tool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.tools.Load()
	next := make(map[string]*Tool, len(old))
	var removed []*Tool
	for k, v := range old {
		if drop(v) {
			removed = append(removed, v)
		} else {
			next[k] = v
		}
	}
	r.tools.Store(&next)
	return removed
}

// List returns the registered tools sorted by name.
func (r *Registry) List() []*Tool {
	m := *r.tools.Load()
	out := make([]*Tool, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
