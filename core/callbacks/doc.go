// Package callbacks runs shell scripts when files matching gitignore-style
// patterns change (SPEC §9): definitions, their storage under the state
// directory, activation per worker (session), matching, and running
// scripts in their own process groups, blocking or in the background.
//
// The engine wraps one Manager: the callback_* tools call Upsert, Toggle,
// List, Get and Trigger; the pipeline calls Trigger for a tool that reports
// changed_files or whose descriptor names them (changes_files), once per
// batch (a call, or a chat's turn); OnBackground hands background
// completions back. Callbacks the configuration declares ([[callbacks]],
// ParseConfigured) come in through Options.Configured, beside the stored
// ones.
//
// # What it may import
//
// The standard library, core/protocol, core/fsread (which reads its
// files: regular files only, bounded) and its own pattern package; never
// the engine. The host reaches it through Options and the Manager's
// methods.
//
// # Goroutines
//
// A Manager is safe for concurrent use. It starts a goroutine per running
// job and two per script run (its output, its exit), all through
// Options.Go when the host gives one (the engine's guarded starter), else
// through its own starter that recovers and logs a panic. A panic in a run
// becomes that run's failure; a panic in OnBackground is logged. Close
// stops the runs and waits for them (up to a bound).
package callbacks
