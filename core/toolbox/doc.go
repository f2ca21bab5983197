// Package toolbox holds the registry of tools and runs one call of a tool.
//
// The registry is copy-on-write: lookups are one atomic load with no lock,
// so the call path never contends; registration and removal take a mutex
// among themselves and publish a new map. A *Tool is immutable once
// registered, so a call that looked a tool up keeps using it even if it is
// unregistered or replaced meanwhile.
//
// Schemas are compiled here too: a tool's input_schema, and ValueSchema
// for values that are not arguments (a chat's result_schema).
//
// toolbox imports only core/protocol and core/logging.
package toolbox
