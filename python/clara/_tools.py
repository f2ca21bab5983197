# SPDX-License-Identifier: MIT
"""@clara.tool: a Python function (def or async def) registered as a tool,
its descriptor built from the signature, and the event loop that runs the
async ones.

A decorated function is called with keyword arguments, the JSON arguments
Clara validated against the schema (dataclass and pydantic parameters
rebuilt from their objects). Its return value is sent as JSON (dataclasses
and pydantic models as objects); a return annotation that describes an
object is the tool's output_schema, which Clara holds every result to.

Async tools run on one event loop owned by this module, on its own daemon
thread ("clara-asyncio"), started with the first async tool. The thread of
Clara that runs the call waits for the coroutine's result. Inside an async
tool, call Clara with `await clara.call_async(...)`: a synchronous call
blocks the loop, and if it reaches another async tool, that tool cannot
start until the first call times out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Dict, List, Mapping, Optional, Union

from . import _binding, _docstring, _json
from ._schema import function_schema, parameter_converters, return_schema

if TYPE_CHECKING:
    from ._binding import Clara

AnyFunction = _binding.AnyFunction


class _LoopThread:
    """An asyncio event loop running forever on a daemon thread of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                new_loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(new_loop)
                    new_loop.call_soon(ready.set)
                    new_loop.run_forever()

                thread = threading.Thread(target=main, name="clara-asyncio", daemon=True)
                thread.start()
                ready.wait()
                self._thread = thread
                self._loop = new_loop
                return new_loop
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, Any], call: Optional[_binding.ToolCall] = None) -> Any:
        """Run coroutine on the loop and wait for its result (from a thread
        that is not the loop's). When the tool's call is cancelled or runs
        past its deadline, the coroutine is cancelled (CancelledError in it)
        and so is the wait: the call's answer is dropped anyway."""
        loop = self.loop()
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("an async tool was called on Clara's event loop thread, which would wait "
                               "for itself; inside async tools call Clara with await clara.call_async()")
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        if call is None:
            return future.result()
        while True:
            try:
                return future.result(timeout=_CANCEL_POLL_S)
            except concurrent.futures.TimeoutError:
                if call.cancelled:
                    future.cancel()
                    raise concurrent.futures.CancelledError("the call was cancelled or ran past its timeout_ms") from None

    def stop(self) -> None:
        """At exit: cancel what still runs, stop the loop, join the thread."""
        with self._lock:
            maybe_loop, thread = self._loop, self._thread
        if maybe_loop is None or thread is None or not thread.is_alive():
            return
        loop: asyncio.AbstractEventLoop = maybe_loop

        def cancel_and_stop() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.call_soon(loop.stop)

        loop.call_soon_threadsafe(cancel_and_stop)
        thread.join(timeout=5)


# How often a thread waiting for an async tool asks whether its call was
# cancelled (clara_call_cancelled).
_CANCEL_POLL_S = 0.05

LOOP = _LoopThread()
_binding._shutdown_hooks.append(LOOP.stop)


def _invoker(fn: AnyFunction) -> Callable[[Dict[str, Any]], Any]:
    """What the tool's trampoline calls with the arguments dict."""
    converters = parameter_converters(fn)
    is_async = inspect.iscoroutinefunction(fn)

    def convert(arguments: Dict[str, Any]) -> Dict[str, Any]:
        for name, convert_one in converters.items():
            if name in arguments:
                arguments[name] = convert_one(arguments[name])
        return arguments

    if is_async:
        def invoke_async(arguments: Dict[str, Any]) -> Any:
            call = _binding._current_call.get()
            return LOOP.run(_in_call(call, fn(**convert(arguments))), call)
        return invoke_async

    def invoke(arguments: Dict[str, Any]) -> Any:
        result = fn(**convert(arguments))
        if inspect.isawaitable(result):
            # A def returning an awaitable (a functools.partial of an async
            # function, say): run it on the loop too.
            call = _binding._current_call.get()
            return LOOP.run(_in_call(call, result), call)
        return result
    return invoke


async def _in_call(call: Optional[_binding.ToolCall], awaitable: Awaitable[Any]) -> Any:
    """Awaits on the loop with clara.current_call() the tool's call: a task
    runs in a context of its own, so setting it here reaches no other."""
    _binding._current_call.set(call)
    return await awaitable


