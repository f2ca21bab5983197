// Package fsread is the one way Clara reads a file it was told to read: a
// configuration file (CLARA_CONFIG, bin/clara --config), rule files and
// rule tests, the Lua scripts rules name, Lua tools' lua_file, plugin
// folders, the callbacks' own files under the state directory, and the
// audit file bin/clara audit tail reads.
//
// File reads a regular file of at most a given size: a named pipe, a
// device (/dev/zero, /dev/urandom), a socket or a directory is refused
// before it is opened, and again once it is, since the path may have
// changed in between; the open never blocks (O_NONBLOCK) and never makes
// a terminal the controlling one. A file that grows past the bound while
// it is read is refused too, so nothing is ever read without end.
//
// Open opens a regular file the same way, for a reader that follows a file
// as it grows (the audit file, which has no size bound) and bounds what it
// keeps itself.
//
// In reads a file the same way, and only if it lies inside a root folder
// once every symbolic link is resolved: it opens the file through an
// os.Root, which follows a link only while it stays inside the root, so a
// link swapped in between a check and the open cannot lead out either.
// Inside answers the same question without reading, for the matches of a
// glob. The errors say which rule was broken (ErrNotRegular, ErrTooLarge,
// ErrOutside) in words a user can act on.
//
// Which root applies to which file is the caller's decision, written
// where the file is named (core/rulefiles.go, core/plugins.go,
// core/configtools.go, core/rules/lua.go).
//
// # What it may import
//
// The standard library only; every package of Clara may import it.
//
// # Goroutines
//
// None. Every function is safe for concurrent use.
package fsread
