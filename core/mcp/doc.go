// Package mcp speaks the Model Context Protocol (revision 2025-11-25) in
// both directions, on the official Go SDK (github.com/modelcontextprotocol/go-sdk):
//
//   - Server serves the engine's tools to MCP clients over stdio (a pair of
//     streams, stdio.go keeping a session through bad lines and to the
//     last answer) and over the Streamable HTTP transport (each listener
//     with its own settings; sessions capped over all of them). Every tools/call goes
//     through Host.Call, the engine's whole pipeline; a Clara error is a
//     result with isError, as the specification asks of tool errors.
//   - Manager connects to configured MCP servers (a command over stdio, or a
//     URL) and turns their tools into ToolSpecs the engine registers as
//     Clara tools, under Clara's policy, rules, limits and audit.
//
// It imports core/protocol, core/toolbox, core/logging and core/secrets
// (the Manager cuts every secret out of what a server sends back), never
// the engine (core) nor core/rules: what it needs of the engine comes
// through the Host interface and the callbacks of ManagerOptions.
//
// Goroutines: Server runs one goroutine that keeps the served tool list in
// step with Host.Tools, one per session to see it end, and the SDK's own per
// connection; ServeStdio blocks its caller until EOF or Stop; Listen returns
// at once and serves on its own goroutines. Manager runs, per connected
// server, one goroutine watching the connection (restarting it with backoff
// when it dies) and one delivering OnToolsChanged. Every goroutine started
// here, and every handler the SDK calls, recovers panics: they are logged
// and become the call's error, never a crash. Close (of either) stops them
// all and returns once they are gone.
package mcp
