// Package rules is Clara's rule engine: rules written in TOML (or JSON)
// that watch hook points (the tool pipeline's on_tool_* events and the
// events a caller emits), test a condition in expr-lang or Lua, and act:
// notify, log, store state, chain events, deny a tool call, call a tool.
//
// Conditions are expr, or Python as the seed writes them (simpleeval's
// subset, translated into expr at load: pycond.go), or semantic: a text of
// the event compared with a concept by their embeddings, which the engine
// computes (the concepts' through Set.Concepts and BindConcepts before the
// set is used, the texts' through a Host that is an Embedder).
//
// A rule may also be the host's (host.go): a Source with HostFuncs, whose
// condition and action are functions of the program embedding Clara,
// called with the event as JSON.
//
// Load compiles a whole rule set once (conditions and templates included)
// with the configuration's thresholds bound into an immutable *Set, or
// reports every problem of every file as protocol.Problems (file, line,
// message). Fire evaluates one event against a Set; ParseTests and
// TestFile.Run run rule test files against it.
//
// Goroutines: a Set never changes and is safe for concurrent use; a
// reload builds a new one, and calls in flight finish with the set they
// started with. Fire calls its Host from the goroutine that called it and
// starts none.
//
// rules reaches the rest of Clara only through the Host interface the
// engine gives Fire (state, chained events, tool calls, logging). It
// imports core/protocol (JSON encoding, problems, notices), core/logging,
// core/fsread (script files, read inside Source.Root) and rulelua (Lua
// conditions and actions), and nothing else of Clara.
package rules
