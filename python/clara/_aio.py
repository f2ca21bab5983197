# SPDX-License-Identifier: MIT
"""How asyncio code waits for Clara: the one place that decides it.

A call made from asyncio is submitted to Clara (clara_submit) and runs on
Clara's own threads; the awaiting task waits on a future. Each event loop
that awaits a call watches Clara's eventfd (clara_async_fd) with
add_reader; when it becomes readable, the loop takes the finished calls
(clara_async_take), collects their envelopes (clara_wait(h, 0)) and
resolves the futures of the loops that wait for them. No thread waits per
call.

Cancellation: cancelling the awaiting task cancels the call in Clara
(clara_cancel): an HTTP call or a chat stops; a tool already running
(Python or C) runs to its end and its result is dropped.

clara_async_take hands each finished call to one taker in the process. The
handles this module takes but did not submit (a C library or CLIPS in the
same process submitting its own) stay collectable with clara_wait by their
owner, but that owner does not see them in its own clara_async_take.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

T = TypeVar("T")

# The thread pool is kept for the one place that still needs it: a library
# that cannot make an eventfd.
MAX_WORKERS = 32

_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="clara-call")
            pool = _pool
    return pool


async def run(fn: Callable[..., T], *args: Any) -> T:
    """Run fn(*args) (a blocking Clara call) on the thread pool without
    blocking the running event loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), fn, *args)


# ---- Submitted calls ------------------------------------------------------------

# handle -> (loop, future) of every call this module submitted and not yet
# resolved. The lock is held from clara_submit to the insertion, and from
# clara_async_take to the removals, so a call cannot finish unseen.
_lock = threading.Lock()
_waiting: Dict[int, Tuple[asyncio.AbstractEventLoop, "asyncio.Future[bytes]"]] = {}
_watching: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()

CLARA_EBUSY = 6     # clara.h

_BUSY = json.dumps({"status": "error", "error": "rate_limited",
                    "message": "too many asynchronous calls running (async.max_running): "
                               "collect or cancel some first"}).encode()


def _take_string(lib: Any, ptr: Optional[int]) -> bytes:
    if not ptr:
        raise MemoryError("Clara returned NULL (malloc failed)")
    try:
        return ctypes.string_at(ptr)
    finally:
        lib.clara_free_string(ptr)


def _resolve(fut: "asyncio.Future[bytes]", envelope: bytes) -> None:
    if not fut.done():
        fut.set_result(envelope)


def _drain(lib: Any, fd: int) -> None:
    """On a loop's thread, when the eventfd is readable: hand every finished
    call this module submitted to the future that waits for it."""
    try:
        os.read(fd, 8)
    except (BlockingIOError, InterruptedError):
        pass        # another loop read it first
    with _lock:
        finished = json.loads(_take_string(lib, lib.clara_async_take(0)))
        ready = []
        for item in finished:
            entry = _waiting.pop(item["handle"], None)
            if entry is not None:
                ready.append((entry, _take_string(lib, lib.clara_wait(item["handle"], 0))))
    for (loop, fut), envelope in ready:
        try:
            if loop is asyncio.get_running_loop():
                _resolve(fut, envelope)
            else:
                loop.call_soon_threadsafe(_resolve, fut, envelope)
        except RuntimeError:
            pass    # that loop is closed: nobody awaits the call any more


def _watch(lib: Any, loop: asyncio.AbstractEventLoop) -> bool:
    """Make loop watch Clara's eventfd; False when there is none."""
    if loop in _watching:
        return True
    fd = lib.clara_async_fd()
    if fd < 0:
        return False
    loop.add_reader(fd, _drain, lib, fd)
    _watching.add(loop)
    return True


async def submit(lib: Any, request: bytes, evaluate_raw: Callable[[bytes], bytes]) -> bytes:
    """Submit request and return its envelope (JSON bytes) once finished,
    without blocking the running loop. evaluate_raw answers a request Clara
    refuses to submit: it is refused the same way before any tool runs."""
    loop = asyncio.get_running_loop()
    if not _watch(lib, loop):
        return await run(evaluate_raw, request)
    fut: "asyncio.Future[bytes]" = loop.create_future()
    with _lock:
        handle = lib.clara_submit(request)
        if handle > 0:
            _waiting[handle] = (loop, fut)
    if handle == -CLARA_EBUSY:
        return _BUSY
    if handle <= 0:
        return evaluate_raw(request)    # the error envelope, no tool runs
    try:
        return await fut
    except asyncio.CancelledError:
        with _lock:
            mine = _waiting.pop(handle, None) is not None
        if mine:
            lib.clara_cancel(handle)
            lib.clara_free_string(lib.clara_wait(handle, 0))   # the cancelled answer
        raise


def forget_after_fork() -> None:
    """In a fork() child: the parent's calls and loops are not this process's."""
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()
    _waiting.clear()
    _watching.clear()
