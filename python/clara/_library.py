# SPDX-License-Identifier: MIT
"""Finding and loading libclara, and the C declarations of include/clara.h.

This module is the only one that knows the C types. It sets argtypes and
restype of every function of the header: every `char *` the library returns
is malloc'd and owned by the caller, so those functions are declared with
restype c_void_p (never c_char_p, which would copy the bytes and lose the
pointer that clara_free_string needs).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Iterator, List, Tuple

from ._version import __version__

# ---- Constants of include/clara.h ------------------------------------------

CLARA_VERSION: str = __version__
CLARA_VERSION_MAJOR, CLARA_VERSION_MINOR, CLARA_VERSION_PATCH = (int(p) for p in __version__.split("."))
CLARA_VERSION_NUMBER: int = CLARA_VERSION_MAJOR * 1000000 + CLARA_VERSION_MINOR * 1000 + CLARA_VERSION_PATCH

CLARA_OK = 0
CLARA_EINVAL = 1      # an argument is NULL or invalid
CLARA_ENOMEM = 2      # malloc failed
CLARA_EINTERNAL = 3   # a bug in Clara; details are on the log
CLARA_ENOENT = 4      # no such tool, or no such asynchronous call
CLARA_EPERM = 5       # not allowed on a built-in tool
CLARA_EBUSY = 6       # too many asynchronous calls running (async.max_running)

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

# ---- C function types --------------------------------------------------------
# (Typed Any: ctypes builds these classes at run time; calling one with no
# argument makes the NULL function pointer.)

# clara_log_fn: void (*)(void *userdata, int level, const char *message).
# The message is borrowed; ctypes copies it into bytes.
LOG_FN: Any = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
EVENT_FN: Any = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)

# clara_input_fn: char *(*)(void *userdata, const char *request_json). The
# answer is malloc'd (Clara frees it); c_void_p so that ctypes hands the
# pointer over untouched. NULL declines.
INPUT_FN: Any = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)

# clara_approval_fn: char *(*)(void *userdata, const char *request_json).
# The decision is malloc'd JSON (Clara frees it); NULL decides nothing now.
APPROVAL_FN: Any = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)

# clara_tool_fn: int (*)(void *userdata, const char *arguments_json,
# clara_call *call). clara_call is opaque: a c_void_p.
TOOL_FN: Any = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)

# clara_rule_condition_fn: int (*)(void *userdata, const char *event_json):
# positive matches, 0 does not, negative cannot tell.
RULE_CONDITION_FN: Any = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)

# clara_rule_action_fn: char *(*)(void *userdata, const char *event_json).
# The answer is malloc'd JSON (Clara frees it); NULL asks for nothing.
RULE_ACTION_FN: Any = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)

# free_userdata: void (*)(void *userdata).
FREE_FN: Any = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# The file a wheel carries inside the package (the library's soname).
BUNDLED_NAME = "libclara.so.0"
SONAME = "libclara.so.0"


def candidates() -> Iterator[Tuple[str, str]]:
    """Yield (what, path or name) in the order the library is sought: the
    copy bundled in the package, CLARA_LIBRARY, then the soname through the
    dynamic loader."""
    here = os.path.dirname(os.path.abspath(__file__))
    yield "bundled", os.path.join(here, BUNDLED_NAME)
    env = os.environ.get("CLARA_LIBRARY")
    if env:
        yield "CLARA_LIBRARY", env
    yield "dynamic loader", SONAME


def load_library(path: str | os.PathLike[str] | None = None) -> Tuple[ctypes.CDLL, str]:
    """Load libclara and return (the ctypes.CDLL, the path or name loaded).

    With path, only that path is tried. Raises OSError listing every attempt
    when nothing loads. The prototypes are set by declare()."""
    tried: List[str] = []
    if path is not None:
        cands = [("argument", os.fspath(path))]
    else:
        cands = list(candidates())
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


def declare(lib: ctypes.CDLL) -> None:
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
    # int clara_audit_reopen(void);  int clara_telemetry_flush(int timeout_ms);
    lib.clara_audit_reopen.argtypes = []
    lib.clara_audit_reopen.restype = c_int
    lib.clara_telemetry_flush.argtypes = [c_int]
    lib.clara_telemetry_flush.restype = c_int
    # char *clara_emit(const char *event_json);  malloc'd: c_void_p.
    lib.clara_emit.argtypes = [c_char_p]
    lib.clara_emit.restype = c_void_p
    # int clara_json_get(const char *json, const char *path, char **text,
    #                    size_t *length);  *text is malloc'd: c_void_p.
    lib.clara_json_get.argtypes = [c_char_p, c_char_p,
                                   ctypes.POINTER(c_void_p),
                                   ctypes.POINTER(ctypes.c_size_t)]
    lib.clara_json_get.restype = c_int
    # void clara_set_log_handler(clara_log_fn fn, void *userdata, int min_level);
    lib.clara_set_log_handler.argtypes = [LOG_FN, c_void_p, c_int]
    lib.clara_set_log_handler.restype = None
    # int clara_register_tool(const char *descriptor_json, clara_tool_fn fn,
    #                         void *userdata, void (*free_userdata)(void *));
    lib.clara_register_tool.argtypes = [c_char_p, TOOL_FN, c_void_p, FREE_FN]
    lib.clara_register_tool.restype = c_int
    # int clara_register_rule(const char *descriptor_json, clara_rule_condition_fn condition,
    #                         clara_rule_action_fn action, void *userdata, void (*free_userdata)(void *));
    lib.clara_register_rule.argtypes = [c_char_p, RULE_CONDITION_FN, RULE_ACTION_FN, c_void_p, FREE_FN]
    lib.clara_register_rule.restype = c_int
    # int clara_unregister_rule(const char *id);
    lib.clara_unregister_rule.argtypes = [c_char_p]
    lib.clara_unregister_rule.restype = c_int
    # int clara_unregister_tool(const char *name);
    lib.clara_unregister_tool.argtypes = [c_char_p]
    lib.clara_unregister_tool.restype = c_int
    # int clara_set_tool_limits(const char *name, const char *limits_json);
    lib.clara_set_tool_limits.argtypes = [c_char_p, c_char_p]
    lib.clara_set_tool_limits.restype = c_int
    # int clara_json5_to_json(const char *text, char **json);
    lib.clara_json5_to_json.argtypes = [c_char_p, ctypes.POINTER(c_void_p)]
    lib.clara_json5_to_json.restype = c_int
    # void clara_call_result(clara_call *call, const char *result_json);
    lib.clara_call_result.argtypes = [c_void_p, c_char_p]
    lib.clara_call_result.restype = None
    # void clara_call_error(clara_call *call, const char *message);
    lib.clara_call_error.argtypes = [c_void_p, c_char_p]
    lib.clara_call_error.restype = None
    # void clara_call_progress(clara_call *call, double done, double total, const char *message);
    lib.clara_call_progress.argtypes = [c_void_p, ctypes.c_double, ctypes.c_double, c_char_p]
    lib.clara_call_progress.restype = None
    # void clara_call_log(clara_call *call, int level, const char *message);
    lib.clara_call_log.argtypes = [c_void_p, c_int, c_char_p]
    lib.clara_call_log.restype = None
    # char *clara_call_session(clara_call *call);  malloc'd: c_void_p.
    lib.clara_call_session.argtypes = [c_void_p]
    lib.clara_call_session.restype = c_void_p
    # int clara_call_cancelled(clara_call *call);
    lib.clara_call_cancelled.argtypes = [c_void_p]
    lib.clara_call_cancelled.restype = c_int
    # char *clara_call_evaluate(clara_call *call, const char *request_json);  malloc'd.
    lib.clara_call_evaluate.argtypes = [c_void_p, c_char_p]
    lib.clara_call_evaluate.restype = c_void_p
    # MCP (docs/mcp.md).
    lib.clara_mcp_serve_stdio.argtypes = [c_int, c_int]
    lib.clara_mcp_serve_stdio.restype = c_int
    lib.clara_mcp_listen.argtypes = [c_char_p]
    lib.clara_mcp_listen.restype = c_void_p
    lib.clara_mcp_stop.argtypes = []
    lib.clara_mcp_stop.restype = None
    lib.clara_set_event_handler.argtypes = [EVENT_FN, c_void_p]
    lib.clara_set_event_handler.restype = None
    lib.clara_set_input_handler.argtypes = [INPUT_FN, c_void_p]
    lib.clara_set_input_handler.restype = None
    lib.clara_set_approval_handler.argtypes = [APPROVAL_FN, c_void_p]
    lib.clara_set_approval_handler.restype = None
    # Asynchronous calls (docs/async.md).
    lib.clara_submit.argtypes = [c_char_p]
    lib.clara_submit.restype = ctypes.c_int64
    lib.clara_ready.argtypes = [ctypes.c_int64]
    lib.clara_ready.restype = c_int
    lib.clara_wait.argtypes = [ctypes.c_int64, c_int]
    lib.clara_wait.restype = c_void_p
    lib.clara_cancel.argtypes = [ctypes.c_int64]
    lib.clara_cancel.restype = c_int
    lib.clara_async_fd.argtypes = []
    lib.clara_async_fd.restype = c_int
    lib.clara_async_take.argtypes = [c_int]
    lib.clara_async_take.restype = c_void_p
    # const char *clara_strerror(int code);  static, never freed.
    lib.clara_strerror.argtypes = [c_int]
    lib.clara_strerror.restype = c_char_p
