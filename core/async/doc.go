// Package async runs calls in the background (SPEC §5.1): submit returns a
// handle at once, the call runs on a goroutine of its own, and its answer
// waits in a table until the host collects it — by waiting on the handle,
// or by watching an eventfd that becomes readable whenever an answer is
// ready (for event loops: epoll, libuv, asyncio's add_reader).
//
// The package knows nothing of requests or tools: the engine submits a
// function that computes an envelope. A Table is safe for concurrent use.
// Handles are never reused: they count up from 1.
//
// async imports only core/protocol and core/logging, and x/sys/unix for
// the eventfd.
package async
