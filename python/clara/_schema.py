# SPDX-License-Identifier: MIT
"""A tool's input_schema from a Python function's signature and type hints,
and the conversions its arguments need on the way in.

    int -> {"type": "integer"}      float -> {"type": "number"}
    str -> {"type": "string"}       bool -> {"type": "boolean"}
    None -> {"type": "null"}        Any, object, no hint -> {}
    list[T] -> {"type": "array", "items": T}           (list -> any items)
    dict[str, T] -> {"type": "object", "additionalProperties": T}
    Optional[T] -> {"anyOf": [T, {"type": "null"}]}    Union[A, B] -> anyOf
    Literal["a", "b"] -> {"type": "string", "enum": ["a", "b"]}
    TypedDict, dataclass -> {"type": "object", "properties": ..., "required":
        [the keys without default], "additionalProperties": false}
    Annotated[T, "text"] -> T's schema with "description": "text"

The function's parameters become the properties of an object; a parameter
with a default is not required, and its default is written as "default"
when it is plain JSON. **kwargs admits other properties (of its hint).
Anything else (tuples, sets, classes of your own, *args, positional-only
parameters) is refused with TypeError when the tool is declared, naming
the parameter.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import types
import typing
from typing import Any, Callable, Dict, List, Optional, Tuple

Schema = Dict[str, Any]
Converter = Callable[[Any], Any]

_NoneType = type(None)
_UnionType: Any = getattr(types, "UnionType", None)        # X | Y, Python 3.10+
_WRAPPERS = tuple(w for w in (getattr(typing, "Required", None), getattr(typing, "NotRequired", None))
                  if w is not None)


# (get_origin first: before 3.11, list[int] passes isinstance(..., type).)
def _is_typeddict(tp: Any) -> bool:
    return typing.get_origin(tp) is None and isinstance(tp, type) and issubclass(tp, dict) \
        and hasattr(tp, "__total__") and hasattr(tp, "__required_keys__")


def _is_dataclass_type(tp: Any) -> bool:
    return typing.get_origin(tp) is None and isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _hints(obj: Any, where: str) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception as e:  # NameError for an unresolvable forward reference, ...
        raise TypeError("%s: cannot read the type hints: %s: %s" % (where, type(e).__name__, e)) from None


def _plain_json(value: Any) -> bool:
    """Whether value is written the same as JSON and read back equal."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    return False


def _unwrap(tp: Any) -> Tuple[Any, Optional[str]]:
    """Strip Annotated (keeping its first str as a description) and
    Required/NotRequired."""
    description = None
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            args = typing.get_args(tp)
            for meta in args[1:]:
                if isinstance(meta, str) and description is None:
                    description = meta
            tp = args[0]
        elif _WRAPPERS and origin in _WRAPPERS:
            tp = typing.get_args(tp)[0]
        else:
            return tp, description


def type_schema(tp: Any, where: str, seen: Tuple[type, ...] = ()) -> Schema:
    """The JSON Schema of one type hint. where names it in errors."""
    tp, description = _unwrap(tp)
    schema = _type_schema(tp, where, seen)
    if description is not None:
        schema = dict(schema)
        schema["description"] = description
    return schema


