# SPDX-License-Identifier: MIT
"""clara - Python for libclara: call tools, write tools, fire rules.

    import clara

    clara.call("echo", message="hello")          # -> {'message': 'hello'}
    clara.call("nonexistent")                     # raises clara.UnknownTool

    @clara.tool
    def area(width: float, height: float = 1.0) -> float:
        '''The area of a rectangle.'''
        return width * height

    clara.call("area", width=3, height=4)         # -> 12

The package needs only the standard library; it talks to libclara.so
through ctypes. The library is the copy bundled in the package (a wheel
carries one), else the file CLARA_LIBRARY names, else the soname
libclara.so.0 through the dynamic loader.

Calls: call() returns the tool's result or raises the ClaraError subclass
of the envelope's error code; evaluate() takes a whole request of the
protocol and returns the envelope as a dict, errors included. call_async()
and evaluate_async() are the same for asyncio code.

Threads: every function may be called from any thread at once (ctypes
releases the GIL during each call). Tools and the log handler run on
Clara's threads. Processes: after fork() a child must not use a library
its parent loaded (this package raises RuntimeError there); with
multiprocessing use the "spawn" start method.

See docs/python.md for the whole guide.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, Union, overload

from . import _approvals, _binding, _tools  # _tools and _approvals give _binding their functions
from ._binding import MISSING, Clara, LogHandler, Text, ToolCall, current_call
from ._errors import (Blocked, BudgetExhausted, ClaraError, Denied, InternalError, InvalidArgs, InvalidConfig,
                      InvalidJSON, InvalidRequest, LimitExceeded, OutputTooLarge, RateLimited, RegistrationError, Timeout, ToolError,
                      ToolFailed, Unavailable, UnknownTool, check)
from ._library import (CLARA_EBUSY, CLARA_EINTERNAL, CLARA_EINVAL, CLARA_ENOENT, CLARA_ENOMEM, CLARA_EPERM, CLARA_JSON_ARRAY,
                       CLARA_JSON_FALSE, CLARA_JSON_FLOAT, CLARA_JSON_INTEGER, CLARA_JSON_MISSING, CLARA_JSON_NULL,
                       CLARA_JSON_OBJECT, CLARA_JSON_STRING, CLARA_JSON_TRUE, CLARA_LOG_DEBUG, CLARA_LOG_ERROR,
                       CLARA_LOG_INFO, CLARA_LOG_OFF, CLARA_LOG_WARN, CLARA_OK, CLARA_VERSION,
                       CLARA_VERSION_MAJOR, CLARA_VERSION_MINOR, CLARA_VERSION_NUMBER, CLARA_VERSION_PATCH,
                       load_library)
from ._session import Session
from ._version import __version__

__all__ = [
    "__version__",
    # calls
    "call", "evaluate", "evaluate_raw", "check", "call_async", "evaluate_async",
    # tools
    "tool", "tools", "register_tool", "unregister_tool", "set_tool_limits", "current_call", "ToolCall",
    # rules of the host
    "register_rule", "unregister_rule",
    # configuration, events, sessions, logging
    "configure", "reset", "emit", "emit_raw", "Session", "set_log_handler", "set_event_handler",
    "set_input_handler", "set_approval_handler", "approvals", "decide_approval",
    "audit_reopen", "telemetry_flush",
    "mcp_listen", "mcp_serve_stdio", "mcp_stop",
    # the binding
    "Clara", "load_library", "version", "version_number", "strerror", "json_get", "json_get_raw", "json5_to_json", "MISSING",
    # errors
    "ClaraError", "InvalidJSON", "InvalidRequest", "UnknownTool", "InvalidArgs", "Denied", "RateLimited",
    "Timeout", "OutputTooLarge", "ToolFailed", "InternalError", "RegistrationError", "ToolError",
    "BudgetExhausted", "Blocked", "InvalidConfig", "LimitExceeded", "Unavailable",
    # constants of clara.h
    "CLARA_VERSION", "CLARA_VERSION_NUMBER", "CLARA_VERSION_MAJOR", "CLARA_VERSION_MINOR", "CLARA_VERSION_PATCH",
    "CLARA_OK", "CLARA_EINVAL", "CLARA_ENOMEM", "CLARA_EINTERNAL", "CLARA_ENOENT", "CLARA_EPERM", "CLARA_EBUSY",
    "CLARA_JSON_MISSING", "CLARA_JSON_NULL", "CLARA_JSON_FALSE", "CLARA_JSON_TRUE", "CLARA_JSON_INTEGER",
    "CLARA_JSON_FLOAT", "CLARA_JSON_STRING", "CLARA_JSON_ARRAY", "CLARA_JSON_OBJECT",
    "CLARA_LOG_DEBUG", "CLARA_LOG_INFO", "CLARA_LOG_WARN", "CLARA_LOG_ERROR", "CLARA_LOG_OFF",
]

F = TypeVar("F", bound=Callable[..., Any])
Request = Union[Mapping[str, Any], List[Any], Text]


def _get() -> Clara:
    c = _binding._default
    return c if c is not None else _binding.default()


# ---- Calls --------------------------------------------------------------------

def call(tool: str, /, **arguments: Any) -> Any:
    """Call a tool with keyword arguments and return its result (a Python
    value). Raises the ClaraError subclass of the error: UnknownTool,
    InvalidArgs, Denied, RateLimited, Timeout, OutputTooLarge, ToolFailed,
    InternalError, InvalidRequest, BudgetExhausted, Blocked, InvalidConfig,
    LimitExceeded, Unavailable."""
    return _get()._call(tool, arguments, None)


def evaluate(request: Request) -> Dict[str, Any]:
    """Serve one request of the protocol (a dict, or JSON text sent as is)
    and return the envelope as a dict; errors are envelopes, not exceptions
    (check() raises them)."""
    return _get().evaluate(request)


def evaluate_raw(request: Optional[Text]) -> str:
    """evaluate() with the envelope as text (see Clara.evaluate_raw)."""
    return _get().evaluate_raw(request)


async def call_async(tool: str, /, **arguments: Any) -> Any:
    """call() for asyncio code: the call runs in the background inside
    Clara, and the running event loop learns of its end through Clara's
    eventfd (no thread waits for it). Cancelling the awaiting task cancels
    the call: an HTTP call or a chat stops; a tool already running runs to
    its end and its result is dropped."""
    return await _get()._call_async(tool, arguments, None)


async def evaluate_async(request: Request) -> Dict[str, Any]:
    """evaluate() for asyncio code (see call_async for cancellation)."""
    return await _get().evaluate_async(request)


# ---- Tools --------------------------------------------------------------------

@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(fn: None = None, /, *, name: Optional[str] = None, description: Optional[str] = None,
         input_schema: Optional[Mapping[str, Any]] = None, limits: Optional[Mapping[str, Any]] = None,
         capabilities: Optional[List[str]] = None, llm_visible: Optional[bool] = None,
         on_caller_thread: Optional[bool] = None,
         changes_files: Optional[List[str]] = None,
         reports_changed_files: Optional[bool] = None, title: Optional[str] = None,
         annotations: Any = None, idempotent: Optional[bool] = None,
         output_schema: Optional[Mapping[str, Any]] = None,
         needs_approval: Union[bool, str, None] = None) -> Callable[[F], F]: ...


def tool(fn: Optional[Callable[..., Any]] = None, /, *, name: Optional[str] = None,
         description: Optional[str] = None, input_schema: Optional[Mapping[str, Any]] = None,
         limits: Optional[Mapping[str, Any]] = None, capabilities: Optional[List[str]] = None,
         llm_visible: Optional[bool] = None, on_caller_thread: Optional[bool] = None,
         changes_files: Optional[List[str]] = None,
         reports_changed_files: Optional[bool] = None, title: Optional[str] = None,
         annotations: Any = None, idempotent: Optional[bool] = None,
         output_schema: Optional[Mapping[str, Any]] = None,
         needs_approval: Union[bool, str, None] = None) -> Any:
    """Register a function as a tool; use as @clara.tool or
    @clara.tool(name=..., description=..., limits=..., capabilities=...,
    input_schema=..., llm_visible=..., on_caller_thread=...,
    changes_files=..., reports_changed_files=..., title=..., annotations=...,
    idempotent=..., output_schema=..., needs_approval=...). Returns the
    function unchanged.

    on_caller_thread=True runs the function on the thread of the call that
    asked for it instead of one of Clara's worker threads: no hand-over of
    the call (nor of Python's GIL) between threads, but its timeout can no
    longer cut it short (docs/tools.md). changes_files names the arguments
    (or JSON pointers into them) that hold paths the tool changes, for the
    file-change callbacks; reports_changed_files=True says the function's
    result lists the files it changed ({"changed_files": [...]}), which
    then fire those callbacks (without it that key is only data). title is
    a display name for MCP clients; needs_approval=True holds every call for
    a person's approval (set_approval_handler), or the id of an on_tool_call
    rule those its condition matches;
    annotations MCP's hints ({"readOnlyHint": True, ...}, or an
    mcp.types.ToolAnnotations), which replace those the capabilities give
    and are refused when the capabilities contradict them; idempotent: a
    second identical call changes nothing more.

    The input schema is built from the signature and type hints (int, float,
    str, bool, list[T], dict[str, T], Optional, Union, Literal, TypedDict,
    dataclasses, pydantic models, Annotated[T, "description"]); parameters
    with a default are not required; the docstring's Args: section (or
    NumPy's Parameters, or Sphinx's :param:) describes each parameter; an
    explicit input_schema= wins. The description is the rest of the
    docstring unless given. The name is the function's unless given. A
    return annotation that describes an object (TypedDict, dataclass,
    pydantic model, dict) is the output_schema, which Clara holds every
    result to (output_schema= gives one, {} none).

    The function is called with keyword arguments (dataclass and pydantic
    parameters rebuilt from their JSON objects); its return value is sent as
    JSON. An exception raised in it becomes tool_failed with "<Type>:
    <message>". An async def runs on an event loop the package owns, on its
    own thread. clara.current_call() inside it gives its session, whether
    it was cancelled, and progress and log messages to an MCP client.
    Raises TypeError for a hint it cannot express, RegistrationError when
    Clara refuses the descriptor."""
    return _tools.decorate(None, fn, name=name, description=description, input_schema=input_schema,
                    limits=limits, capabilities=capabilities, llm_visible=llm_visible,
                    on_caller_thread=on_caller_thread, changes_files=changes_files,
                    reports_changed_files=reports_changed_files, title=title,
                    annotations=annotations, idempotent=idempotent, output_schema=output_schema,
                    needs_approval=needs_approval)


def tools() -> List[Dict[str, Any]]:
    """The descriptors of every tool, built-in and registered."""
    return _get().tools()


def register_tool(descriptor: Union[Mapping[str, Any], Text], func: Callable[[Dict[str, Any]], Any]) -> Optional[str]:
    """Register func(arguments: dict) under a descriptor written by hand
    (see Clara.register_tool); returns the tool's name."""
    return _get().register_tool(descriptor, func)


