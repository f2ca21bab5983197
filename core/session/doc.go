// Package session keeps what Clara holds in memory per session (SPEC §5.2):
// the rule history (context.history), the notices waiting for
// notifications_drain, and the session's layer of tool policy.
//
// The notice queue batches as the seed's accumulator does: Queue merges a
// notice into an identical one queued within the table's window
// (SetNoticeWindow: notices.dedupe_window_ms), counting it, and holds a
// deferred one (protocol.Notice's DeliverOn, DeliverAfterMS) until Release
// names its event in its session and its time has come; Drain hands out
// only what may be delivered. Queued is one entry of the queue with all
// that decides its delivery. A NoticeStore (SetNoticeStore: the shared
// PostgreSQL store) keeps the queues outside the process instead and
// merges, holds and releases in the same way; Release then asks it too,
// since another process may have queued what the event releases.
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
