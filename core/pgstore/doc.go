// Package pgstore is the state several Clara processes share, in one
// PostgreSQL database (store.backend = "postgres", issue 31): rule state,
// rate windows, budgets of calls per session, conversations, approvals
// waiting for a decision, session notices, and the log of rule changes
// that every process applies. core wires it in; the embedded default
// (SQLite for rule state, memory for the rest) does not use it at all.
//
// The schema is Clara's: Migrate creates and upgrades it (versioned
// migrations in clara_schema, each in a transaction, under an advisory
// lock so that processes starting together migrate once). It runs on a
// Store's first use, and again on the next use until it succeeds.
//
// Every operation is bounded by the statement timeout (and the caller's
// context). When the database is away, slow, or its connection was lost,
// the error wraps ErrUnavailable and names the store ("the shared store
// (PostgreSQL at HOST:PORT, database DB)": never the user or the
// password); the pool reconnects by itself on a later use. A write that
// returned nil was committed.
//
// Limits are decided in the database, not in the process: a rate window
// is one row per key, locked by the one statement that admits a call
// (clara_rate_admit), on the database's clock; a budget is one row
// updated only while under its limit.
//
// The package starts one goroutine, through Options.Go: the listener
// (jackc/pgxlisten) on a connection of its own, which LISTENs on the
// channel "clara" for the other processes' state changes (cached scopes
// are dropped), decided approvals and rule changes (told to Handlers), and
// reconnects after a loss. Close stops it.
//
// pgstore imports core/state (the checks of rule state's writes) and
// pgx; nothing else of Clara. pgtest starts the real PostgreSQL its tests
// and core's run against.
package pgstore
