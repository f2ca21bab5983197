# SPDX-License-Identifier: MIT
"""clara - a ctypes binding of libclara.so (the C interface of include/clara.h).

Copy this one file next to your program; it needs only the standard library
(Python 3.8 or later).

    import clara
    c = clara.Clara()                      # or use the module-level functions
    c.evaluate({"question": "hi"})
    # -> {'status': 'success', 'tool': 'echo', 'result': {'question': 'hi'}}
    clara.evaluate({"tool": "get_time", "arguments": {"timezone": "Europe/Paris"}})

    # A Python function as a tool (arguments validated by Clara first):
    clara.register_tool({"name": "add", "input_schema": {
        "type": "object", "required": ["a", "b"],
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
        lambda args: args["a"] + args["b"])
    clara.evaluate({"tool": "add", "arguments": {"a": 1, "b": 2}})
    # -> {'status': 'success', 'tool': 'add', 'result': 3}
    clara.unregister_tool("add")

Finding the library (first that loads wins; Clara.path tells which):
  1. the path in the environment variable CLARA_LIBRARY;
  2. libclara.so, then libclara.so.0, in the directory of this file;
  3. ../../lib/libclara.so relative to this file (the Clara source tree);
  4. the soname "libclara.so.0" through the dynamic loader (LD_LIBRARY_PATH,
     ld.so.cache, ...).
If none loads, OSError is raised listing every attempt and why it failed.
Clara(path) loads exactly that path instead.

Ownership:
  * Everything you pass in (dicts, str, bytes) is copied or borrowed only for
    the duration of the call; Clara keeps nothing.
  * Every char * the library returns is malloc'd and owned by the caller. This
    module copies it into a Python object (ctypes.string_at) and frees it with
    clara_free_string() before returning, so you never hold a C pointer and
    nothing leaks. That is why the char * functions are declared with
    restype = c_void_p, never c_char_p (c_char_p would copy the bytes and
    lose the pointer, which then could not be freed).
  * clara_version() and clara_strerror() return static strings; they are
    never freed.
  * The log callback given to set_log_handler() is kept alive by this module
    (a module global) for as long as it is installed.
  * A tool given to register_tool() is kept alive by this module (the
    ctypes callback and your function, in a module-level dict keyed by an
    integer id that is the C userdata) until Clara releases it: Clara calls
    free_userdata exactly once, after the tool was unregistered, replaced or
    dropped by reset() AND its last running call has returned (or at once
    when the registration fails). Only then is the entry dropped, so a call
    still running never jumps into a freed callback.

Threads: every function may be called from any thread, concurrently (ctypes
releases the GIL during each call). The log handler is called by Clara from
arbitrary threads, possibly concurrently; it must be thread-safe, and it must
not call Clara (in particular not set_log_handler(): that deadlocks).
Tools registered with register_tool() also run on Clara's threads, possibly
several calls at once (unless the descriptor sets "max_concurrency": 1);
ctypes takes the GIL around each call, so Python code in tools runs one
thread at a time but may be interleaved. Tools may call Clara (evaluate()
and the rest). A call that runs past its timeout_ms keeps running after the
caller got "timeout": let it finish before the interpreter exits.

Processes: the library holds a Go runtime. It cannot be unloaded, a process
can hold only one Go-built shared library, and a child created by fork()
must not use it. With multiprocessing use the "spawn" start method
(multiprocessing.set_start_method("spawn") or get_context("spawn")); the
"fork" start method (the default on Linux before Python 3.14) is unsafe.
Only glibc systems are supported.

Input containing a NUL byte cannot be passed through the C interface (it
would be cut at the NUL): such input raises ValueError. A NUL inside a JSON
string is written as the escape \\u0000, which json.dumps does for you.
"""

import atexit
import ctypes
import json
import os
import threading

