# SPDX-License-Identifier: MIT
"""Approvals (issue 28): a tool call that a rule's "ask" or its tool's
needs_approval holds waits for a person. set_approval_handler installs
the Python function (def or async def) that decides; approvals() lists
what waits; decide_approval() decides one from any thread.

A plain handler runs on Clara's thread and may block as long as the
person takes. An async def handler runs on the event loop this package
owns for async tools: the call is left pending while the coroutine
runs, its answer decides the approval through approval_decide, and the
coroutine is cancelled when the approval stops waiting (decided
elsewhere, timed out, its call cancelled), which a watcher on that loop
notices by asking approvals_list while coroutines run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional, Union, cast

from . import _binding, _json
from ._library import APPROVAL_FN

if TYPE_CHECKING:
    from ._binding import Clara

_log = logging.getLogger("clara")

#: What a handler returns: True (approve), False (reject), a dict
#: {"decision": "approve" | "reject", "reason": ..., "arguments": {...}},
#: or None (decide later with decide_approval, or let the timeout reject).
Decision = Union[bool, None, Dict[str, Any]]
ApprovalHandler = Callable[[Dict[str, Any]], Union[Decision, Awaitable[Decision]]]

# As for the input handler: Clara may still enter a replaced trampoline,
# so every trampoline stays alive for the life of the process; what a
# replaced one holds of the user's handler is dropped at once.
_lock = threading.Lock()
_box: List[Optional[ApprovalHandler]] = [None]
_kept: List[Any] = []
_lib: Any = None


def decision_json(answer: Decision) -> Optional[bytes]:
    """The JSON of a handler's answer, None for None."""
    if answer is None:
        return None
    if answer is True:
        return b'{"decision":"approve"}'
    if answer is False:
        return b'{"decision":"reject"}'
    if isinstance(answer, dict):
        if answer.get("decision") not in ("approve", "reject"):
            raise ValueError('a decision needs "decision": "approve" or "reject", not %r' % (answer.get("decision"),))
        return _json.dumps(answer).encode("utf-8")
    raise TypeError("an approval handler returns True, False, a dict or None, not %s" % type(answer).__name__)


def _rejection(why: str) -> int:
    ptr = _binding._libc.strdup(_json.dumps({"decision": "reject", "reason": why}).encode("utf-8"))
    return int(ptr) if ptr else 0


def _make_trampoline(box: List[Optional[ApprovalHandler]], owner: Clara) -> Any:
    def trampoline(_userdata: Any, request: Optional[bytes]) -> Optional[int]:
        # Runs on a Clara (Go-owned) thread. Nothing may escape into C: a
        # handler that fails rejects the call.
        handler = box[0]
        if handler is None:
            return _rejection("the approval handler was removed")
        try:
            req = _json.loads(request.decode("utf-8")) if request is not None else {}
            if inspect.iscoroutinefunction(handler):
                _start(owner, handler, req)
                return None   # decided by the coroutine, through approval_decide
            answer = handler(req)
            if inspect.isawaitable(answer):
                raise TypeError("a handler that returns an awaitable must be an async def")
            data = decision_json(cast(Decision, answer))
            if data is None:
                return None
            ptr = _binding._libc.strdup(data)
            return int(ptr) if ptr else None
        except BaseException as e:  # noqa: B036 - swallow everything, by design
            try:
                _log.warning("the approval handler failed; the call is rejected", exc_info=True)
            except BaseException:  # noqa: B036
                pass
            return _rejection("the approval handler raised %s" % type(e).__name__)

    return APPROVAL_FN(trampoline)


def set_approval_handler(owner: Clara, handler: Optional[ApprovalHandler]) -> None:
    """See Clara.set_approval_handler."""
    global _box, _lib
    if handler is not None and not callable(handler):
        raise TypeError("handler must be callable or None")
    with _lock:
        box: List[Optional[ApprovalHandler]] = [handler]
        new = None if handler is None else _make_trampoline(box, owner)
        if new is not None:
            _kept.append(new)
        owner._lib.clara_set_approval_handler(new if new is not None else APPROVAL_FN(), None)
        _box[0] = None   # the old handler: approvals already inside it go on
        _box = box
        _lib = owner._lib if new is not None else None


