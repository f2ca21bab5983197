# SPDX-License-Identifier: MIT
"""The binding: the Clara class over the loaded library, the process-wide
keep-alives of Python tools and of the log handler, and the shared default
instance behind the module-level functions.

Ownership (what this module guarantees):
  * Everything passed in (dicts, str, bytes) is copied or borrowed only for
    the duration of the call; Clara keeps nothing.
  * Every char * the library returns is copied into Python (ctypes.string_at)
    and freed with clara_free_string() before the function returns.
  * The log handler's ctypes callback is kept alive (a module global) while
    it is installed and dropped once clara_set_log_handler() has returned,
    which guarantees the old one is idle.
  * A tool's ctypes callback and Python function are kept alive (a module
    dict keyed by the integer given to Clara as userdata) until Clara calls
    free_userdata, which it does exactly once, after the tool was
    unregistered, replaced or dropped by reset() and its last running call
    returned (or at once when the registration failed).
  * Nothing raised inside a tool or a log handler crosses into C: a tool's
    exception becomes clara_call_error, a handler's is swallowed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import ctypes
import json
import logging
import os
import stat
import threading
import weakref
from types import TracebackType
from typing import (Any, Callable, Dict, List, Mapping, Optional, Tuple, Type,
                    TypeVar, Union, overload)

from . import _aio, _json
from ._errors import ClaraError, InternalError, RegistrationError
from ._library import (CLARA_EINVAL, CLARA_ENOMEM, CLARA_JSON_ARRAY, CLARA_JSON_FALSE, CLARA_JSON_FLOAT,
                       CLARA_JSON_INTEGER, CLARA_JSON_MISSING, CLARA_JSON_NULL, CLARA_JSON_OBJECT,
                       CLARA_JSON_STRING, CLARA_JSON_TRUE, CLARA_LOG_DEBUG, CLARA_LOG_ERROR, CLARA_LOG_INFO,
                       CLARA_LOG_OFF, CLARA_LOG_WARN, CLARA_OK, FREE_FN,
                       EVENT_FN, INPUT_FN, LOG_FN, TOOL_FN, declare, load_library)

AnyFunction = Callable[..., Any]

# clara.tool's decorator (_tools.decorate), set by _tools when the package
# imports it: _tools is built on this module, and this module imports
# nothing of it, so the package's imports go one way.
_decorate: Optional[Callable[..., Any]] = None
# The approval functions (set_approval_handler, approvals, decide_approval),
# set by _approvals when the package imports it, for the same reason.
_approval_ops: Dict[str, Callable[..., Any]] = {}

F = TypeVar("F", bound=Callable[..., Any])

#: A request or a configuration: a dict (sent as JSON) or JSON/TOML text.
Text = Union[str, bytes, bytearray, memoryview]

_log = logging.getLogger("clara")


class _Missing:
    """The type of MISSING. There is one instance; compare with `is`."""

    __slots__ = ()
    _instance: Optional[_Missing] = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "clara.MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> Tuple[Type[_Missing], Tuple[()]]:
        return (_Missing, ())


#: What json_get() returns when nothing is at the path (CLARA_JSON_MISSING).
#: It is distinct from None, which stands for a JSON null. It is falsy.
MISSING = _Missing()


# ---- Helpers ----------------------------------------------------------------

def _to_bytes(value: Optional[Text], what: str) -> Optional[bytes]:
    """str -> UTF-8 bytes; bytes/bytearray/memoryview -> bytes; None -> None
    (a NULL pointer). Refuses embedded NULs, which C would silently cut."""
    if value is None:
        return None
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError("%s must be str or bytes, not %s" % (what, type(value).__name__))
    if b"\0" in data:
        raise ValueError("%s contains a NUL byte, which the C interface cannot carry "
                         "(write it as \\u0000 inside a JSON string)" % what)
    return data


# The largest configuration file read, as Clara's own bound on one
# (core.MaxConfigFile: CLARA_CONFIG, bin/clara --config).
_MAX_CONFIG_FILE = 16 << 20


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _read_config_file(path: "os.PathLike[str]") -> bytes:
    """The bytes of a configuration file, read as Clara reads the files it
    is named (core/fsread): a regular file of at most 16 MiB. A named pipe
    or a device raises ValueError at once instead of waiting on it or
    reading it without end."""
    name = os.fspath(path)
    # Refused before the open, which alone can have effects on a device.
    try:
        mode = os.stat(name).st_mode
    except OSError:
        mode = stat.S_IFREG  # the open says why
    if not stat.S_ISREG(mode):
        raise ValueError(f"{name} is {_file_kind(mode)}, not a regular file")
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{name} is {_file_kind(info.st_mode)}, not a regular file")
        if info.st_size > _MAX_CONFIG_FILE:
            raise ValueError(f"{name} is {info.st_size} bytes, over the {_MAX_CONFIG_FILE}-byte limit")
        data = f.read(_MAX_CONFIG_FILE + 1)
        if len(data) > _MAX_CONFIG_FILE:
            raise ValueError(f"{name} grew past the {_MAX_CONFIG_FILE}-byte limit while it was read")
        return data


def _json_bytes(value: Any, what: str) -> Optional[bytes]:
    """dict/list -> compact JSON in UTF-8; str/bytes -> verbatim."""
    if isinstance(value, (dict, list)):
        return _json.dumps(value).encode("utf-8")
    return _to_bytes(value, what)


def _error_text(exc: BaseException) -> bytes:
    """"<ExceptionType>: <message>" (just the type when the message is
    empty), as bytes C can carry (UTF-8, no NUL)."""
    try:
        msg = str(exc)
    except BaseException:  # noqa: B036 - a broken __str__
        msg = ""
    text = "%s: %s" % (type(exc).__name__, msg) if msg else type(exc).__name__
    return text.encode("utf-8", "replace").replace(b"\0", b"\\0")


# ---- fork() -----------------------------------------------------------------

# Every Clara instance, so that a fork() child can disarm them all.
_instances: "weakref.WeakSet[Clara]" = weakref.WeakSet()
_forked = False
_FORK_MESSAGE = ("clara: this process was created by fork() from a process that had loaded libclara; "
                 "the Go runtime inside the library does not survive fork(), so this process cannot use "
                 "Clara. With multiprocessing, use the \"spawn\" start method "
                 "(multiprocessing.get_context(\"spawn\")).")


def _refuse(*_args: Any) -> Any:
    raise RuntimeError(_FORK_MESSAGE)


class _ForkedLibrary:
    """Stands in for the CDLL in a fork() child: every function raises."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return _refuse