__all__ = [
    "Clara", "ClaraError", "MISSING", "load_library",
    "version", "version_number", "evaluate", "evaluate_raw", "configure",
    "reset", "json_get", "json_get_raw", "strerror", "set_log_handler",
    "register_tool", "unregister_tool", "ToolError",
    "CLARA_VERSION", "CLARA_VERSION_NUMBER",
    "CLARA_VERSION_MAJOR", "CLARA_VERSION_MINOR", "CLARA_VERSION_PATCH",
    "CLARA_OK", "CLARA_EINVAL", "CLARA_ENOMEM", "CLARA_EINTERNAL",
    "CLARA_ENOENT", "CLARA_EPERM",
    "CLARA_JSON_MISSING", "CLARA_JSON_NULL", "CLARA_JSON_FALSE",
    "CLARA_JSON_TRUE", "CLARA_JSON_INTEGER", "CLARA_JSON_FLOAT",
    "CLARA_JSON_STRING", "CLARA_JSON_ARRAY", "CLARA_JSON_OBJECT",
    "CLARA_LOG_DEBUG", "CLARA_LOG_INFO", "CLARA_LOG_WARN", "CLARA_LOG_ERROR",
    "CLARA_LOG_OFF",
]

# ---- Constants of include/clara.h ------------------------------------------

CLARA_VERSION_MAJOR = 0
CLARA_VERSION_MINOR = 1
CLARA_VERSION_PATCH = 0
CLARA_VERSION = "0.1.0"
CLARA_VERSION_NUMBER = 1000  # major*1000000 + minor*1000 + patch

CLARA_OK = 0
CLARA_EINVAL = 1      # an argument is NULL or invalid
CLARA_ENOMEM = 2      # malloc failed
CLARA_EINTERNAL = 3   # a bug in Clara; details are on the log
CLARA_ENOENT = 4      # no such tool
CLARA_EPERM = 5       # not allowed on a built-in tool

CLARA_JSON_MISSING = 0
CLARA_JSON_NULL = 1
CLARA_JSON_FALSE = 2
CLARA_JSON_TRUE = 3
CLARA_JSON_INTEGER = 4
CLARA_JSON_FLOAT = 5
CLARA_JSON_STRING = 6
CLARA_JSON_ARRAY = 7
CLARA_JSON_OBJECT = 8

CLARA_LOG_DEBUG = 0
CLARA_LOG_INFO = 1
CLARA_LOG_WARN = 2
CLARA_LOG_ERROR = 3
CLARA_LOG_OFF = 4


class _Missing:
    """The type of MISSING. There is one instance; compare with `is`."""

    __slots__ = ()
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "clara.MISSING"

    def __bool__(self):
        return False

    def __reduce__(self):
        return (_Missing, ())


#: What json_get() returns when nothing is at the path (CLARA_JSON_MISSING).
#: It is distinct from None, which stands for a JSON null. It is falsy.
MISSING = _Missing()


class ClaraError(RuntimeError):
    """A negative status code. .code is the positive CLARA_E* value.
    json_get raises ValueError and MemoryError instead for -CLARA_EINVAL
    and -CLARA_ENOMEM; register_tool and unregister_tool raise ToolError,
    a subclass, for every code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class ToolError(ClaraError):
    """register_tool() or unregister_tool() failed. .code is the positive
    CLARA_E* value (CLARA_EINVAL: invalid descriptor or schema, whose
    reason Clara logs at error level; CLARA_EPERM: a built-in tool's name;
    CLARA_ENOENT: no such tool), .name the tool's name (None if unknown)."""

    def __init__(self, code, message, name=None):
        super().__init__(code, message)
        self.name = name


# The C type of clara_log_fn: void (*)(void *userdata, int level,
# const char *message). The message is borrowed; ctypes copies it to bytes.
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)

# The C type of clara_tool_fn: int (*)(void *userdata, const char
# *arguments_json, clara_call *call). clara_call is opaque: a c_void_p.
_TOOL_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)

# The C type of free_userdata: void (*)(void *userdata).
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# ---- Loading ----------------------------------------------------------------

def _candidates():
    """Yield (description, path-or-name) in the order the library is sought."""
    env = os.environ.get("CLARA_LIBRARY")
    if env:
        yield "CLARA_LIBRARY", env
    here = os.path.dirname(os.path.abspath(__file__))
    yield "next to clara.py", os.path.join(here, "libclara.so")
    yield "next to clara.py", os.path.join(here, "libclara.so.0")
    yield "source tree", os.path.normpath(os.path.join(here, "..", "..", "lib", "libclara.so"))
    yield "dynamic loader", "libclara.so.0"


