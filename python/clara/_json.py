# SPDX-License-Identifier: MIT
"""JSON in and out of Clara, on the json module's C accelerators.

json.dumps and json.loads build a new C encoder, or check the whitespace
around the document, on every call: that is most of the Python cost of a
small call (see the Python rows of `make bench`). This module makes the C
encoder and scanner once and calls them directly. Where the interpreter has
no C accelerators it falls back to the json module's public functions, with
the same results.

Encoding: compact, UTF-8 (non-ASCII kept), NaN and infinities refused
(ValueError), dataclass instances written as objects, pydantic models as
their model_dump(mode="json") (duck-typed: pydantic is never imported),
anything else json cannot write refused with json's own TypeError.
"""

from __future__ import annotations

import dataclasses
import json
import json.encoder
from typing import Any, Callable, Tuple


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type) and callable(getattr(type(value), "model_json_schema", None)):
        return dump(mode="json")
    raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)


_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
# The C function when the accelerator is there (the encoder's fast path
# needs exactly it), its Python twin otherwise.
_encode_str: Callable[[str], str] = getattr(json.encoder, "encode_basestring")

dumps: Callable[[Any], str]
if _c_make_encoder is not None:
    # (markers, default, encoder, indent, key_separator, item_separator,
    #  sort_keys, skipkeys, allow_nan). markers=None: no check for cycles,
    # which end in RecursionError instead of ValueError.
    _encode_chunks = _c_make_encoder(None, _default, _encode_str, None, ":", ",", False, False, False)

    def dumps(value: Any) -> str:
        """value as compact JSON text."""
        return "".join(_encode_chunks(value, 0))
else:  # pragma: no cover - interpreters without the _json accelerator
    _encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                default=_default)
    dumps = _encoder.encode


def dumps_str(value: str) -> str:
    """A str as a JSON string (quoted, escaped)."""
    return _encode_str(value)


# A JSONDecoder's scanner, the C one when the accelerator is there:
# scan_once(text, index) -> (the value starting at index, the index after
# it); StopIteration when no value starts there.
scan_once: Callable[[str, int], Tuple[Any, int]] = getattr(json.JSONDecoder(), "scan_once")


def loads(text: str) -> Any:
    """Parse one JSON document (text that Clara wrote: compact, one value)."""
    try:
        value, end = scan_once(text, 0)
    except StopIteration:
        return json.loads(text)   # raises json.JSONDecodeError with the position
    if end != len(text):
        return json.loads(text)   # trailing whitespace is fine, anything else raises
    return value
