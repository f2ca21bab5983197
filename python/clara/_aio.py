# SPDX-License-Identifier: MIT
"""How asyncio code waits for Clara: the one place that decides it.

Today a blocking call runs on a thread pool owned by this module, and the
awaiting task waits for it without blocking its event loop. A later version
of the C library offers completion through an eventfd (clara_submit and a
file descriptor the loop can watch); the switch to it happens here, behind
run(), and nothing else changes.

Cancellation, honestly: cancelling the task that awaits run() raises
CancelledError in it at once. A call that has not started yet never starts;
a call already running inside Clara runs to its end on its pool thread (a
tool cannot be interrupted through the C interface), and its result or error
is dropped.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, TypeVar

T = TypeVar("T")

# Enough for many calls waiting on slow tools at once; each idle thread
# costs little, and threads are started only as calls need them.
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
    """Run fn(*args) (a blocking Clara call) without blocking the running
    event loop, and return what it returns or raise what it raises."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), fn, *args)