def load_library(path=None):
    """Load libclara and return (ctypes.CDLL, the path or name loaded).

    With path, only that path is tried. Raises OSError listing every attempt
    when nothing loads. The prototypes are not set here; Clara() does that.
    """
    tried = []
    cands = [("argument", path)] if path is not None else list(_candidates())
    for what, cand in cands:
        is_path = os.sep in cand
        if is_path and not os.path.exists(cand):
            tried.append("%s (%s): no such file" % (cand, what))
            continue
        try:
            target = os.path.abspath(cand) if is_path else cand
            return ctypes.CDLL(target), target
        except OSError as e:
            tried.append("%s (%s): %s" % (cand, what, e))
    raise OSError("cannot load libclara; tried:\n  " + "\n  ".join(tried))


def _declare(lib):
    """Set argtypes/restype of every function of clara.h on lib."""
    c_char_p, c_void_p, c_int = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int

    # const char *clara_version(void);  static, never freed: c_char_p is right.
    lib.clara_version.argtypes = []
    lib.clara_version.restype = c_char_p
    # int clara_version_number(void);
    lib.clara_version_number.argtypes = []
    lib.clara_version_number.restype = c_int
    # char *clara_evaluate(const char *request_json);  malloc'd: c_void_p.
    lib.clara_evaluate.argtypes = [c_char_p]
    lib.clara_evaluate.restype = c_void_p
    # void clara_free_string(char *s);
    lib.clara_free_string.argtypes = [c_void_p]
    lib.clara_free_string.restype = None
    # char *clara_configure(const char *config);  malloc'd: c_void_p.
    lib.clara_configure.argtypes = [c_char_p]
    lib.clara_configure.restype = c_void_p
    # char *clara_reset(void);  malloc'd: c_void_p.
    lib.clara_reset.argtypes = []
    lib.clara_reset.restype = c_void_p

    lib.clara_emit.argtypes = [c_char_p]
    lib.clara_emit.restype = c_void_p
    # int clara_json_get(const char *json, const char *path, char **text,
    #                    size_t *length);  *text is malloc'd: c_void_p.
    lib.clara_json_get.argtypes = [c_char_p, c_char_p,
                                   ctypes.POINTER(c_void_p),
                                   ctypes.POINTER(ctypes.c_size_t)]
    lib.clara_json_get.restype = c_int
    # void clara_set_log_handler(clara_log_fn fn, void *userdata, int min_level);
    lib.clara_set_log_handler.argtypes = [_LOG_FN, c_void_p, c_int]
    lib.clara_set_log_handler.restype = None
    # int clara_register_tool(const char *descriptor_json, clara_tool_fn fn,
    #                         void *userdata, void (*free_userdata)(void *));
    lib.clara_register_tool.argtypes = [c_char_p, _TOOL_FN, c_void_p, _FREE_FN]
    lib.clara_register_tool.restype = c_int
    # int clara_unregister_tool(const char *name);
    lib.clara_unregister_tool.argtypes = [c_char_p]
    lib.clara_unregister_tool.restype = c_int
    # void clara_call_result(clara_call *call, const char *result_json);
    lib.clara_call_result.argtypes = [c_void_p, c_char_p]
    lib.clara_call_result.restype = None
    # void clara_call_error(clara_call *call, const char *message);
    lib.clara_call_error.argtypes = [c_void_p, c_char_p]
    lib.clara_call_error.restype = None
    # const char *clara_strerror(int code);  static, never freed.
    lib.clara_strerror.argtypes = [c_int]
    lib.clara_strerror.restype = c_char_p


# ---- Helpers ----------------------------------------------------------------

def _to_bytes(value, what):
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


