package core

import "github.com/clara-lib/clara/core/toolbox"

// Test-only views of the engine's parts.

// Tools returns the engine's tool registry.
func (e *Engine) Tools() *toolbox.Registry { return e.tools }

// Audit returns the engine's audit.
func (e *Engine) Audit() *toolbox.Audit { return e.audit }

// Watching reports whether the rule watcher runs, and the folders it watches.
func (e *Engine) Watching() (bool, []string) {
	e.watcher.mu.Lock()
	defer e.watcher.mu.Unlock()
	var dirs []string
	for d := range e.watcher.dirs {
		dirs = append(dirs, d)
	}
	return e.watcher.w != nil, dirs
}
