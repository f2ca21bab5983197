// Package state keeps rule state in SQLite: one JSON value per (scope, key),
// where a scope is a session.
//
// The database is a real SQLite (modernc.org/sqlite, transpiled to Go, no
// cgo) with one table,
//
//	state(scope TEXT, key TEXT, value TEXT, updated_at INTEGER /* unix ms */,
//	      PRIMARY KEY(scope, key)) WITHOUT ROWID
//
// and PRAGMA user_version recording the schema version for future
// migrations. A file database runs in WAL mode with synchronous=NORMAL: every
// commit is written to the WAL before Apply returns, so a process killed at
// any moment (SIGKILL included) loses no committed write and leaves a
// database that opens; only an operating-system crash or power loss can lose
// the last commits (never corrupt the file). Open with path "" gives a
// private in-memory database instead, one per Store.
//
// Rules read a session's whole state on every event, so Scope does not go
// to SQLite each time: each scope's decoded snapshot is built on first use
// and cached, and an Apply that touches a cached scope publishes a new
// snapshot (copy-on-write) once its transaction has committed. A cache hit is
// one lock-free map load. Snapshots are shared and immutable: callers must
// not modify the map Scope returns nor anything inside it. Numbers decode as
// float64, like encoding/json's default, because rule conditions compare
// numbers; Get returns the stored text, exact for any number. The cache
// assumes the Store is the only writer of its database: writes made by
// another process or another Store on the same file are not seen by scopes
// already cached.
//
// A Store is safe for concurrent use by any number of goroutines. Writes are
// serialised (one Apply at a time, each in one transaction, all or none);
// reads never wait for a cached scope and, in a file database, run in
// parallel with writes. The package starts no goroutines of its own.
//
// state imports only the standard library and the SQLite driver; it imports
// nothing else from Clara.
package state