def _json_bytes(value, what):
    """dict/list -> compact JSON in UTF-8; str/bytes -> verbatim."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _to_bytes(value, what)


# The log handler is process-wide (the library is loaded once per process),
# so its keep-alive is module-wide too, not per Clara instance.
_log_lock = threading.Lock()
_log_keepalive = None   # the installed _LOG_FN object, or None
_log_lib = None         # the library it was installed in


def _make_trampoline(handler):
    def trampoline(_userdata, level, message):
        # Runs on a Clara (Go-owned) thread. Nothing may escape into C.
        try:
            text = message.decode("utf-8", "replace") if message is not None else ""
            handler(level, text)
        except BaseException:  # noqa: B036 - swallow everything, by design
            pass
    return _LOG_FN(trampoline)


@atexit.register
def _unhook_at_exit():
    # A message arriving while the interpreter shuts down would call into a
    # dead interpreter: restore the default handler first.
    global _log_keepalive, _log_lib
    with _log_lock:
        if _log_keepalive is not None and _log_lib is not None:
            try:
                _log_lib.clara_set_log_handler(_LOG_FN(), None, CLARA_LOG_OFF)
            except Exception:
                pass
            _log_keepalive = None
            _log_lib = None


# Tools are process-wide too. _tool_keepalive maps the integer id given to
# Clara as userdata to (ctypes callback, Python function). An entry is added
# before clara_register_tool is called and removed only by _free_userdata,
# which Clara calls exactly once when it no longer needs the callback.
_tool_lock = threading.Lock()
_tool_keepalive = {}    # id -> (_TOOL_FN object, func)
_tool_next_id = 1       # never 0: userdata 0 would be a NULL pointer
_tool_lib = None        # the library the tools were registered in (for atexit)


def _free_userdata(userdata):
    # Runs on whatever thread Clara releases the tool from (the caller of
    # clara_unregister_tool/clara_register_tool/clara_reset, or the thread
    # of the tool's last running call). Nothing may escape into C.
    entry = None
    try:
        with _tool_lock:
            entry = _tool_keepalive.pop(userdata, None)
        # The callback and func die here, outside the lock (a __del__ of
        # func may do anything, register a tool included).
        entry = None
    except BaseException:  # noqa: B036 - swallow everything, by design
        pass


# Module-level and never dropped: Clara may call it at any time, for tools
# registered through any Clara instance.
_FREE_USERDATA = _FREE_FN(_free_userdata)


def _error_text(exc):
    """"<ExceptionType>: <message>" (just the type when the message is
    empty), as bytes C can carry (UTF-8, no NUL)."""
    try:
        msg = str(exc)
    except BaseException:  # noqa: B036 - a broken __str__
        msg = ""
    text = "%s: %s" % (type(exc).__name__, msg) if msg else type(exc).__name__
    return text.encode("utf-8", "replace").replace(b"\0", b"\\0")


def _make_tool_trampoline(lib, func, returns):
    """The _TOOL_FN that runs func for Clara. It returns 0 after setting the
    result with clara_call_result, or 1 after clara_call_error."""
    call_result, call_error = lib.clara_call_result, lib.clara_call_error

    def trampoline(_userdata, arguments, call):
        # Runs on a Clara (Go-owned) thread, with the GIL taken by ctypes.
        # Nothing may escape into C: every exception becomes a tool error.
        try:
            args = json.loads(arguments.decode("utf-8")) if arguments is not None else {}
            result = func(args)
            if returns == "string":
                if not isinstance(result, str):
                    raise TypeError('a "returns": "string" tool must return str, not %s'
                                    % type(result).__name__)
                data = _to_bytes(result, "the tool's result")
            else:
                data = json.dumps(result, ensure_ascii=False, allow_nan=False,
                                  separators=(",", ":")).encode("utf-8")
            call_result(call, data)
            return 0
        except BaseException as e:  # noqa: B036 - by design
            try:
                call_error(call, _error_text(e))
            except BaseException:  # noqa: B036
                pass
            return 1
    return _TOOL_FN(trampoline)


@atexit.register
def _unregister_tools_at_exit():
    # No new call may enter the interpreter while it shuts down. (Calls that
    # are still running cannot be stopped; they should have returned.)
    with _tool_lock:
        lib = _tool_lib
        names = {}
        for cb, func in _tool_keepalive.values():
            names[getattr(cb, "_clara_name", None)] = True
    if lib is None:
        return
    for name in names:
        if name:
            try:
                lib.clara_unregister_tool(name.encode("utf-8"))
            except Exception:
                pass


# ---- The binding ------------------------------------------------------------

class Clara:
    """A handle on the loaded library.

    Clara's state (configuration, tools, log handler) is process-wide: every
    Clara instance over the same library shares it. Instances are cheap and
    thread-safe; there is nothing to close (the library cannot be unloaded).
    """

    def __init__(self, path=None):
        """Load the library (see the module docstring for the search order,
        or exactly `path` when given) and declare its functions."""
        self._lib, self.path = load_library(path)
        _declare(self._lib)

    # -- internals --

    def _take_string(self, ptr, what):
        """Copy a malloc'd char * returned by Clara into bytes and free it."""
        if not ptr:
            raise MemoryError("%s returned NULL (malloc failed)" % what)
        try:
            return ctypes.string_at(ptr)
        finally:
            self._lib.clara_free_string(ptr)

    # -- version --

    def version(self):
        """The loaded library's version, "MAJOR.MINOR.PATCH" (a static C
        string, copied; nothing to free)."""
        return self._lib.clara_version().decode("ascii")

    def version_number(self):
        """major*1000000 + minor*1000 + patch of the loaded library. Compare
        with CLARA_VERSION_NUMBER, the version this module was written for."""
        return self._lib.clara_version_number()

    # -- calls --

    def evaluate_raw(self, request):
        """Send request (str, encoded UTF-8, or bytes sent verbatim; None
        sends a NULL pointer) to clara_evaluate and return the envelope text
        (str). The C string is freed before this returns. Raises MemoryError
        if Clara returns NULL."""
        data = _to_bytes(request, "request")
        ptr = self._lib.clara_evaluate(data)
        return self._take_string(ptr, "clara_evaluate").decode("utf-8")

    def evaluate(self, request):
        """Serve one request and return the envelope parsed into a dict.

        request is a dict (sent as JSON, UTF-8, non-ASCII kept as is), or a
        str/bytes sent verbatim. Protocol errors come back as error
        envelopes ({"status": "error", "error": CODE, "message": ...}),
        not as exceptions."""
        return json.loads(self.evaluate_raw(_json_bytes(request, "request")))

    # -- configuration --

    def configure(self, config):
        """Apply configuration on top of the one in force and return the
        parsed envelope: {"status": "success", "result": {"config": {...}}}
        or an invalid_request envelope whose "details" lists each problem
        (then nothing was applied). config is a dict (sent as JSON) or a
        str/bytes of TOML or JSON text."""
        ptr = self._lib.clara_configure(_json_bytes(config, "config"))
        return json.loads(self._take_string(ptr, "clara_configure").decode("utf-8"))

    def reset(self):
        """Return to the default configuration (plus CLARA_CONFIG at load
        time) and return the parsed envelope. Meant for tests."""
        ptr = self._lib.clara_reset()
        return json.loads(self._take_string(ptr, "clara_reset").decode("utf-8"))

    # -- events --

    def emit_raw(self, event):
        """Send event (str/bytes verbatim; None sends a NULL pointer) to
        clara_emit and return the envelope text."""
        ptr = self._lib.clara_emit(_to_bytes(event, "event"))
        return self._take_string(ptr, "clara_emit").decode("utf-8")

    def emit(self, event, payload=None, session=None, trace=False):
        """Fire an event at the rules and return the parsed envelope:
        {"status": "success", "result": {"fired": [...], "notices": [...],
        "denied": None}} ("trace" too when asked). event is the event's name,
        or a dict sent as the whole request."""
        if isinstance(event, dict):
            request = event
        else:
            request = {"event": event}
            if payload is not None:
                request["payload"] = payload
            if session is not None:
                request["session"] = session
            if trace:
                request["trace"] = True
        return json.loads(self.emit_raw(_json_bytes(request, "event")))

    # -- reading JSON --

    def json_get_raw(self, doc, path):
        """clara_json_get as (kind, bytes): kind is a CLARA_JSON_* value and
        bytes the text Clara returned (None for CLARA_JSON_MISSING). Strings
        keep embedded NULs. The C string is freed before this returns.
        Raises ValueError on -CLARA_EINVAL (doc is not valid JSON),
        MemoryError on -CLARA_ENOMEM, ClaraError on any other code."""
        doc_b = _json_bytes(doc, "doc")
        path_b = _to_bytes(path, "path")
        if doc_b is None or path_b is None:
            raise TypeError("doc and path must not be None")
        text = ctypes.c_void_p()
        length = ctypes.c_size_t()
        kind = self._lib.clara_json_get(doc_b, path_b, ctypes.byref(text), ctypes.byref(length))
        try:
            if kind < 0:
                code = -kind
                msg = "clara_json_get(path=%r): %s" % (path, self.strerror(code))
                if code == CLARA_EINVAL:
                    raise ValueError(msg)
                if code == CLARA_ENOMEM:
                    raise MemoryError(msg)
                raise ClaraError(code, msg)
            if kind == CLARA_JSON_MISSING or not text.value:
                return kind, None
            return kind, ctypes.string_at(text.value, length.value)
        finally:
            if text.value:
                self._lib.clara_free_string(text.value)

    def json_get(self, doc, path, default=MISSING):
        """The value at a gjson path (e.g. "result.items.0.name",
        "details.#") in doc (str/bytes of JSON, or a dict/list), as a Python
        value:

            missing -> `default` (the MISSING sentinel unless given; note
                       MISSING is not None, so null and missing differ)
            null -> None,  true/false -> bool,  integer -> int,
            float (or an integer beyond 64 bits) -> float,
            string -> str (embedded NULs kept),
            array/object -> list/dict (parsed).

        Raises ValueError if doc is not valid JSON (-CLARA_EINVAL); note
        that Clara checks doc against limits.max_depth."""
        kind, raw = self.json_get_raw(doc, path)
        if kind == CLARA_JSON_MISSING:
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
        raise ClaraError(CLARA_EINTERNAL, "clara_json_get returned unknown kind %d" % kind)

    # -- status codes --

    def strerror(self, code):
        """Describe a status code (CLARA_E* or its negative). A static C
        string, copied; "unknown status code" for codes Clara lacks."""
        return self._lib.clara_strerror(code).decode("utf-8")

    # -- logging --

    def set_log_handler(self, handler, min_level=CLARA_LOG_INFO):
        """Send Clara's messages at min_level (CLARA_LOG_*) and above to
        handler(level: int, message: str); None restores the default
        (stderr at the CLARA_LOG level).

        handler is called from arbitrary threads owned by Clara, possibly
        concurrently: make it thread-safe and quick, and never call Clara
        from it. Any exception it raises is swallowed. This module keeps the
        ctypes callback object alive while it is installed and drops it once
        Clara guarantees the old handler is no longer running (when
        clara_set_log_handler returns)."""
        global _log_keepalive, _log_lib
        if handler is not None and not callable(handler):
            raise TypeError("handler must be callable or None")
        with _log_lock:
            if handler is None:
                new = None
                self._lib.clara_set_log_handler(_LOG_FN(), None, int(min_level))
            else:
                new = _make_trampoline(handler)
                self._lib.clara_set_log_handler(new, None, int(min_level))
            # Only now is the previous trampoline certainly idle.
            _log_keepalive = new
            _log_lib = self._lib if new is not None else None

    # -- tools --

    def register_tool(self, descriptor, func):
        """Register the Python callable func as a Clara tool and return its
        name.

        descriptor is a dict or JSON text (str/bytes) in the form of
        clara.h / docs/tools.md; only "name" is required:
            {"name": "add", "description": "...",
             "input_schema": {JSON Schema}, "returns": "json" | "string",
             "capabilities": [...], "limits": {"timeout_ms": ..., ...},
             "llm_visible": true}
        Clara validates the arguments against input_schema before func is
        called, as func(arguments: dict). For "returns": "json" (the
        default) the value func returns is sent as JSON (json.dumps,
        ensure_ascii=False; NaN and infinities refused); for "string" it
        must be a str and is the result text verbatim. Any exception raised
        by func, or a result that cannot be encoded, makes the call fail
        with tool_failed and the message "<ExceptionType>: <message>" (just
        the type's name when the message is empty; a NUL is written \\0);
        no exception ever reaches Clara, not even SystemExit or
        KeyboardInterrupt.

        A tool of the same name registered earlier (through this API, from
        Python or C) is replaced; calls already running finish with it.

        Ownership: this module keeps the ctypes callback and func alive in
        a module-level dict until Clara calls free_userdata for them, which
        happens once, after the tool is unregistered, replaced or dropped by
        reset() and its last running call has returned.

        Threads: func runs on Clara's threads (not the caller's), possibly
        several calls at once unless "limits": {"max_concurrency": 1};
        ctypes takes the GIL for each call. func may call Clara. A call
        that passes its timeout_ms (limits.timeout_ms of the configuration,
        1000 ms by default, unless the descriptor sets one) leaves the
        caller with "timeout" while func keeps running to its end (Python
        cannot be interrupted); its result is then discarded. Let such
        calls finish before the interpreter exits; at exit this module
        unregisters its tools so that no new call starts.

        Raises TypeError (func not callable, descriptor not a dict/str/
        bytes), ValueError (a NUL byte in the text), or ToolError with
        .code CLARA_EINVAL (invalid descriptor or schema; Clara logs the
        reason at error level) or CLARA_EPERM (the name of a built-in
        tool)."""
        global _tool_next_id, _tool_lib
        if not callable(func):
            raise TypeError("func must be callable")
        if descriptor is None:
            raise TypeError("descriptor must be a dict or JSON text, not None")
        data = _json_bytes(descriptor, "descriptor")
        try:
            parsed = json.loads(data.decode("utf-8"))
        except ValueError:
            parsed = None   # Clara says what is wrong (on the log)
        if not isinstance(parsed, dict):
            parsed = {}
        name = parsed.get("name") if isinstance(parsed.get("name"), str) else None
        returns = parsed.get("returns", "json")
        callback = _make_tool_trampoline(self._lib, func, returns)
        callback._clara_name = name
        with _tool_lock:
            ident = _tool_next_id
            _tool_next_id += 1
            _tool_keepalive[ident] = (callback, func)
            _tool_lib = self._lib
        # No lock held here: Clara may call _free_userdata from inside this
        # call (for this tool when it fails, for a replaced one otherwise).
        rc = self._lib.clara_register_tool(data, callback, ident, _FREE_USERDATA)
        if rc != CLARA_OK:
            code = -rc
            raise ToolError(code, "clara_register_tool(%r): %s" % (name, self.strerror(code)), name)
        return name

    def unregister_tool(self, name):
        """Remove a tool registered with register_tool() (or from C). Calls
        already running finish; then Clara releases the callback (see
        register_tool). Raises ToolError with .code CLARA_ENOENT (no such
        tool) or CLARA_EPERM (a built-in tool), TypeError for a name that
        is not str/bytes."""
        if name is None:
            raise TypeError("name must be str or bytes, not None")
        rc = self._lib.clara_unregister_tool(_to_bytes(name, "name"))
        if rc != CLARA_OK:
            code = -rc
            raise ToolError(code, "clara_unregister_tool(%r): %s" % (name, self.strerror(code)), name)