def unregister_tool(name: Union[str, bytes]) -> None:
    """Remove a tool (see Clara.unregister_tool)."""
    _get().unregister_tool(name)


def set_tool_limits(name: str, limits: Union[Mapping[str, Any], Text]) -> Dict[str, Any]:
    """Change a registered tool's limits for the calls that start from now
    on (see Clara.set_tool_limits)."""
    return _get().set_tool_limits(name, limits)


def register_rule(descriptor: Union[Mapping[str, Any], Text], condition: Optional[Callable[..., Any]] = None,
                  action: Optional[Callable[..., Any]] = None) -> str:
    """Register a rule whose condition and action are Python callables
    (seed 004's registerRule); see Clara.register_rule."""
    return _get().register_rule(descriptor, condition, action)


def unregister_rule(id: str) -> None:
    """Remove a rule registered with register_rule; see
    Clara.unregister_rule."""
    _get().unregister_rule(id)


def json5_to_json(text: Text) -> str:
    """JSON5 text as compact JSON (see Clara.json5_to_json)."""
    return _get().json5_to_json(text)


# ---- Configuration, events, logging ---------------------------------------------

def configure(config: Union[Mapping[str, Any], Text, "os.PathLike[str]"]) -> Dict[str, Any]:
    """Apply configuration (a dict, TOML/JSON text, or the path of a file as
    a pathlib.Path) on top of the one in force; returns the envelope (see
    Clara.configure)."""
    return _get().configure(config)


