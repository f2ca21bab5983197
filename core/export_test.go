package core

import "github.com/clara-lib/clara/core/toolbox"

// Test-only views of the engine's parts.

// Tools returns the engine's tool registry.
func (e *Engine) Tools() *toolbox.Registry { return e.tools }

// Audit returns the engine's audit.
func (e *Engine) Audit() *toolbox.Audit { return e.audit }
