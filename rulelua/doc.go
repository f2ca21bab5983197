// Package rulelua runs Lua (gopher-lua, Lua 5.1) in a sandbox for rule conditions, rule scripts and
// Lua tools.
//
// Compile parses and compiles a source once (prototypes are cached by name and source, so compiling
// the same text twice is cheap). A Script is immutable and may be run from many goroutines at once:
// every Run or Call borrows an LState from a bounded package-level pool, gives the script an empty
// global table, and returns the state to the pool only when the run finished without error.
//
// # Environment
//
// Scripts see base functions (assert, error, ipairs, next, pairs, pcall, print, rawequal, rawget,
// rawset, select, setmetatable, getmetatable, tonumber, tostring, type, unpack, xpcall, _G,
// _VERSION), string (without dump), table, math and os.time/os.clock/os.date. There is no load,
// loadstring, dofile, loadfile, require, module, package, getfenv, setfenv, collectgarbage,
// newproxy, io, debug, coroutine or channel. print goes to Host.Log at level "info".
//
// Call runs a Lua tool on decoded arguments; CallJSON takes the arguments as JSON text and returns
// the value as JSON, decoding into and encoding from Lua tables directly (no Go maps).
//
// The script API is ctx (read-only, see below; also named context), state.get, state.set, notify, log, emit, deny,
// ask, block, call_tool, progress, json.encode and json.decode. Actions (notify, state.set, emit, deny, ask, block) are
// collected and returned in Result; the host applies them only when the run returned no error.
// progress is not an action: it reaches a Host that is a ProgressHost at once.
//
// ctx is a read-only userdata: ctx.a.b converts one field at a time from the Go map, so a large
// context costs nothing until a script reads it. Maps are userdata (type() says "userdata"; pairs
// and json.encode understand them; # is 0), arrays are converted to fresh Lua tables when read.
//
// # Isolation
//
// Each run gets an empty global table (a new one, or the last run's when that run wrote nothing
// to it) whose protected metatable reads through to the state's environment; library tables are read-only proxies (assignment, rawset and the table functions
// refuse them); the string metatable is hidden behind __metatable; setmetatable accepts tables
// only, so the shared metatables of numbers, booleans, functions and strings cannot be replaced.
// A state is discarded after any error, timeout or limit.
//
// # Limits
//
// Every run has a deadline: from the context.Context, or Limits.Deadline (DefaultRuleDeadline,
// 50 ms) when the context has none. The VM polls the clock every 128 instructions and guarded Go
// functions poll it too; pcall and xpcall cannot catch a timeout or a limit error (they re-raise
// it), and a run that ends after its deadline is a timeout whatever it returned. Call stack (200
// frames) and registry (up to 128 Ki values) are fixed, so deep recursion is an error. Strings built
// by the library (.., string.rep, gsub, format, upper/lower/reverse, char, table.concat,
// json.encode, ...) are capped at Limits.MaxStringBytes each and Limits.MaxAllocBytes per run;
// substrings (string.sub, captures), error messages and values built by json.decode (estimated
// per table and entry) count against the per-run total too. next (and so pairs) polls the
// deadline on every call. Functions with more than 60 upvalues or 100000 instructions are
// compile errors (gopher-lua would miscompile them). The
// concatenation operator is rewritten at compile time into a call to a guarded function held in a
// local that scripts cannot name. Lua patterns run on a step-counted matcher (a port of Lua 5.1's
// lstrlib) that polls the deadline and limits recursion to 200 levels. Sources are capped at
// Limits.MaxSourceBytes and 200 levels of syntactic nesting before compiling.
//
// What a run holds (tables, strings, functions reachable from its globals and its call frames) is
// capped at Limits.MaxMemoryBytes (default 50 MiB): measured by a walk at the 1024th instruction and
// then whenever the process allocated half of what the cap still allows since the last walk (the
// Go runtime's allocation count, read every 1024 instructions). See memory.go and README.md.
//
// # Expressions and the seed's names
//
// A source that is one expression is compiled as "return <expression>" (the seed's conditions as
// they stand); context is ctx; context_above_threshold, tool_completed and tool_failed read ctx as
// the expr helpers do.
//
// # Errors
//
// Errors are *Error values with a Kind. A timeout unwraps to context.DeadlineExceeded (or
// context.Canceled when the caller's context was canceled), a limit unwraps to ErrLimit. No panic
// escapes Compile, Run or Call.
//
// The package imports nothing from the rest of Clara; the host reaches in only through Host.
package rulelua
