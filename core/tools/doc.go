// Package tools declares every built-in tool of Clara, one way: a
// toolbox.Builtin value each (name, description, schema, capabilities,
// visibility, run). All returns them; the engine registers them.
//
// Most tools are self-contained (echo, get_time, kv_*, math_eval,
// tools_list, audit_tail). The others reach the engine through the small
// interfaces of deps.go (Engine, Callbacks), which the engine implements:
// this package never imports the engine. Every tool is safe for concurrent
// calls.
//
// tools imports core/toolbox, core/protocol and core/session.
package tools
