# SPDX-License-Identifier: MIT
"""@clara.tool: a Python function (def or async def) registered as a tool,
its descriptor built from the signature, and the event loop that runs the
async ones.

A decorated function is called with keyword arguments, the JSON arguments
Clara validated against the schema (dataclass parameters rebuilt from their
objects). Its return value is sent as JSON (dataclasses as objects).

Async tools run on one event loop owned by this module, on its own daemon
thread ("clara-asyncio"), started with the first async tool. The thread of
Clara that runs the call waits for the coroutine's result. Inside an async
tool, call Clara with `await clara.call_async(...)`: a synchronous call
blocks the loop, and if it reaches another async tool, that tool cannot
start until the first call times out.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Dict, List, Mapping, Optional

from . import _binding, _json
from ._schema import function_schema, parameter_converters

if TYPE_CHECKING:
    from ._binding import Clara

AnyFunction = Callable[..., Any]


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

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run coroutine on the loop and wait for its result (from a thread
        that is not the loop's)."""
        loop = self.loop()
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("an async tool was called on Clara's event loop thread, which would wait "
                               "for itself; inside async tools call Clara with await clara.call_async()")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

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
            return LOOP.run(_in_call(_binding._current_call.get(), fn(**convert(arguments))))
        return invoke_async

    def invoke(arguments: Dict[str, Any]) -> Any:
        result = fn(**convert(arguments))
        if inspect.isawaitable(result):
            # A def returning an awaitable (a functools.partial of an async
            # function, say): run it on the loop too.
            return LOOP.run(_in_call(_binding._current_call.get(), result))
        return result
    return invoke


async def _in_call(call: Optional[_binding.ToolCall], awaitable: Awaitable[Any]) -> Any:
    """Awaits on the loop with clara.current_call() the tool's call: a task
    runs in a context of its own, so setting it here reaches no other."""
    _binding._current_call.set(call)
    return await awaitable


def descriptor(fn: AnyFunction, *, name: Optional[str], description: Optional[str],
               input_schema: Optional[Mapping[str, Any]], limits: Optional[Mapping[str, Any]],
               capabilities: Optional[List[str]], llm_visible: Optional[bool],
               on_caller_thread: Optional[bool] = None,
               changes_files: Optional[List[str]] = None) -> Dict[str, Any]:
    """The descriptor @tool registers for fn."""
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str):
        raise TypeError("clara.tool: %r has no __name__; give name=" % (fn,))
    out: Dict[str, Any] = {"name": tool_name}
    text = description if description is not None else inspect.getdoc(fn)
    if text:
        out["description"] = text
    if input_schema is not None:
        out["input_schema"] = dict(input_schema)
    else:
        out["input_schema"] = function_schema(fn, "clara.tool %s" % tool_name)
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
