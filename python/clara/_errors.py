# SPDX-License-Identifier: MIT
"""The exceptions: one class per error code of the protocol (SPEC §2), and
RegistrationError for the integer status codes of tool registration."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type


class ClaraError(Exception):
    """A call Clara refused or that failed. Every exception this package
    raises for Clara's reasons is one.

    .code      the protocol's error code ("unknown_tool", "invalid_args", ...)
    .message   the envelope's message, for people (also str(error))
    .details   the envelope's details, for programs (None when absent)
    .envelope  the whole error envelope as a dict (None when the error did
               not come from an envelope)
    """

    code: str = "error"

    def __init__(self, message: str, *, code: Optional[str] = None, details: Any = None,
                 envelope: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details = details
        self.envelope = envelope

    def __repr__(self) -> str:
        return "%s(%r, code=%r)" % (type(self).__name__, self.message, self.code)

    def __reduce__(self) -> Any:
        # Exceptions pickle as cls(*args) by default, which would lose the
        # keyword attributes (multiprocessing pickles what a child raises).
        return (_restore, (type(self), self.message, dict(self.__dict__)))

    @classmethod
    def from_envelope(cls, envelope: Mapping[str, Any]) -> ClaraError:
        """The exception for an error envelope: the subclass of its code,
        or ClaraError itself for a code this package does not know."""
        code = envelope.get("error")
        code = code if isinstance(code, str) else "error"
        message = envelope.get("message")
        message = message if isinstance(message, str) else code
        klass = _BY_CODE.get(code, ClaraError)
        return klass(message, code=code, details=envelope.get("details"), envelope=dict(envelope))


def _restore(klass: Type[ClaraError], message: str, state: Dict[str, Any]) -> ClaraError:
    error = klass.__new__(klass)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class InvalidJSON(ClaraError):
    """invalid_json: not JSON, not an object, invalid UTF-8, empty input."""
    code = "invalid_json"


class InvalidRequest(ClaraError):
    """invalid_request: a known field has the wrong type, or a request limit
    (max_request_bytes, max_depth) was exceeded; also an invalid
    configuration."""
    code = "invalid_request"


class UnknownTool(ClaraError):
    """unknown_tool: no tool of that name."""
    code = "unknown_tool"


class InvalidArgs(ClaraError):
    """invalid_args: the arguments do not match the tool's input_schema;
    .details lists every violation ({"pointer": ..., "message": ...})."""
    code = "invalid_args"


class Denied(ClaraError):
    """denied: policy or a rule refused the call; the message says which."""
    code = "denied"


class RateLimited(ClaraError):
    """rate_limited: the tool's rate_per_min is spent."""
    code = "rate_limited"

    @property
    def retry_after_ms(self) -> Optional[int]:
        """How long until the next call may pass (details.retry_after_ms)."""
        if isinstance(self.details, dict):
            value = self.details.get("retry_after_ms")
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None


class Timeout(ClaraError):
    """timeout: the tool ran past its timeout_ms."""
    code = "timeout"


class OutputTooLarge(ClaraError):
    """output_too_large: a JSON result larger than max_output_bytes."""
    code = "output_too_large"


class ToolFailed(ClaraError):
    """tool_failed: the tool reported an error; the message is the tool's
    (for a Python tool: "<ExceptionType>: <message>")."""
    code = "tool_failed"


class InternalError(ClaraError):
    """internal: a bug in Clara; the message is redacted, the details are
    on Clara's log."""
    code = "internal"


class BudgetExhausted(ClaraError):
    """budget_exhausted: the tool's budget of calls per chat or per session
    is spent (max_calls_per_chat, max_calls_per_session); .details is
    {"tool", "budget", "limit"}."""
    code = "budget_exhausted"


class Blocked(ClaraError):
    """blocked: a rule blocked the tool's result (on_tool_complete) or the
    chat's answer (on_answer); .details is {"rule", "reason"}."""
    code = "blocked"


class Unavailable(ClaraError):
    """unavailable: the call needs the shared store (store.backend =
    "postgres"), which did not answer in time; .details is {"store"}."""
    code = "unavailable"


_BY_CODE: Dict[str, Type[ClaraError]] = {
    k.code: k for k in (InvalidJSON, InvalidRequest, UnknownTool, InvalidArgs, Denied, RateLimited,
                        Timeout, OutputTooLarge, ToolFailed, InternalError, BudgetExhausted, Blocked,
                        Unavailable)
}


class RegistrationError(ClaraError):
    """register_tool(), @tool or unregister_tool() failed.

    .errno  the positive CLARA_E* status code: CLARA_EINVAL (an invalid
            descriptor or schema; Clara logs the reason at error level),
            CLARA_EPERM (the name of a built-in tool), CLARA_ENOENT (no such
            tool)
    .code   the same as a name: "einval", "eperm", "enoent", ...
    .name   the tool's name (None if the descriptor had none)
    """

    def __init__(self, errno: int, message: str, name: Optional[str] = None) -> None:
        super().__init__(message, code=_STATUS_NAMES.get(errno, "e%d" % errno))
        self.errno = errno
        self.name = name


_STATUS_NAMES = {1: "einval", 2: "enomem", 3: "einternal", 4: "enoent", 5: "eperm"}

#: The name of RegistrationError in version 0.1 of the one-file module.
ToolError = RegistrationError


def check(envelope: Mapping[str, Any]) -> Any:
    """The result of a success envelope; raises the ClaraError subclass of
    an error envelope (see evaluate())."""
    if envelope.get("status") == "error":
        raise ClaraError.from_envelope(envelope)
    return envelope.get("result")