def reset() -> Dict[str, Any]:
    """Back to the default configuration, dropping registered tools; returns
    the envelope."""
    return _get().reset()


def emit(event: Union[str, Mapping[str, Any]], payload: Any = None, session: Optional[str] = None,
         trace: bool = False) -> Dict[str, Any]:
    """Fire an event at the rules; returns the envelope (see Clara.emit)."""
    return _get().emit(event, payload, session, trace)


def emit_raw(event: Optional[Text]) -> str:
    """clara_emit with text in and text out (see Clara.emit_raw)."""
    return _get().emit_raw(event)


def audit_reopen() -> None:
    """Reopen the audit file after a log rotation moved it (see
    Clara.audit_reopen)."""
    _get().audit_reopen()


def telemetry_flush(timeout: float = 5.0) -> bool:
    """Export what telemetry holds now (see Clara.telemetry_flush)."""
    return _get().telemetry_flush(timeout)


def set_log_handler(handler: Optional[LogHandler], min_level: int = CLARA_LOG_INFO) -> None:
    """Send Clara's log messages to handler(level, message) (see
    Clara.set_log_handler); None restores stderr."""
    _get().set_log_handler(handler, min_level)


def set_event_handler(handler: Optional[Callable[[Dict[str, Any]], None]]) -> None:
    """Send the progress events of chats (token, tool_call, tool_result,
    answer, and ask_user's input_required and input_cancelled) to
    handler(event); None stops them (see Clara.set_event_handler)."""
    _get().set_event_handler(handler)