# ---- Module-level functions on a shared default instance ---------------------

_default = None
_default_lock = threading.Lock()


def _get():
    global _default
    c = _default
    if c is None:
        with _default_lock:
            if _default is None:
                _default = Clara()
            c = _default
    return c


def version():
    """See Clara.version."""
    return _get().version()


def version_number():
    """See Clara.version_number."""
    return _get().version_number()


def evaluate(request):
    """See Clara.evaluate."""
    return _get().evaluate(request)


def evaluate_raw(request):
    """See Clara.evaluate_raw."""
    return _get().evaluate_raw(request)


def configure(config):
    """See Clara.configure."""
    return _get().configure(config)


def reset():
    """See Clara.reset."""
    return _get().reset()


def emit(event, payload=None, session=None, trace=False):
    """See Clara.emit."""
    return _get().emit(event, payload, session, trace)


def json_get(doc, path, default=MISSING):
    """See Clara.json_get."""
    return _get().json_get(doc, path, default)


def json_get_raw(doc, path):
    """See Clara.json_get_raw."""
    return _get().json_get_raw(doc, path)


def strerror(code):
    """See Clara.strerror."""
    return _get().strerror(code)


def set_log_handler(handler, min_level=CLARA_LOG_INFO):
    """See Clara.set_log_handler."""
    return _get().set_log_handler(handler, min_level)


def register_tool(descriptor, func):
    """See Clara.register_tool."""
    return _get().register_tool(descriptor, func)


def unregister_tool(name):
    """See Clara.unregister_tool."""
    return _get().unregister_tool(name)
