package toolbox

import (
	"fmt"
	"sort"
	"strings"

	"github.com/clara-lib/clara/core/protocol"
)

// Policy is one allow/deny layer. An empty allow list allows every tool;
// deny always wins. A nil *Policy allows everything.
type Policy struct {
	Source string // who set it, for messages: "the configuration", "session \"s1\"", "the request"
	allow  map[string]bool
	deny   map[string]bool
}

// NewPolicy builds a layer from lists of tool names.
func NewPolicy(source string, allow, deny []string) *Policy {
	p := &Policy{Source: source}
	if len(allow) > 0 {
		p.allow = make(map[string]bool, len(allow))
		for _, n := range allow {
			p.allow[n] = true
		}
	}
	if len(deny) > 0 {
		p.deny = make(map[string]bool, len(deny))
		for _, n := range deny {
			p.deny[n] = true
		}
	}
	return p
}

// Empty reports whether the layer restricts nothing.
func (p *Policy) Empty() bool { return p == nil || (p.allow == nil && p.deny == nil) }

// Lists returns the layer's lists, sorted (nil when empty).
func (p *Policy) Lists() (allow, deny []string) {
	if p == nil {
		return nil, nil
	}
	return sortedKeys(p.allow), sortedKeys(p.deny)
}

func sortedKeys(m map[string]bool) []string {
	if m == nil {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// why returns "" when the layer allows name, else the reason.
func (p *Policy) why(name string) string {
	if p == nil {
		return ""
	}
	if p.deny[name] {
		return "its deny list names it"
	}
	if p.allow != nil && !p.allow[name] {
		return "it is not in its allow list"
	}
	return ""
}

// DenyOnly is the layer with its deny list only (p itself when it has no
// allow list, nil when it has no deny list either).
func (p *Policy) DenyOnly() *Policy {
	if p == nil || p.allow == nil {
		return p
	}
	if p.deny == nil {
		return nil
	}
	return &Policy{Source: p.Source, deny: p.deny}
}

// Narrow returns a layer allowing only what both p and q allow.
func (p *Policy) Narrow(q *Policy, source string) *Policy {
	if p.Empty() {
		if q.Empty() {
			return nil
		}
		return &Policy{Source: source, allow: q.allow, deny: q.deny}
	}
	if q.Empty() {
		return &Policy{Source: source, allow: p.allow, deny: p.deny}
	}
	out := &Policy{Source: source}
	switch {
	case p.allow == nil:
		out.allow = q.allow
	case q.allow == nil:
		out.allow = p.allow
	default:
		out.allow = map[string]bool{}
		for k := range p.allow {
			if q.allow[k] {
				out.allow[k] = true
			}
		}
	}
	if p.deny != nil || q.deny != nil {
		out.deny = map[string]bool{}
		for k := range p.deny {
			out.deny[k] = true
		}
		for k := range q.deny {
			out.deny[k] = true
		}
	}
	return out
}

// ParsePolicy reads a request's {"allow": [...], "deny": [...]}.
func ParsePolicy(raw []byte, source string) (*Policy, error) {
	var v struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
	}
	if err := decodeStrict(raw, &v, ""); err != nil {
		return nil, fmt.Errorf("\"policy\" must be {\"allow\": [names], \"deny\": [names]}: %s", err)
	}
	return NewPolicy(source, v.Allow, v.Deny), nil
}

// Scope is the stack of policy layers a call runs under: configuration,
// session, request. A tool runs only if every layer allows it, so a layer
// can narrow what the ones above allow but never widen it.
type Scope struct {
	Config, Session, Request *Policy
}

// Check returns nil when every layer allows the tool, else a denied error
// naming the layer and the reason.
func (s Scope) Check(name string) *protocol.Error {
	for _, p := range [3]*Policy{s.Config, s.Session, s.Request} {
		if why := p.why(name); why != "" {
			return protocol.Errorf(protocol.Denied, "tool %q denied by the policy of %s: %s", name, p.Source, why)
		}
	}
	return nil
}

// Verdict is what one layer of policy says of a tool, for a trace.
type Verdict struct {
	Layer   string // the layer's Source
	Allowed bool
	Reason  string // why not, when not allowed
}

// Explain gives the verdict of every layer that restricts anything, top
// first, up to and including the one that denies the tool.
func (s Scope) Explain(name string) []Verdict {
	var out []Verdict
	for _, p := range [3]*Policy{s.Config, s.Session, s.Request} {
		if p.Empty() {
			continue
		}
		why := p.why(name)
		out = append(out, Verdict{Layer: p.Source, Allowed: why == "", Reason: why})
		if why != "" {
			break
		}
	}
	return out
}

// Allows reports whether every layer allows the tool.
func (s Scope) Allows(name string) bool {
	return s.Config.why(name) == "" && s.Session.why(name) == "" && s.Request.why(name) == ""
}

// String describes the scope for logs.
func (s Scope) String() string {
	var parts []string
	for _, p := range [3]*Policy{s.Config, s.Session, s.Request} {
		if !p.Empty() {
			a, d := p.Lists()
			parts = append(parts, fmt.Sprintf("%s: allow %v deny %v", p.Source, a, d))
		}
	}
	return strings.Join(parts, "; ")
}
