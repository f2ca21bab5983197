// Package tools holds Clara's built-in tools. Each constructor returns a
// *toolbox.Tool ready to register; none keeps state outside its own value,
// and each is safe for concurrent calls.
//
// tools imports core/toolbox and core/protocol only.
package tools