# MCP's hints (ToolAnnotations), as @tool(annotations=...) takes them.
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _annotations(value: Any) -> Dict[str, Any]:
    """annotations= as a dict of MCP's hints: a mapping, or an object with
    model_dump (mcp.types.ToolAnnotations); None values are left out. Its
    "title" is returned too, for the descriptor's title."""
    if isinstance(value, Mapping):
        items = dict(value)
    elif callable(getattr(value, "model_dump", None)):
        items = value.model_dump(exclude_none=True)
    else:
        raise TypeError("clara.tool: annotations is a dict of MCP's hints (%s), not %s"
                        % (", ".join(_HINTS), type(value).__name__))
    out: Dict[str, Any] = {}
    for key, hint in items.items():
        if hint is None:
            continue
        if key == "title":
            if not isinstance(hint, str):
                raise TypeError("clara.tool: annotations title must be str, not %s" % type(hint).__name__)
        elif key not in _HINTS:
            raise TypeError("clara.tool: unknown annotation %r (known: %s, title)" % (key, ", ".join(_HINTS)))
        elif not isinstance(hint, bool):
            raise TypeError("clara.tool: annotation %s must be a bool, not %s" % (key, type(hint).__name__))
        out[key] = hint
    return out


def descriptor(fn: AnyFunction, *, name: Optional[str], description: Optional[str],
               input_schema: Optional[Mapping[str, Any]], limits: Optional[Mapping[str, Any]],
               capabilities: Optional[List[str]], llm_visible: Optional[bool],
               on_caller_thread: Optional[bool] = None,
               changes_files: Optional[List[str]] = None,
               reports_changed_files: Optional[bool] = None,
               title: Optional[str] = None, annotations: Any = None,
               idempotent: Optional[bool] = None,
               output_schema: Optional[Mapping[str, Any]] = None,
               needs_approval: Union[bool, str, None] = None) -> Dict[str, Any]:
    """The descriptor @tool registers for fn."""
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str):
        raise TypeError("clara.tool: %r has no __name__; give name=" % (fn,))
    where = "clara.tool %s" % tool_name
    out: Dict[str, Any] = {"name": tool_name}
    doc, parameter_docs = _docstring.parse(inspect.getdoc(fn))
    text = description if description is not None else doc
    if text:
        out["description"] = text
    if input_schema is not None:
        out["input_schema"] = dict(input_schema)
    else:
        out["input_schema"] = function_schema(fn, where, parameter_docs)
    if output_schema is not None:
        if output_schema:        # {} declares none
            out["output_schema"] = dict(output_schema)
    else:
        derived = return_schema(fn, where)
        if derived is not None:
            out["output_schema"] = derived
    hints = _annotations(annotations) if annotations is not None else {}
    hint_title = hints.pop("title", None)
    if title is not None or hint_title is not None:
        out["title"] = title if title is not None else hint_title
    if idempotent is not None:
        out["idempotent"] = bool(idempotent)
    if hints:
        out["annotations"] = hints
    if capabilities is not None:
        out["capabilities"] = list(capabilities)
    if limits is not None:
        out["limits"] = dict(limits)
    if llm_visible is not None:
        out["llm_visible"] = bool(llm_visible)
    if on_caller_thread is not None:
        out["on_caller_thread"] = bool(on_caller_thread)
    if changes_files is not None:
        if isinstance(changes_files, (str, bytes)):
            raise TypeError("clara.tool: changes_files is a list of argument names or JSON pointers, not a string")
        out["changes_files"] = list(changes_files)
    if reports_changed_files is not None:
        out["reports_changed_files"] = bool(reports_changed_files)
    if needs_approval is not None:
        if not isinstance(needs_approval, (bool, str)):
            raise TypeError("clara.tool: needs_approval is True, False or a rule's id, not %s" % type(needs_approval).__name__)
        out["needs_approval"] = needs_approval
    return out


def decorate(client: Optional[Clara], fn: Optional[AnyFunction], **options: Any) -> Any:
    """@tool and @tool(...) (client None: the default instance at
    registration time)."""
    def register(f: AnyFunction) -> AnyFunction:
        if not callable(f):
            raise TypeError("clara.tool decorates a function, not %s" % type(f).__name__)
        desc = descriptor(f, **options)
        target = client if client is not None else _binding.default()
        target._register(_json.dumps(desc).encode("utf-8"), desc["name"], _invoker(f), "json")
        return f

    if fn is not None:
        return register(fn)
    return register


_binding._decorate = decorate