def set_input_handler(handler: Optional[Callable[[Dict[str, Any]], Optional[str]]]) -> None:
    """Let the ask_user tool ask the user: handler(request) returns the
    answer (str) or None to decline; None removes it. When the question's
    call is cancelled first, the event handler gets {"event":
    "input_cancelled", "id": request["id"], ...}, and handler should return
    soon: until it does the question holds a thread and counts against
    limits.max_open_questions (see Clara.set_input_handler)."""
    _get().set_input_handler(handler)


def set_approval_handler(handler: Optional[Callable[[Dict[str, Any]], Any]]) -> None:
    """Let handler(request) decide the tool calls that wait for a person's
    approval: it returns True, False, {"decision": "approve", "arguments":
    {...}}, {"decision": "reject", "reason": "..."}, or None to decide
    later with decide_approval(); an async def handler runs on the event
    loop of async tools and is cancelled when the approval stops waiting.
    None removes it: such calls are then rejected (see
    Clara.set_approval_handler)."""
    _get().set_approval_handler(handler)


def approvals() -> List[Dict[str, Any]]:
    """The tool calls waiting for approval (see Clara.approvals)."""
    return _get().approvals()


def decide_approval(id: int, approve: bool, *, reason: Optional[str] = None,
                    arguments: Optional[Dict[str, Any]] = None) -> None:
    """Decide a waiting approval from any thread (see
    Clara.decide_approval)."""
    _get().decide_approval(id, approve, reason=reason, arguments=arguments)


def mcp_listen(addr: str = "127.0.0.1:0") -> str:
    """Serve the tools over MCP (Streamable HTTP); return the URL."""
    return _get().mcp_listen(addr)


def mcp_serve_stdio(in_fd: int = 0, out_fd: int = 1) -> None:
    """Serve the tools over MCP on stdin/stdout until the client closes."""
    _get().mcp_serve_stdio(in_fd, out_fd)


def mcp_stop() -> None:
    """End every MCP session and listener."""
    _get().mcp_stop()


# ---- The rest of the C interface -------------------------------------------------

def version() -> str:
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _get().version()


def version_number() -> int:
    """The loaded library's version as major*1000000 + minor*1000 + patch."""
    return _get().version_number()


def strerror(code: int) -> str:
    """Describe a CLARA_E* status code."""
    return _get().strerror(code)


def json_get(doc: Request, path: Text, default: Any = MISSING) -> Any:
    """The value at a gjson path in a JSON document (see Clara.json_get)."""
    return _get().json_get(doc, path, default)


def json_get_raw(doc: Request, path: Text) -> Tuple[int, Optional[bytes]]:
    """clara_json_get as (kind, bytes) (see Clara.json_get_raw)."""
    return _get().json_get_raw(doc, path)
