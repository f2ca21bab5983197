// Package session keeps what Clara holds in memory per session (SPEC §5.2):
// the rule history (context.history), the notices waiting for
// notifications_drain, and the session's layer of tool policy.
//
// A Table creates sessions on first use and frees them when a session ends,
// all but their policy: a session narrowed by the host stays narrowed after
// its end (only Reset and DropPolicies remove a policy).
// The one lock contract: a Session's methods are safe for concurrent use;
// each takes the session's own mutex for its duration only and never calls
// out (no callback, no other lock) while holding it. The Table itself takes
// no lock on lookups (sync.Map); the default session, which every call
// without a session uses, is a field, not a map entry.
//
// session imports only core/protocol and core/toolbox.
package session