def _type_schema(tp: Any, where: str, seen: Tuple[type, ...]) -> Schema:
    if tp is Any or tp is object or tp is inspect.Parameter.empty:
        return {}
    if tp is None or tp is _NoneType:
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp is list or tp is typing.List:
        return {"type": "array"}
    if tp is dict or tp is typing.Dict:
        return {"type": "object"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list:
        return {"type": "array", "items": type_schema(args[0], where + "[]", seen)}
    if origin is dict:
        if args[0] is not str:
            raise TypeError("%s: dict keys must be str (JSON object keys), not %s" % (where, _name(args[0])))
        return {"type": "object", "additionalProperties": type_schema(args[1], where + "{}", seen)}
    if origin is typing.Union or (_UnionType is not None and origin is _UnionType):
        arms = [a for a in args if a is not _NoneType]
        schemas = [type_schema(a, where, seen) for a in arms]
        if len(arms) < len(args):
            schemas.append({"type": "null"})
        return {"anyOf": schemas}
    if origin is typing.Literal:
        values = list(args)
        for v in values:
            if not (v is None or isinstance(v, (bool, int, str))):
                raise TypeError("%s: Literal values must be str, int, bool or None, not %r" % (where, v))
        kinds = {_json_type(v) for v in values}
        if len(kinds) == 1:
            return {"type": kinds.pop(), "enum": values}
        return {"enum": values}
    if _is_typeddict(tp) or _is_dataclass_type(tp):
        if tp in seen:
            raise TypeError("%s: %s refers to itself; recursive types are not supported" % (where, tp.__name__))
        return _object_schema(tp, where, seen + (tp,))
    raise TypeError("%s: unsupported type hint %s (supported: int, float, str, bool, None, list[T], "
                    "dict[str, T], Optional, Union, Literal, TypedDict, dataclasses, Any)" % (where, _name(tp)))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "string"


def _name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else repr(tp)


def _object_schema(tp: type, where: str, seen: Tuple[type, ...]) -> Schema:
    hints = _hints(tp, where)
    properties: Schema = {}
    required: List[str] = []
    if _is_typeddict(tp):
        required_keys: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
        for key, hint in hints.items():
            properties[key] = type_schema(hint, "%s.%s" % (where, key), seen)
            if key in required_keys:
                required.append(key)
    else:
        for field in dataclasses.fields(tp):
            if not field.init:
                continue
            properties[field.name] = type_schema(hints.get(field.name, Any), "%s.%s" % (where, field.name), seen)
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                required.append(field.name)
            elif field.default is not dataclasses.MISSING and _plain_json(field.default):
                properties[field.name]["default"] = field.default
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def function_schema(fn: Callable[..., Any], where: str) -> Schema:
    """The input_schema of fn's keyword parameters (see the module doc)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TypeError("%s: no signature: %s" % (where, e)) from None
    hints = _hints(fn, where)
    properties: Schema = {}
    required: List[str] = []
    additional: Any = False      # no **kwargs: no other property
    for p in signature.parameters.values():
        pwhere = "%s, parameter %r" % (where, p.name)
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError("%s: positional-only parameters cannot be given by name" % pwhere)
        if p.kind is p.VAR_POSITIONAL:
            raise TypeError("%s: *args cannot be given by name" % pwhere)
        if p.kind is p.VAR_KEYWORD:
            additional = type_schema(hints[p.name], pwhere) if p.name in hints else {}
            continue
        schema = type_schema(hints.get(p.name, Any), pwhere)
        if p.default is p.empty:
            required.append(p.name)
        elif _plain_json(p.default):
            schema = dict(schema)
            schema["default"] = p.default
        properties[p.name] = schema
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    if additional is False or additional:   # not for **kwargs of any type ({} or no hint)
        out["additionalProperties"] = additional
    return out


# ---- Arguments in -------------------------------------------------------------

def converter(tp: Any, seen: Tuple[type, ...] = ()) -> Optional[Converter]:
    """A function turning the JSON value of a tp-typed argument into what
    the function expects (dataclass instances, also inside lists, dicts and
    Optional), or None when the JSON value is already right."""
    tp, _ = _unwrap(tp)
    if tp in seen:
        return None      # a recursive type (only with an explicit input_schema): left as JSON
    seen = seen + (tp,) if isinstance(tp, type) else seen
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if _is_dataclass_type(tp):
        return _dataclass_converter(tp, seen)
    if _is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        inner = {k: c for k, c in ((k, converter(h, seen)) for k, h in hints.items()) if c is not None}
        if not inner:
            return None

        def typed_dict(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: (inner[k](v) if k in inner else v) for k, v in value.items()}
            return value
        return typed_dict
    if origin is list and args:
        maybe_item = converter(args[0], seen)
        if maybe_item is None:
            return None
        item: Converter = maybe_item
        return lambda value: [item(v) for v in value] if isinstance(value, list) else value
    if origin is dict and len(args) == 2:
        maybe_value = converter(args[1], seen)
        if maybe_value is None:
            return None
        inner_value: Converter = maybe_value
        return lambda value: ({k: inner_value(v) for k, v in value.items()}
                              if isinstance(value, dict) else value)
    if origin is typing.Union or (_UnionType is not None and origin is _UnionType):
        arms = [a for a in args if a is not _NoneType]
        if len(arms) == 1:   # Optional[T]: null stays None
            maybe_arm = converter(arms[0], seen)
            if maybe_arm is None:
                return None
            inner_arm: Converter = maybe_arm
            return lambda value: None if value is None else inner_arm(value)
        return None          # a union of several types: the JSON value as is
    return None


def _dataclass_converter(tp: type, seen: Tuple[type, ...]) -> Converter:
    hints = typing.get_type_hints(tp, include_extras=True)
    fields = [f for f in dataclasses.fields(tp) if f.init]
    inner: Dict[str, Converter] = {}
    for f in fields:
        c = converter(hints.get(f.name, Any), seen)
        if c is not None:
            inner[f.name] = c

    def build(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return tp(**{k: (inner[k](v) if k in inner else v) for k, v in value.items()})
    return build


def parameter_converters(fn: Callable[..., Any]) -> Dict[str, Converter]:
    """{parameter name: converter} for the parameters that need one."""
    hints = typing.get_type_hints(fn, include_extras=True)
    out: Dict[str, Converter] = {}
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name in hints:
            c = converter(hints[name])
            if c is not None:
                out[name] = c
    return out

