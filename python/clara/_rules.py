# SPDX-License-Identifier: MIT
"""Rules whose condition and action are Python callables (seed 004's
Tier 1: plugin.registerRule({condition: () => ..., action})), registered
with clara_register_rule beside the rules of files.

Ownership: the ctypes callbacks and the callables are kept alive (a module
dict keyed by the integer given to Clara as userdata) until Clara calls
free_userdata, exactly once, after the rule was unregistered, replaced or
dropped by reset() and its functions' last running call returned (or at
once when the registration failed). Nothing raised by a callable crosses
into C: a condition's exception is a condition that cannot tell, an
action's is an action that failed ({"error": ...}).
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Union

from . import _binding, _json
from ._errors import RegistrationError
from ._library import CLARA_OK, FREE_FN, RULE_ACTION_FN, RULE_CONDITION_FN

if TYPE_CHECKING:
    from ._binding import Clara, Text

_log = logging.getLogger("clara")

#: What a rule's condition is given, and its action: the event as a dict,
#: {"rule", "event", "session", "context"}; or nothing, for a callable that
#: takes no argument (the seed's `condition: () => true`).
Condition = Callable[..., Any]
Action = Callable[..., Any]


def _takes_event(fn: Callable[..., Any]) -> bool:
    """Whether fn takes the event: it has a positional parameter."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
               for p in sig.parameters.values())


def _event(data: Optional[bytes]) -> Dict[str, Any]:
    ev = _json.loads(data.decode("utf-8")) if data is not None else {}
    return ev if isinstance(ev, dict) else {}


def actions_json(answer: Any) -> Optional[bytes]:
    """The JSON of what an action returned: None for None, one action (a
    mapping) or a list of them."""
    if answer is None:
        return None
    if isinstance(answer, Mapping):
        return _json.dumps(dict(answer)).encode("utf-8")
    if isinstance(answer, (list, tuple)):
        return _json.dumps([dict(a) if isinstance(a, Mapping) else a for a in answer]).encode("utf-8")
    raise TypeError("a rule's action returns None, an action (a dict) or a list of actions, not %s"
                    % type(answer).__name__)


def _strdup(data: bytes) -> Optional[int]:
    ptr = _binding._libc.strdup(data)
    return int(ptr) if ptr else None


def _make_condition(fn: Condition, rule_id: str) -> Any:
    with_event = _takes_event(fn)

    def trampoline(_userdata: Any, event: Optional[bytes]) -> int:
        # Runs on the thread that fires the event, with the GIL taken by
        # ctypes. Nothing may escape into C.
        try:
            return 1 if (fn(_event(event)) if with_event else fn()) else 0
        except BaseException:  # noqa: B036 - by design: a condition that cannot tell
            try:
                if _log.isEnabledFor(logging.DEBUG):
                    _log.debug("the condition of rule %r raised; it cannot tell", rule_id, exc_info=True)
            except BaseException:  # noqa: B036
                pass
            return -1

    return RULE_CONDITION_FN(trampoline)


def _make_action(fn: Action, rule_id: str) -> Any:
    with_event = _takes_event(fn)

    def trampoline(_userdata: Any, event: Optional[bytes]) -> Optional[int]:
        try:
            data = actions_json(fn(_event(event)) if with_event else fn())
            return None if data is None else _strdup(data)
        except BaseException as e:  # noqa: B036 - by design: the action failed
            try:
                why = _binding._error_text(e).decode("utf-8", "replace")
                if _log.isEnabledFor(logging.DEBUG):
                    _log.debug("the action of rule %r raised %s", rule_id, type(e).__name__, exc_info=True)
                return _strdup(json.dumps({"error": why}).encode("utf-8"))
            except BaseException:  # noqa: B036
                return None

    return RULE_ACTION_FN(trampoline)


class _Entry:
    __slots__ = ("condition", "action", "funcs", "id")

    def __init__(self, condition: Any, action: Any, funcs: Any, rule_id: str) -> None:
        self.condition, self.action, self.funcs, self.id = condition, action, funcs, rule_id


_lock = threading.Lock()
_kept: Dict[int, _Entry] = {}
_next_id = 1      # never 0: userdata 0 would be a NULL pointer
_lib: Any = None  # the library the rules were registered in (for atexit)


def _free(userdata: Optional[int]) -> None:
    # Runs on whatever thread Clara lets go of the rule from. Nothing may
    # escape into C.
    try:
        with _lock:
            entry = _kept.pop(userdata or 0, None)
        entry = None  # the callables die here, outside the lock
    except BaseException:  # noqa: B036
        pass


_FREE = FREE_FN(_free)


def register(owner: "Clara", descriptor: Union[Mapping[str, Any], "Text"], condition: Optional[Condition],
             action: Optional[Action]) -> str:
    """See Clara.register_rule."""
    global _next_id, _lib
    if descriptor is None:
        raise TypeError("descriptor must be a dict or JSON text, not None")
    for what, fn in (("condition", condition), ("action", action)):
        if fn is not None and not callable(fn):
            raise TypeError("%s must be callable or None" % what)
    data = _binding._json_bytes(dict(descriptor) if isinstance(descriptor, Mapping) else descriptor, "descriptor")
    assert data is not None
    try:
        parsed = json.loads(data.decode("utf-8"))
    except ValueError:
        parsed = None   # JSON5, or wrong: Clara says (on the log)
    rule_id = "?"
    if isinstance(parsed, dict) and isinstance(parsed.get("id"), str):
        rule_id = parsed["id"]
    cond = _make_condition(condition, rule_id) if condition is not None else RULE_CONDITION_FN()
    act = _make_action(action, rule_id) if action is not None else RULE_ACTION_FN()
    with _lock:
        ident = _next_id
        _next_id += 1
        _kept[ident] = _Entry(cond, act, (condition, action), rule_id)
        _lib = owner._lib
    # No lock held: Clara may call _free from inside this call.
    rc = owner._lib.clara_register_rule(data, cond, act, ident, _FREE)
    if rc != CLARA_OK:
        code = -rc
        raise RegistrationError(code, "clara_register_rule(%r): %s" % (rule_id, owner.strerror(code)), rule_id)
    return rule_id


def unregister(owner: "Clara", rule_id: str) -> None:
    """See Clara.unregister_rule."""
    if not isinstance(rule_id, str):
        raise TypeError("the rule's id must be str, not %s" % type(rule_id).__name__)
    data = _binding._to_bytes(rule_id, "id")
    rc = owner._lib.clara_unregister_rule(data)
    if rc != CLARA_OK:
        code = -rc
        raise RegistrationError(code, "clara_unregister_rule(%r): %s" % (rule_id, owner.strerror(code)), rule_id)


def _unregister_all() -> None:
    # At exit: no rule may call into the interpreter while it shuts down.
    with _lock:
        lib, ids = _lib, sorted({e.id for e in _kept.values()})
    if lib is None:
        return
    for rule_id in ids:
        try:
            lib.clara_unregister_rule(rule_id.encode("utf-8"))
        except Exception:
            pass


# Run by _binding's atexit function, after the tools are unregistered.
_binding._shutdown_hooks.append(_unregister_all)