def _at_exit() -> None:
    global _lib
    with _lock:
        if _lib is not None:
            try:
                _lib.clara_set_approval_handler(APPROVAL_FN(), None)
            except Exception:
                pass
            _lib = None
            _box[0] = None


_binding._shutdown_hooks.append(_at_exit)


# ---- async def handlers -----------------------------------------------------------

# approval id -> the future of its coroutine on the package's loop.
_running: Dict[int, "concurrent.futures.Future[None]"] = {}
_running_lock = threading.Lock()
_watching = False

# How often the watcher asks which approvals still wait.
_WATCH_S = 0.1


def _start(owner: Clara, handler: ApprovalHandler, req: Dict[str, Any]) -> None:
    from ._tools import LOOP   # the event loop of async tools (imported late: _tools imports _binding)
    global _watching
    loop = LOOP.loop()
    ident = int(req.get("id", 0))
    timeout = max(float(req.get("timeout_ms", 0)) / 1000.0, 0.001)

    async def run() -> None:
        try:
            answer = await asyncio.wait_for(handler(req), timeout)  # type: ignore[arg-type]
            data = decision_json(answer)
        except asyncio.CancelledError:
            return    # the approval no longer waits
        except asyncio.TimeoutError:
            return    # Clara rejects it on its own
        except BaseException as e:  # noqa: B036
            _log.warning("the approval handler failed; the call is rejected", exc_info=True)
            data = _json.dumps({"decision": "reject", "reason": "the approval handler raised %s" % type(e).__name__}).encode()
        if data is None:
            return
        decision = _json.loads(data.decode("utf-8"))
        arguments: Dict[str, Any] = {"id": ident, "decision": decision["decision"]}
        for key in ("reason", "arguments"):
            if key in decision:
                arguments[key] = decision[key]
        env = owner.evaluate({"tool": "approval_decide", "arguments": arguments})
        if env.get("status") != "success":
            _log.warning("approval %d: %s", ident, env.get("message"))

    future = asyncio.run_coroutine_threadsafe(run(), loop)
    with _running_lock:
        _running[ident] = future
        start_watcher = not _watching
        _watching = True
    future.add_done_callback(lambda _f: _forget(ident))
    if start_watcher:
        asyncio.run_coroutine_threadsafe(_watch(owner), loop)


def _forget(ident: int) -> None:
    with _running_lock:
        _running.pop(ident, None)


async def _watch(owner: Clara) -> None:
    """Cancels the coroutines of approvals that no longer wait; ends when
    none runs."""
    global _watching
    while True:
        await asyncio.sleep(_WATCH_S)
        with _running_lock:
            if not _running:
                _watching = False
                return
            running = dict(_running)
        env = owner.evaluate({"tool": "approvals_list"})
        if env.get("status") != "success":
            continue
        waiting = {a["id"] for a in env["result"]["approvals"]}
        for ident, future in running.items():
            if ident not in waiting:
                future.cancel()


# ---- approvals_list and approval_decide --------------------------------------------

def approvals(owner: Clara) -> List[Dict[str, Any]]:
    """See Clara.approvals."""
    result = owner.call("approvals_list")
    return result["approvals"]  # type: ignore[no-any-return]


def decide_approval(owner: Clara, ident: int, approve: bool, reason: Optional[str] = None,
                    arguments: Optional[Dict[str, Any]] = None) -> None:
    """See Clara.decide_approval."""
    args: Dict[str, Any] = {"id": ident, "decision": "approve" if approve else "reject"}
    if reason is not None:
        args["reason"] = reason
    if arguments is not None:
        args["arguments"] = arguments
    owner.call("approval_decide", **args)


_binding._approval_ops.update(set_approval_handler=set_approval_handler, approvals=approvals,
                              decide_approval=decide_approval)