def _after_fork_in_child() -> None:
    # Runs in the child, which has one thread. A library loaded by the parent
    # is unusable here (its Go threads were not copied); one never loaded is
    # fine to load now.
    global _forked
    live = list(_instances)
    if not live:
        return
    _forked = True
    for instance in live:
        instance._disarm()
    _aio.forget_after_fork()    # its threads and calls stayed in the parent


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- Log handler --------------------------------------------------------------

# The log handler is process-wide (the library is loaded once per process),
# so its keep-alive is module-wide too, not per Clara instance.
_log_lock = threading.Lock()
_log_keepalive: Any = None   # the installed LOG_FN object, or None
_log_lib: Any = None         # the library it was installed in

LogHandler = Callable[[int, str], Any]


def _make_log_trampoline(handler: LogHandler) -> Any:
    def trampoline(_userdata: Any, level: int, message: Optional[bytes]) -> None:
        # Runs on a Clara (Go-owned) thread. Nothing may escape into C.
        try:
            text = message.decode("utf-8", "replace") if message is not None else ""
            handler(level, text)
        except BaseException:  # noqa: B036 - swallow everything, by design
            pass
    return LOG_FN(trampoline)


# ---- Event handler -----------------------------------------------------------------

# Like the log handler: process-wide, kept alive module-wide.
EventHandler = Callable[[Dict[str, Any]], None]
_event_lock = threading.Lock()
_event_keepalive: Any = None
_event_lib: Any = None


def _make_event_trampoline(handler: EventHandler) -> Any:
    def trampoline(_userdata: Any, event: Optional[bytes]) -> None:
        # Runs on a Clara (Go-owned) thread. Nothing may escape into C.
        try:
            handler(_json.loads(event.decode("utf-8")) if event is not None else {})
        except BaseException:  # noqa: B036 - swallow everything, by design
            pass
    return EVENT_FN(trampoline)


# ---- Input handler (ask_user) -------------------------------------------------

# Process-wide like the event handler. Clara may still enter a replaced
# trampoline (a question that found it just before the replacement), and a
# user may take minutes inside it, so every trampoline stays alive for the
# life of the process: a small object. What a replaced one holds of the
# user's handler is dropped at once (its box is emptied; a question that
# enters it afterwards is declined).
InputHandler = Callable[[Dict[str, Any]], Optional[str]]
_input_lock = threading.Lock()
_input_current: Any = None
_input_box: List[Optional[InputHandler]] = [None]   # the current trampoline's handler
_input_kept: List[Any] = []                          # every trampoline ever installed
_input_lib: Any = None

_libc = ctypes.CDLL(None)
_libc.strdup.argtypes = [ctypes.c_char_p]
_libc.strdup.restype = ctypes.c_void_p


def _make_input_trampoline(box: List[Optional[InputHandler]]) -> Any:
    def trampoline(_userdata: Any, request: Optional[bytes]) -> Optional[int]:
        # Runs on a Clara (Go-owned) thread. Nothing may escape into C: an
        # exception or an answer that is not str declines.
        handler = box[0]
        if handler is None:
            return None   # replaced meanwhile
        try:
            req = _json.loads(request.decode("utf-8")) if request is not None else {}
            answer = handler(req)
            if answer is None:
                return None
            if not isinstance(answer, str):
                raise TypeError("an input handler must return str or None, not %s" % type(answer).__name__)
            # malloc'd by the C library: Clara frees it with free().
            ptr = _libc.strdup(answer.encode("utf-8", "replace").replace(b"\0", b""))
            return int(ptr) if ptr else None
        except BaseException:  # noqa: B036 - swallow everything, by design
            try:
                _log.warning("the input handler failed; the question counts as declined", exc_info=True)
            except BaseException:  # noqa: B036
                pass
            return None

    return INPUT_FN(trampoline)


# ---- Tools ----------------------------------------------------------------------

class _ToolEntry:
    """What the keep-alive holds for one registration."""

    __slots__ = ("callback", "func", "name")

    def __init__(self, callback: Any, func: Callable[..., Any], name: Optional[str]) -> None:
        self.callback = callback
        self.func = func
        self.name = name

    def __repr__(self) -> str:
        return "<tool %r>" % self.name


# _tool_keepalive maps the integer id given to Clara as userdata to the
# entry. An entry is added before clara_register_tool is called and removed
# only by _free_userdata, which Clara calls exactly once when it no longer
# needs the callback.
_tool_lock = threading.Lock()
_tool_keepalive: Dict[int, _ToolEntry] = {}
_tool_next_id = 1          # never 0: userdata 0 would be a NULL pointer
_tool_lib: Any = None      # the library the tools were registered in (for atexit)
# name -> id of the latest successful Python registration of that name still
# alive; lets a Clara instance used as a context manager unregister only
# what is still its own.
_tool_current: Dict[str, int] = {}


def _free_userdata(userdata: Optional[int]) -> None:
    # Runs on whatever thread Clara releases the tool from (the caller of
    # clara_unregister_tool/clara_register_tool/clara_reset, or the thread
    # of the tool's last running call). Nothing may escape into C.
    entry = None
    try:
        with _tool_lock:
            entry = _tool_keepalive.pop(userdata or 0, None)
            if entry is not None and entry.name is not None and _tool_current.get(entry.name) == userdata:
                del _tool_current[entry.name]
        # The callback and func die here, outside the lock (a __del__ of
        # func may do anything, register a tool included).
        entry = None
    except BaseException:  # noqa: B036 - swallow everything, by design
        pass


# Module-level and never dropped: Clara may call it at any time, for tools
# registered through any Clara instance.
_FREE_USERDATA = FREE_FN(_free_userdata)


