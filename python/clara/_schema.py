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
    a pydantic model -> its model_json_schema() (duck-typed: any class with
        model_json_schema and model_validate; pydantic is never imported),
        its "$defs" moved to the top of the tool's schema

The function's parameters become the properties of an object; a parameter
with a default is not required, and its default is written as "default"
when it is plain JSON; the docstring's description of a parameter
(_docstring) becomes its "description" unless Annotated gave one.
**kwargs admits other properties (of its hint). Anything else (tuples,
sets, classes of your own, *args, positional-only parameters) is refused
with TypeError when the tool is declared, naming the parameter.

The return annotation gives the output_schema when its schema describes an
object (a TypedDict, a dataclass, a pydantic model, dict): MCP's
outputSchema is always an object. Clara checks every result against it. A
dataclass's schema as a result lists all its fields, all required (what
dataclasses.asdict writes); a pydantic model's is its serialization schema.
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


def is_pydantic_model(tp: Any) -> bool:
    """A pydantic (v2) model class, by duck typing: pydantic is not a
    dependency and is never imported here."""
    return typing.get_origin(tp) is None and isinstance(tp, type) \
        and callable(getattr(tp, "model_json_schema", None)) and callable(getattr(tp, "model_validate", None))


def _pydantic_schema(tp: Any, where: str, output: bool) -> Schema:
    try:
        schema = tp.model_json_schema(mode="serialization" if output else "validation")
    except TypeError:   # a model_json_schema without mode
        schema = tp.model_json_schema()
    except Exception as e:
        raise TypeError("%s: %s.model_json_schema() failed: %s: %s" % (where, tp.__name__, type(e).__name__, e)) from None
    if not isinstance(schema, dict):
        raise TypeError("%s: %s.model_json_schema() returned %s, not a dict" % (where, tp.__name__, type(schema).__name__))
    return schema


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


def type_schema(tp: Any, where: str, seen: Tuple[type, ...] = (), output: bool = False) -> Schema:
    """The JSON Schema of one type hint. where names it in errors; output:
    of a result (what the package writes) rather than of an argument."""
    tp, description = _unwrap(tp)
    schema = _type_schema(tp, where, seen, output)
    if description is not None:
        schema = dict(schema)
        schema["description"] = description
    return schema


def _type_schema(tp: Any, where: str, seen: Tuple[type, ...], output: bool) -> Schema:
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
        return {"type": "array", "items": type_schema(args[0], where + "[]", seen, output)}
    if origin is dict:
        if args[0] is not str:
            raise TypeError("%s: dict keys must be str (JSON object keys), not %s" % (where, _name(args[0])))
        return {"type": "object", "additionalProperties": type_schema(args[1], where + "{}", seen, output)}
    if origin is typing.Union or (_UnionType is not None and origin is _UnionType):
        arms = [a for a in args if a is not _NoneType]
        schemas = [type_schema(a, where, seen, output) for a in arms]
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
        return _object_schema(tp, where, seen + (tp,), output)
    if is_pydantic_model(tp):
        return _pydantic_schema(tp, where, output)
    raise TypeError("%s: unsupported type hint %s (supported: int, float, str, bool, None, list[T], "
                    "dict[str, T], Optional, Union, Literal, TypedDict, dataclasses, pydantic models, Any)"
                    % (where, _name(tp)))


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


def _object_schema(tp: type, where: str, seen: Tuple[type, ...], output: bool) -> Schema:
    hints = _hints(tp, where)
    properties: Schema = {}
    required: List[str] = []
    if _is_typeddict(tp):
        required_keys: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
        for key, hint in hints.items():
            properties[key] = type_schema(hint, "%s.%s" % (where, key), seen, output)
            if key in required_keys:
                required.append(key)
    else:
        for field in dataclasses.fields(tp):
            if not field.init and not output:
                continue
            properties[field.name] = type_schema(hints.get(field.name, Any), "%s.%s" % (where, field.name), seen, output)
            if output or (field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING):
                required.append(field.name)
            elif field.default is not dataclasses.MISSING and _plain_json(field.default):
                properties[field.name]["default"] = field.default
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


# The keywords whose values are schemas (a dict of them, a list of them, one).
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedItems", "unevaluatedProperties")


def hoist_defs(schema: Schema, where: str) -> Schema:
    """schema with the "$defs" of its subschemas (a pydantic model's) moved
    to its top, where their "$ref": "#/$defs/NAME" point. Two definitions
    of one name that differ are refused."""
    defs: Schema = {}

    def walk(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out: Schema = {}
        for key, value in node.items():
            if key == "$defs" and isinstance(value, dict):
                for name, definition in value.items():
                    definition = walk(definition)
                    if name in defs and defs[name] != definition:
                        raise TypeError("%s: two different types are both called %r in the schema; rename one"
                                        % (where, name))
                    defs[name] = definition
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {k: walk(v) for k, v in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [walk(v) for v in value]
            elif key in _SCHEMA_ONE:
                out[key] = walk(value)
            else:
                out[key] = value
        return out

    body: Schema = walk(schema)
    if defs:
        body["$defs"] = defs
    return body


def return_schema(fn: Callable[..., Any], where: str) -> Optional[Schema]:
    """The output_schema of fn's return annotation: its schema when that
    describes an object, else None (no annotation, another type, or one the
    package cannot express)."""
    try:
        hint = _hints(fn, where).get("return")
        if hint is None:
            return None
        schema = hoist_defs(type_schema(hint, where + ", return value", output=True), where)
    except TypeError:
        return None     # the return annotation is the function's business
    return schema if schema.get("type") == "object" else None


def function_schema(fn: Callable[..., Any], where: str, descriptions: Optional[Dict[str, str]] = None) -> Schema:
    """The input_schema of fn's keyword parameters (see the module doc);
    descriptions: the docstring's, by parameter name."""
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
        if descriptions and descriptions.get(p.name) and "description" not in schema:
            schema = dict(schema)
            schema["description"] = descriptions[p.name]
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
    return hoist_defs(out, where)


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
    if is_pydantic_model(tp):
        model: Any = tp
        return lambda value: model.model_validate(value)
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

