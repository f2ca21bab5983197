// Package resources holds what Clara offers MCP clients beside its tools:
// the resources of [[resources]] (a fixed text, a file under project_root,
// or a URI template whose {var} parts fill either) and the prompts of
// [[prompts]] (messages whose {argument} parts are filled from the
// client's arguments), with the values their variables and arguments
// offer for completion.
//
// Compile checks the configuration's tables once, when a configuration is
// prepared; a Set is immutable afterwards and safe for concurrent use.
// Reading a file goes through the ReadFile the engine gives (its reader
// of regular files, bounded), so that this package opens nothing itself.
// Which resources and prompts a caller may see is the engine's to decide
// (its policy names them as it names tools): this package only finds,
// reads and renders.
//
// It imports nothing of Clara but core/toolbox (names and content blocks)
// and starts no goroutine.
package resources