class ToolCall:
    """The call of a Python tool that is running: clara.current_call()
    inside the tool returns it. Requests made through it run inside the
    call (clara_call_evaluate): in the tool's session, under the policy of
    the request that called the tool (their own "policy" narrows it, never
    widens it), one level deeper, and never reaching the tool itself or a
    tool that called it. Calls made with clara.call() instead escape all of
    that. It is valid only while the tool runs: afterwards every request
    answers invalid_request.

    It also tells the tool about its call (session, cancelled) and lets it
    tell the MCP client that called it how it goes (progress, log)."""

    __slots__ = ("_lib", "_handle", "name", "_session")

    def __init__(self, lib: Any, handle: Optional[int], name: Optional[str]) -> None:
        self._lib = lib
        self._handle = handle
        #: the tool's name, as registered
        self.name = name
        self._session: Optional[str] = None

    def __repr__(self) -> str:
        return "<clara.ToolCall of %r>" % (self.name,)

    @property
    def session(self) -> str:
        """The session the call runs in ("default" when its request named
        none). RuntimeError when asked first after the tool returned."""
        if self._session is None:
            ptr = self._lib.clara_call_session(self._handle)
            if not ptr:
                raise RuntimeError("clara.ToolCall.session: the call is no longer running")
            try:
                self._session = ctypes.string_at(ptr).decode("utf-8", "replace")
            finally:
                self._lib.clara_free_string(ptr)
        return self._session

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled (clara.call_async's task
        cancelled, an MCP client's notifications/cancelled) or ran past its
        timeout_ms: its answer will be dropped, so a long tool can stop
        early. Clara cannot interrupt Python code; an async tool's
        coroutine is cancelled for it."""
        return bool(self._lib.clara_call_cancelled(self._handle))

    def progress(self, done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
        """Report done units of total (None: unknown) with an optional
        message. When an MCP client asked for the call's progress it gets
        notifications/progress; otherwise nothing happens. Values that do
        not increase are dropped."""
        self._lib.clara_call_progress(self._handle, float(done), float(total or 0),
                                      _to_bytes(message, "message"))

    def log(self, message: str, level: Union[str, int] = "info") -> None:
        """Send message to the MCP client that called the tool
        (notifications/message, logger: the tool's name) when the client's
        log level (logging/setLevel) is at or below level: "debug",
        "info", "warning" or "error" (or a CLARA_LOG_* value). Outside
        MCP, nothing happens; use Python's logging for your own log."""
        code = _CLIENT_LOG_LEVELS.get(level) if isinstance(level, str) else level
        if not isinstance(code, int) or isinstance(code, bool) or not CLARA_LOG_DEBUG <= code <= CLARA_LOG_ERROR:
            raise ValueError("level must be \"debug\", \"info\", \"warning\" or \"error\", not %r" % (level,))
        self._lib.clara_call_log(self._handle, code, _to_bytes(message, "message"))

    def debug(self, message: str) -> None:
        """log(message, "debug")."""
        self.log(message, "debug")

    def info(self, message: str) -> None:
        """log(message, "info")."""
        self.log(message, "info")

    def warning(self, message: str) -> None:
        """log(message, "warning")."""
        self.log(message, "warning")

    def error(self, message: str) -> None:
        """log(message, "error")."""
        self.log(message, "error")

    def _evaluate_bytes(self, request: bytes) -> bytes:
        ptr = self._lib.clara_call_evaluate(self._handle, request)
        if not ptr:
            raise MemoryError("clara_call_evaluate returned NULL (malloc failed)")
        try:
            return ctypes.string_at(ptr)
        finally:
            self._lib.clara_free_string(ptr)

    def evaluate(self, request: Union[Mapping[str, Any], List[Any], Text]) -> Dict[str, Any]:
        """Serve request inside this call and return the envelope as a dict
        (errors as error envelopes, as Clara.evaluate does)."""
        if isinstance(request, Mapping) and not isinstance(request, dict):
            request = dict(request)
        data = _json_bytes(request, "request")
        if data is None:
            raise TypeError("request must be a dict, a list, str or bytes, not None")
        return _json.loads(self._evaluate_bytes(data).decode("utf-8"))  # type: ignore[no-any-return]

    def call(self, tool: str, /, **arguments: Any) -> Any:
        """Call a tool inside this call: its result, or the ClaraError
        subclass of the error code. call("chat", prompt=...) runs a nested
        chat, whose model is never offered this tool."""
        return Clara._result(self._evaluate_bytes(Clara._request(tool, arguments, None)))

    async def call_async(self, tool: str, /, **arguments: Any) -> Any:
        """call() for async tools: the request runs on a thread of its own,
        so the event loop goes on meanwhile."""
        request = Clara._request(tool, arguments, None)
        return Clara._result(await asyncio.get_running_loop().run_in_executor(None, self._evaluate_bytes, request))


_CLIENT_LOG_LEVELS = {"debug": CLARA_LOG_DEBUG, "info": CLARA_LOG_INFO, "warning": CLARA_LOG_WARN,
                      "warn": CLARA_LOG_WARN, "error": CLARA_LOG_ERROR}

#: The call of the tool running in this context (a thread running a
#: synchronous tool, the task running an async one).
_current_call: contextvars.ContextVar[Optional[ToolCall]] = contextvars.ContextVar("clara_current_call", default=None)


def current_call() -> ToolCall:
    """The call of the Python tool running here; RuntimeError outside a tool."""
    call = _current_call.get()
    if call is None:
        raise RuntimeError("clara.current_call() is only meaningful inside a tool, while it runs")
    return call


def _make_tool_trampoline(lib: Any, invoke: Callable[[Dict[str, Any]], Any], returns: str,
                          name: Optional[str]) -> Any:
    """The TOOL_FN that runs invoke(arguments) for Clara. It returns 0 after
    setting the result with clara_call_result, or 1 after clara_call_error."""
    call_result, call_error = lib.clara_call_result, lib.clara_call_error

    def trampoline(_userdata: Any, arguments: Optional[bytes], call: Any) -> int:
        # Runs on a Clara (Go-owned) thread, with the GIL taken by ctypes.
        # Nothing may escape into C: every exception becomes a tool error.
        try:
            args = _json.loads(arguments.decode("utf-8")) if arguments is not None else {}
            token = _current_call.set(ToolCall(lib, call, name))
            try:
                result = invoke(args)
            finally:
                _current_call.reset(token)
            if returns == "string":
                if not isinstance(result, str):
                    raise TypeError('a "returns": "string" tool must return str, not %s'
                                    % type(result).__name__)
                data = _to_bytes(result, "the tool's result")
            else:
                data = _json.dumps(result).encode("utf-8")
            call_result(call, data)
            return 0
        except BaseException as e:  # noqa: B036 - by design
            try:
                call_error(call, _error_text(e))
                if _log.isEnabledFor(logging.DEBUG):
                    _log.debug("tool %r raised %s", name, type(e).__name__, exc_info=True)
            except BaseException:  # noqa: B036
                pass
            return 1
    return TOOL_FN(trampoline)


# Functions run at exit after the tools are unregistered (the event loop of
# async tools stops there).
_shutdown_hooks: List[Callable[[], None]] = []


@atexit.register
def _at_exit() -> None:
    global _log_keepalive, _log_lib, _event_keepalive, _event_lib, _input_current, _input_lib
    if _forked:
        return   # the child of a fork() must not call the library, even now
    # What telemetry holds in its batches goes out before the process does
    # (a collector that is down costs at most two seconds).
    if _default is not None:
        try:
            _default._lib.clara_telemetry_flush(2000)
        except Exception:
            pass
    # No new call may enter the interpreter while it shuts down. (Calls that
    # are still running cannot be stopped; they should have returned.)
    with _tool_lock:
        lib = _tool_lib
        names = sorted({e.name for e in _tool_keepalive.values() if e.name})
    if lib is not None:
        for name in names:
            try:
                lib.clara_unregister_tool(name.encode("utf-8"))
            except Exception:
                pass
    for hook in _shutdown_hooks:
        try:
            hook()
        except Exception:
            pass
    with _input_lock:
        if _input_current is not None and _input_lib is not None:
            try:
                _input_lib.clara_set_input_handler(INPUT_FN(), None)
            except Exception:
                pass
            _input_current = None
            _input_lib = None
    with _event_lock:
        if _event_keepalive is not None and _event_lib is not None:
            try:
                _event_lib.clara_set_event_handler(EVENT_FN(), None)
            except Exception:
                pass
            _event_keepalive = None
            _event_lib = None
    # A message arriving while the interpreter shuts down would call into a
    # dead interpreter: restore the default handler.
    with _log_lock:
        if _log_keepalive is not None and _log_lib is not None:
            try:
                _log_lib.clara_set_log_handler(LOG_FN(), None, CLARA_LOG_OFF)
            except Exception:
                pass
            _log_keepalive = None
            _log_lib = None


# ---- The binding ------------------------------------------------------------

class Clara:
    """A handle on the loaded library.

    Clara's state (configuration, tools, log handler) is process-wide: every
    instance over the same library shares it. Instances are cheap and
    thread-safe; the library cannot be unloaded. Used as a context manager,
    an instance unregisters at exit the tools registered through it that are
    still its own (not replaced since).
    """

    def __init__(self, path: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        """Load the library (the copy bundled in the package, then
        CLARA_LIBRARY, then the soname libclara.so.0; or exactly `path` when
        given) and declare its functions."""
        if _forked:
            raise RuntimeError(_FORK_MESSAGE)
        lib, self.path = load_library(path)
        declare(lib)
        self._lib: Any = lib
        # The two functions of every call, looked up once.
        self._evaluate: Callable[[Optional[bytes]], Optional[int]] = lib.clara_evaluate
        self._free: Callable[[int], None] = lib.clara_free_string
        self._own: Dict[str, int] = {}
        _instances.add(self)

    def __repr__(self) -> str:
        return "<clara.Clara %s>" % self.path

    def __enter__(self) -> Clara:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        with _tool_lock:
            own = [name for name, ident in self._own.items() if _tool_current.get(name) == ident]
            self._own.clear()
        for name in own:
            try:
                self.unregister_tool(name)
            except RegistrationError:
                pass   # gone meanwhile

    def _disarm(self) -> None:
        self._lib = _ForkedLibrary()
        self._evaluate = _refuse
        self._free = _refuse

    # -- internals --

    def _take_string(self, ptr: Optional[int], what: str) -> bytes:
        """Copy a malloc'd char * returned by Clara into bytes and free it."""
        if not ptr:
            raise MemoryError("%s returned NULL (malloc failed)" % what)
        try:
            return ctypes.string_at(ptr)
        finally:
            self._free(ptr)

    @staticmethod
    def _request(tool: str, arguments: Dict[str, Any], session: Optional[str]) -> bytes:
        # The request is written around the encoded arguments, and JSON
        # escapes NUL, so no NUL check is needed.
        if type(tool) is not str:
            raise TypeError("tool must be str, not %s" % type(tool).__name__)
        if session is None:
            request = '{"tool":%s,"arguments":%s}' % (_json.dumps_str(tool), _json.dumps(arguments))
        else:
            request = '{"tool":%s,"session":%s,"arguments":%s}' % (
                _json.dumps_str(tool), _json.dumps_str(session), _json.dumps(arguments))
        return request.encode("utf-8")

    @staticmethod
    def _result(text: bytes) -> Any:
        envelope = _json.loads(text.decode("utf-8"))
        if envelope["status"] == "success":
            return envelope.get("result")
        raise ClaraError.from_envelope(envelope)

    def _call(self, tool: str, arguments: Dict[str, Any], session: Optional[str]) -> Any:
        # The hot path of call().
        ptr = self._evaluate(self._request(tool, arguments, session))
        if not ptr:
            raise MemoryError("clara_evaluate returned NULL (malloc failed)")
        try:
            text = ctypes.string_at(ptr)
        finally:
            self._free(ptr)
        return self._result(text)

    def _evaluate_bytes(self, request: bytes) -> bytes:
        return self._take_string(self._evaluate(request), "clara_evaluate")

    async def _call_async(self, tool: str, arguments: Dict[str, Any], session: Optional[str]) -> Any:
        request = self._request(tool, arguments, session)
        return self._result(await _aio.submit(self._lib, request, self._evaluate_bytes))

    # -- version --

    def version(self) -> str:
        """The loaded library's version, "MAJOR.MINOR.PATCH"."""
        return self._lib.clara_version().decode("ascii")  # type: ignore[no-any-return]

    def version_number(self) -> int:
        """major*1000000 + minor*1000 + patch of the loaded library. Compare
        with CLARA_VERSION_NUMBER, the version this package was written for."""
        return self._lib.clara_version_number()  # type: ignore[no-any-return]

    # -- calls --

    def call(self, tool: str, /, **arguments: Any) -> Any:
        """Call a tool and return its result as a Python value; raise the
        ClaraError subclass of the error code when the call fails."""
        return self._call(tool, arguments, None)

    def evaluate_raw(self, request: Optional[Text]) -> str:
        """Send request (str, encoded UTF-8, or bytes sent verbatim; None
        sends a NULL pointer) to clara_evaluate and return the envelope text.
        Raises MemoryError if Clara returns NULL."""
        data = _to_bytes(request, "request")
        ptr = self._evaluate(data)
        return self._take_string(ptr, "clara_evaluate").decode("utf-8")

    def evaluate(self, request: Union[Mapping[str, Any], List[Any], Text]) -> Dict[str, Any]:
        """Serve one request of the protocol and return the envelope as a dict.

        request is a dict (sent as JSON) or str/bytes (sent verbatim). Errors
        come back as error envelopes ({"status": "error", "error": CODE,
        "message": ...}), not as exceptions; clara.check(envelope) turns one
        into its exception."""
        if isinstance(request, Mapping) and not isinstance(request, dict):
            request = dict(request)
        return _json.loads(self.evaluate_raw(_json_bytes(request, "request")))  # type: ignore[no-any-return]

    async def call_async(self, tool: str, /, **arguments: Any) -> Any:
        """call() for asyncio code: awaits the call without blocking the loop.
        See clara.call_async."""
        return await self._call_async(tool, arguments, None)

    async def evaluate_async(self, request: Union[Mapping[str, Any], List[Any], Text]) -> Dict[str, Any]:
        """evaluate() for asyncio code. See clara.evaluate_async."""
        if isinstance(request, Mapping) and not isinstance(request, dict):
            request = dict(request)
        data = _json_bytes(request, "request")
        if data is None:
            raise TypeError("request must be a dict, a list, str or bytes, not None")
        text = await _aio.submit(self._lib, data, self._evaluate_bytes)
        return _json.loads(text.decode("utf-8"))  # type: ignore[no-any-return]

    # -- configuration --

    def configure(self, config: Union[Mapping[str, Any], Text, "os.PathLike[str]"]) -> Dict[str, Any]:
        """Apply configuration on top of the one in force and return the
        envelope: {"status": "success", "result": {"config": {...}}}, or an
        invalid_request envelope whose "details" lists each problem (then
        nothing was applied). config is a dict (sent as JSON), TOML or JSON
        text (str/bytes), or a path (os.PathLike, e.g. pathlib.Path) of a
        TOML or JSON file: a regular file of at most 16 MiB (ValueError
        otherwise, OSError when it cannot be opened)."""
        data: Optional[bytes]
        if isinstance(config, os.PathLike):
            data = _read_config_file(config)
        elif isinstance(config, Mapping):
            data = _json_bytes(dict(config), "config")
        else:
            data = _json_bytes(config, "config")
        ptr = self._lib.clara_configure(data)
        return _json.loads(self._take_string(ptr, "clara_configure").decode("utf-8"))  # type: ignore[no-any-return]

    def reset(self) -> Dict[str, Any]:
        """Return to the default configuration (plus CLARA_CONFIG at load
        time), dropping every registered tool, and return the envelope.
        Meant for tests."""
        ptr = self._lib.clara_reset()
        return _json.loads(self._take_string(ptr, "clara_reset").decode("utf-8"))  # type: ignore[no-any-return]

    # -- the audit and telemetry --

    def audit_reopen(self) -> None:
        """Close and open again the audit file of audit.path, after a log
        rotation moved it (clara_audit_reopen). Raises ClaraError when it
        cannot be opened again (records keep going where they went)."""
        if self._lib.clara_audit_reopen() != 0:
            raise ClaraError("the audit file could not be opened again (see the log)", code="tool_failed")

    def telemetry_flush(self, timeout: float = 5.0) -> bool:
        """Export what telemetry holds in its batches, waiting at most
        timeout seconds (clara_telemetry_flush); False when the export
        failed or did not end in time. Done at interpreter exit too."""
        return bool(self._lib.clara_telemetry_flush(int(max(0.0, timeout) * 1000)) == 0)

    # -- events --

    def emit_raw(self, event: Optional[Text]) -> str:
        """Send event (str/bytes verbatim; None sends a NULL pointer) to
        clara_emit and return the envelope text."""
        ptr = self._lib.clara_emit(_to_bytes(event, "event"))
        return self._take_string(ptr, "clara_emit").decode("utf-8")

    def emit(self, event: Union[str, Mapping[str, Any]], payload: Any = None, session: Optional[str] = None,
             trace: bool = False) -> Dict[str, Any]:
        """Fire an event at the rules and return the envelope:
        {"status": "success", "result": {"fired": [...], "notices": [...],
        "denied": None}} ("trace" too when asked). event is the event's name,
        or a dict sent as the whole request."""
        if isinstance(event, Mapping):
            request: Dict[str, Any] = dict(event)
        else:
            request = {"event": event}
            if payload is not None:
                request["payload"] = payload
            if session is not None:
                request["session"] = session
            if trace:
                request["trace"] = True
        return _json.loads(self.emit_raw(_json_bytes(request, "event")))  # type: ignore[no-any-return]

    # -- reading JSON --

    def json_get_raw(self, doc: Union[Mapping[str, Any], List[Any], Text], path: Text) -> Tuple[int, Optional[bytes]]:
        """clara_json_get as (kind, bytes): kind is a CLARA_JSON_* value and
        bytes the text Clara returned (None for CLARA_JSON_MISSING). Strings
        keep embedded NULs. Raises ValueError when doc is not valid JSON
        (-CLARA_EINVAL), MemoryError on -CLARA_ENOMEM, InternalError on any
        other code."""
        doc_b = _json_bytes(dict(doc) if isinstance(doc, Mapping) else doc, "doc")
        path_b = _to_bytes(path, "path")
        if doc_b is None or path_b is None:
            raise TypeError("doc and path must not be None")
        text = ctypes.c_void_p()
        length = ctypes.c_size_t()
        kind: int = self._lib.clara_json_get(doc_b, path_b, ctypes.byref(text), ctypes.byref(length))
        try:
            if kind < 0:
                code = -kind
                msg = "clara_json_get(path=%r): %s" % (path, self.strerror(code))
                if code == CLARA_EINVAL:
                    raise ValueError(msg)
                if code == CLARA_ENOMEM:
                    raise MemoryError(msg)
                raise InternalError(msg)
            if kind == CLARA_JSON_MISSING or not text.value:
                return kind, None
            return kind, ctypes.string_at(text.value, length.value)
        finally:
            if text.value:
                self._free(text.value)

    def json_get(self, doc: Union[Mapping[str, Any], List[Any], Text], path: Text, default: Any = MISSING) -> Any:
        """The value at a gjson path (e.g. "result.items.0.name", "details.#")
        in doc (str/bytes of JSON, or a dict/list), as a Python value:

            missing -> `default` (the MISSING sentinel unless given; note
                       MISSING is not None, so null and missing differ)
            null -> None,  true/false -> bool,  integer -> int,
            float (or an integer beyond 64 bits) -> float,
            string -> str (embedded NULs kept),
            array/object -> list/dict (parsed).

        Raises ValueError if doc is not valid JSON (-CLARA_EINVAL); Clara
        checks doc against limits.max_depth."""
        kind, raw = self.json_get_raw(doc, path)
        if kind == CLARA_JSON_MISSING or raw is None:
            return default
        if kind == CLARA_JSON_NULL:
            return None
        if kind == CLARA_JSON_FALSE:
            return False
        if kind == CLARA_JSON_TRUE:
            return True
        if kind == CLARA_JSON_INTEGER:
            return int(raw)
        if kind == CLARA_JSON_FLOAT:
            return float(raw)
        if kind == CLARA_JSON_STRING:
            return raw.decode("utf-8", "surrogateescape")
        if kind in (CLARA_JSON_ARRAY, CLARA_JSON_OBJECT):
            return json.loads(raw.decode("utf-8"))
        raise InternalError("clara_json_get returned unknown kind %d" % kind)

    # -- status codes --

    def strerror(self, code: int) -> str:
        """Describe a status code (CLARA_E* or its negative); "unknown status
        code" for codes Clara lacks."""
        return self._lib.clara_strerror(code).decode("utf-8")  # type: ignore[no-any-return]

    # -- logging --

    def set_log_handler(self, handler: Optional[LogHandler], min_level: int = CLARA_LOG_INFO) -> None:
        """Send Clara's messages at min_level (CLARA_LOG_*) and above to
        handler(level: int, message: str); None restores the default
        (stderr at the CLARA_LOG level).

        handler is called from Clara's threads, possibly several at once:
        make it thread-safe and quick, and never call Clara from it. Any
        exception it raises is swallowed."""
        global _log_keepalive, _log_lib
        if handler is not None and not callable(handler):
            raise TypeError("handler must be callable or None")
        with _log_lock:
            if handler is None:
                new = None
                self._lib.clara_set_log_handler(LOG_FN(), None, int(min_level))
            else:
                new = _make_log_trampoline(handler)
                self._lib.clara_set_log_handler(new, None, int(min_level))
            # Only now is the previous trampoline certainly idle.
            _log_keepalive = new
            _log_lib = self._lib if new is not None else None

    def set_event_handler(self, handler: Optional[EventHandler]) -> None:
        """Send the progress events of chats to handler(event: dict):
        {"event": "token" | "tool_call" | "tool_result" | "answer", ...,
        "session": ..., "handle": ... (async calls)}, and ask_user's
        "input_required" and "input_cancelled" (see set_input_handler);
        None stops them.

        handler is called from Clara's threads: make it thread-safe and
        quick, and never call Clara from it. Any exception it raises is
        swallowed."""
        global _event_keepalive, _event_lib
        if handler is not None and not callable(handler):
            raise TypeError("handler must be callable or None")
        with _event_lock:
            new = None if handler is None else _make_event_trampoline(handler)
            self._lib.clara_set_event_handler(new if new is not None else EVENT_FN(), None)
            # Only now is the previous trampoline certainly idle.
            _event_keepalive = new
            _event_lib = self._lib if new is not None else None

    def set_input_handler(self, handler: Optional[InputHandler]) -> None:
        """Let the ask_user tool ask the user through handler(request: dict)
        -> str or None: request is {"id", "prompt", "session", "handle"
        (async calls)}; return the answer, or None when the user declines
        (an exception declines too, logged as a warning). None removes the
        handler: ask_user then fails and chats no longer offer it.

        handler is called from Clara's threads, possibly for several
        questions at once, and may take as long as the user does; it may
        call Clara. If the call is cancelled or its deadline passes first,
        the answer is dropped, and the event handler (set_event_handler)
        gets {"event": "input_cancelled", "id": request["id"], ...}: the
        handler should then return (None will do). Until it returns, the
        question holds the thread it runs on and counts as open; past
        limits.max_open_questions open questions (default 64), ask_user is
        refused (ToolFailed) without asking."""
        global _input_current, _input_lib, _input_box
        if handler is not None and not callable(handler):
            raise TypeError("handler must be callable or None")
        with _input_lock:
            box: List[Optional[InputHandler]] = [handler]
            new = None if handler is None else _make_input_trampoline(box)
            if new is not None:
                _input_kept.append(new)
            self._lib.clara_set_input_handler(new if new is not None else INPUT_FN(), None)
            _input_box[0] = None   # the old handler: questions already inside it go on
            _input_box = box
            _input_current = new
            _input_lib = self._lib if new is not None else None

    # -- approvals --

    def set_approval_handler(self, handler: Optional[Callable[[Dict[str, Any]], Any]]) -> None:
        """Let handler(request: dict) decide the tool calls that wait for a
        person's approval (a rule's "ask" action, a tool's needs_approval).
        request is {"id", "tool", "session", "arguments" (validated, the
        configuration's secrets cut out), "reason", "rule" (absent for
        needs_approval: true), "handle" (async calls), "timeout_ms"}.

        handler returns True (approve), False (reject), a dict
        {"decision": "approve", "arguments": {...}} (run with these, checked
        against the tool's schema) or {"decision": "reject", "reason":
        "..."} (the model is told the reason), or None to decide later with
        decide_approval(). An exception rejects the call (logged). It runs on
        Clara's threads, possibly for several calls at once, and may take as
        long as the person does, up to policy.approval_timeout_ms; when the
        approval stops waiting first, the event handler gets {"event":
        "approval_cancelled", "id": ..., "reason": ...}.

        An async def handler runs on the event loop of async tools: the
        call waits while it runs, and it is cancelled (CancelledError in
        it) when the approval stops waiting. None removes the handler:
        calls that need approval are then rejected."""
        _approval_ops["set_approval_handler"](self, handler)

    def approvals(self) -> List[Dict[str, Any]]:
        """The tool calls waiting for approval (approvals_list), oldest
        first: each {"id", "tool", "session", "arguments", "reason", "rule"?,
        "handle"?, "timeout_ms", "waiting_ms"}."""
        approvals: List[Dict[str, Any]] = _approval_ops["approvals"](self)
        return approvals

    def decide_approval(self, id: int, approve: bool, *, reason: Optional[str] = None,
                        arguments: Optional[Dict[str, Any]] = None) -> None:
        """Decide the approval id from any thread (approval_decide): approve
        it, with arguments to run with instead (InvalidArgs when they do
        not match the tool's schema; the approval waits on), or reject it
        with a reason. InvalidArgs when it no longer waits."""
        _approval_ops["decide_approval"](self, id, approve, reason, arguments)

    # -- MCP --

    def mcp_listen(self, addr: str = "127.0.0.1:0") -> str:
        """Serve the tools over MCP's Streamable HTTP transport on Clara's
        own threads; return the URL ("http://127.0.0.1:PORT/mcp"). Raises
        the ClaraError of the refusal (a remote address without
        mcp.allow_remote, an address in use)."""
        data = _to_bytes(addr, "addr")
        env = _json.loads(self._take_string(self._lib.clara_mcp_listen(data), "clara_mcp_listen").decode("utf-8"))
        if env["status"] != "success":
            raise ClaraError.from_envelope(env)
        return env["result"]["url"]  # type: ignore[no-any-return]

    def mcp_serve_stdio(self, in_fd: int = 0, out_fd: int = 1) -> None:
        """Serve the tools over MCP on a pair of descriptors (stdin and
        stdout by default) until the client closes or mcp_stop()."""
        code = self._lib.clara_mcp_serve_stdio(int(in_fd), int(out_fd))
        if code != CLARA_OK:
            raise RuntimeError("clara_mcp_serve_stdio: %s (the log says why)" % self.strerror(code))

    def mcp_stop(self) -> None:
        """End every MCP session and listener."""
        self._lib.clara_mcp_stop()

    # -- tools --

    def _register(self, descriptor: bytes, name: Optional[str], invoke: Callable[[Dict[str, Any]], Any],
                  returns: str) -> Optional[str]:
        global _tool_next_id, _tool_lib
        callback = _make_tool_trampoline(self._lib, invoke, returns, name)
        with _tool_lock:
            ident = _tool_next_id
            _tool_next_id += 1
            _tool_keepalive[ident] = _ToolEntry(callback, invoke, name)
            _tool_lib = self._lib
        # No lock held here: Clara may call _free_userdata from inside this
        # call (for this tool when it fails, for a replaced one otherwise).
        rc = self._lib.clara_register_tool(descriptor, callback, ident, _FREE_USERDATA)
        if rc != CLARA_OK:
            code = -rc
            raise RegistrationError(code, "clara_register_tool(%r): %s" % (name, self.strerror(code)), name)
        if name is not None:
            with _tool_lock:
                if ident in _tool_keepalive:
                    _tool_current[name] = ident
                    self._own[name] = ident
        return name

    def register_tool(self, descriptor: Union[Mapping[str, Any], Text],
                      func: Callable[[Dict[str, Any]], Any]) -> Optional[str]:
        """Register func(arguments: dict) as a tool and return its name.

        descriptor is a dict or JSON text with at least "name" (see
        docs/tools.md: description, input_schema, returns, capabilities,
        limits, llm_visible). Clara validates the arguments against
        input_schema before func runs. For "returns": "json" (the default)
        the value func returns is sent as JSON (NaN and infinities refused,
        dataclasses written as objects); for "string" it must be a str. Any
        exception raised by func, or a result that cannot be encoded, makes
        the call fail with tool_failed and the message "<ExceptionType>:
        <message>"; nothing reaches Clara, not even SystemExit.

        @clara.tool builds the descriptor from a function's signature
        instead. Raises TypeError, ValueError (a NUL byte in the text) or
        RegistrationError (.errno CLARA_EINVAL: invalid descriptor or
        schema, reason logged at error level; CLARA_EPERM: a built-in
        tool's name)."""
        if not callable(func):
            raise TypeError("func must be callable")
        if descriptor is None:
            raise TypeError("descriptor must be a dict or JSON text, not None")
        data = _json_bytes(dict(descriptor) if isinstance(descriptor, Mapping) else descriptor, "descriptor")
        assert data is not None
        try:
            parsed = json.loads(data.decode("utf-8"))
        except ValueError:
            parsed = None   # Clara says what is wrong (on the log)
        if not isinstance(parsed, dict):
            parsed = {}
        name = parsed.get("name") if isinstance(parsed.get("name"), str) else None
        returns = parsed.get("returns", "json")
        return self._register(data, name, func, returns if isinstance(returns, str) else "json")

    def unregister_tool(self, name: Union[str, bytes]) -> None:
        """Remove a tool registered from Python or C. Calls already running
        finish; then Clara releases the callback. Raises RegistrationError
        with .errno CLARA_ENOENT (no such tool) or CLARA_EPERM (a built-in
        tool), TypeError for a name that is not str/bytes."""
        if name is None:
            raise TypeError("name must be str or bytes, not None")
        data = _to_bytes(name, "name")
        rc = self._lib.clara_unregister_tool(data)
        if rc != CLARA_OK:
            code = -rc
            raise RegistrationError(code, "clara_unregister_tool(%r): %s" % (name, self.strerror(code)),
                                    name if isinstance(name, str) else name.decode("utf-8", "replace"))

    def set_tool_limits(self, name: str, limits: Union[Mapping[str, Any], Text]) -> Dict[str, Any]:
        """Change the limits of a tool registered from Python or C, for the
        calls that start from now on (seed 002's AI.TOOL.LIMITS); the limits
        not given stay. limits is a dict, or text in JSON or JSON5 as the
        seed writes it: "{ timeout_ms: 800, rate_per_min: 20 }". It is a
        call of the administrative tool tool_limits (policy and audit see
        it); returns {"name", "limits", "previous"}. Raises UnknownTool (no
        such tool), Denied (a tool Clara or the configuration brings, or a
        policy that denies tool_limits), InvalidArgs (limits out of bounds
        or unknown), ValueError (text that is neither JSON nor JSON5)."""
        value = dict(limits) if isinstance(limits, Mapping) else json.loads(self.json5_to_json(limits))
        result: Dict[str, Any] = self._call("tool_limits", {"name": name, "limits": value}, None)
        return result

    def json5_to_json(self, text: Text) -> str:
        """Read text as JSON5 (unquoted keys, 'single quotes', trailing
        commas, comments, hexadecimal numbers) and return it as compact
        JSON, keys sorted (clara_json5_to_json). Raises ValueError, with
        what is wrong, for text that is not one JSON5 value."""
        data = _to_bytes(text, "text")
        if data is None:
            raise TypeError("text must not be None")
        out = ctypes.c_void_p()
        rc: int = self._lib.clara_json5_to_json(data, ctypes.byref(out))
        message = self._take_string(out.value, "clara_json5_to_json").decode("utf-8") if out.value else ""
        if rc == -CLARA_EINVAL:
            raise ValueError(message)
        if rc != CLARA_OK:
            raise InternalError("clara_json5_to_json: %s" % self.strerror(-rc))
        return message

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(self, fn: None = None, /, *, name: Optional[str] = None, description: Optional[str] = None,
             input_schema: Optional[Mapping[str, Any]] = None, limits: Optional[Mapping[str, Any]] = None,
             capabilities: Optional[List[str]] = None,
             llm_visible: Optional[bool] = None, on_caller_thread: Optional[bool] = None,
             changes_files: Optional[List[str]] = None,
             reports_changed_files: Optional[bool] = None, title: Optional[str] = None,
             annotations: Any = None, idempotent: Optional[bool] = None,
             output_schema: Optional[Mapping[str, Any]] = None,
             needs_approval: Union[bool, str, None] = None) -> Callable[[F], F]: ...

    def tool(self, fn: Optional[AnyFunction] = None, /, *, name: Optional[str] = None,
             description: Optional[str] = None, input_schema: Optional[Mapping[str, Any]] = None,
             limits: Optional[Mapping[str, Any]] = None, capabilities: Optional[List[str]] = None,
             llm_visible: Optional[bool] = None, on_caller_thread: Optional[bool] = None,
             changes_files: Optional[List[str]] = None,
             reports_changed_files: Optional[bool] = None, title: Optional[str] = None,
             annotations: Any = None, idempotent: Optional[bool] = None,
             output_schema: Optional[Mapping[str, Any]] = None,
             needs_approval: Union[bool, str, None] = None) -> Any:
        """clara.tool, registering through this instance."""
        if _decorate is None:
            raise InternalError("clara._tools was not imported (import the package clara)")
        return _decorate(self, fn, name=name, description=description, input_schema=input_schema,
                        limits=limits, capabilities=capabilities, llm_visible=llm_visible,
                        on_caller_thread=on_caller_thread, changes_files=changes_files,
                        reports_changed_files=reports_changed_files, title=title,
                        annotations=annotations, idempotent=idempotent, output_schema=output_schema,
                        needs_approval=needs_approval)

    def tools(self) -> List[Dict[str, Any]]:
        """The descriptors of every tool (built-in and registered), as the
        tools_list tool gives them."""
        return self._call("tools_list", {}, None)["tools"]  # type: ignore[no-any-return]

    # -- rules --

    def register_rule(self, descriptor: Union[Mapping[str, Any], Text],
                      condition: Optional[Callable[..., Any]] = None,
                      action: Optional[Callable[..., Any]] = None) -> str:
        """Register a rule whose condition and action are Python callables
        (seed 004's Tier 1, registerRule({condition, action})) beside the
        rules of files: the same hook points, priorities, stop, mode, trace,
        rules_list and rule tests. Returns the rule's id.

        descriptor is a dict or JSON (or JSON5) text of the rule as a JSON
        rule file writes one: "id" and "trigger" required; "priority",
        "stop", "mode", "description"; a "condition" expression when
        condition is None; "actions" that run before action.

        condition(event) returns whether the rule matches; event is
        {"rule", "event", "session", "context"} (context as the rule's
        expressions see it). An exception is a condition that cannot tell:
        on on_tool_call the call is denied. action(event) runs when it
        matched and returns None, an action dict or a list of them
        ({"type": "notify_self", "message": ...}, "log", "set_state",
        "emit_event", "deny", "ask", "block"); an exception skips the rule
        (on on_tool_call the call is denied). A callable that takes no
        argument is called without the event. Both run on the thread that
        fires the event, perhaps on several at once.

        A rule registered earlier with the same id is replaced. Raises
        RegistrationError (.errno CLARA_EINVAL: invalid descriptor, no
        action, the reason logged at error level; CLARA_EPERM: the id of a
        rule of the configuration)."""
        from ._rules import register
        return register(self, descriptor, condition, action)

    def unregister_rule(self, id: str) -> None:
        """Remove a rule registered with register_rule (from Python or C).
        Raises RegistrationError with .errno CLARA_ENOENT (no such rule of
        the host) or CLARA_EPERM (a rule of the configuration)."""
        from ._rules import unregister
        unregister(self, id)


# ---- The shared default instance ---------------------------------------------

_default: Optional[Clara] = None
_default_lock = threading.Lock()


def default() -> Clara:
    """The Clara instance behind the module-level functions (loaded on first
    use)."""
    global _default
    c = _default
    if c is None:
        with _default_lock:
            if _default is None:
                _default = Clara()
            c = _default
    return c
