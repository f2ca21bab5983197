// Package rules is Clara's rule engine: rules written in TOML (or JSON)
// that watch hook points (the tool pipeline's on_tool_* events and the
// events a caller emits), test a condition in expr-lang, and act: notify,
// log, store state, chain events, deny a tool call, call a tool.
//
// Load compiles a whole rule set once (conditions and templates included)
// into an immutable *Set; Fire evaluates one event against it. A Set is safe
// for concurrent use and never changes; a reload builds a new one, and
// calls in flight finish with the set they started with.
//
// rules reaches the rest of Clara only through the Host interface the
// engine gives Fire (state, tool calls, logging). It imports core/protocol
// for JSON encoding and core/logging, and nothing else of Clara.
package rules
