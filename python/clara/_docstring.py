# SPDX-License-Identifier: MIT
"""A tool's docstring split into the tool's description and its parameters'.

The parameters' section of the three common styles is taken out of the
description, each entry becoming that parameter's description:

    Google:  Args: (or Arguments:, Parameters:, Params:, Keyword Args:,
             Keyword Arguments:) then indented "name: text" or
             "name (type): text" entries, continued on more indented lines;
    NumPy:   a "Parameters" (or "Other Parameters") line underlined with
             dashes, then "name : type" entries with indented text, up to
             the next underlined section;
    Sphinx:  ":param name: text" or ":param type name: text" fields (their
             ":type name:" fields are dropped).

Everything else (the summary, the text, Returns:, Raises:, examples) stays
in the description as written.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

_GOOGLE_HEADER = re.compile(r"^(\s*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|"
                            r"Other Parameters):\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_HEADERS = ("Parameters", "Other Parameters", "Keyword Arguments")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::.*)?$")
_SPHINX_FIELD = re.compile(r"^(\s*):(param|parameter|arg|argument|key|keyword|type)\s+([^:]*?)\s*:(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(parts: List[str]) -> str:
    return " ".join(" ".join(parts).split())


def parse(doc: Optional[str]) -> Tuple[Optional[str], Dict[str, str]]:
    """(the description without the parameters' sections, {parameter name:
    its description}) of a docstring cleaned by inspect.getdoc."""
    if not doc:
        return doc, {}
    lines = doc.splitlines()
    params: Dict[str, str] = {}
    kept: List[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        google = _GOOGLE_HEADER.match(line)
        if google:
            i = _google(lines, i + 1, _indent(line), params)
            continue
        if (line.strip() in _NUMPY_HEADERS and i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1])
                and _indent(lines[i + 1]) == _indent(line)):
            i = _numpy(lines, i + 2, _indent(line), params)
            continue
        sphinx = _SPHINX_FIELD.match(line)
        if sphinx:
            i = _sphinx(lines, i, sphinx, params)
            continue
        kept.append(line)
        i += 1
    text = "\n".join(kept)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return (text or None), params


def _google(lines: List[str], i: int, header: int, params: Dict[str, str]) -> int:
    """Reads the entries of a Google section from line i; returns the index
    of the first line after it."""
    entry_indent: Optional[int] = None
    name: Optional[str] = None
    text: List[str] = []
    while i < len(lines):
        line = lines[i]
        if line.strip():
            ind = _indent(line)
            if ind <= header:
                break
            if entry_indent is None:
                entry_indent = ind
            m = _GOOGLE_ENTRY.match(line.strip()) if ind == entry_indent else None
            if m:
                if name is not None:
                    params[name] = _join(text)
                name, text = m.group(1), [m.group(2)]
            elif name is not None:
                text.append(line)
        i += 1
    if name is not None:
        params[name] = _join(text)
    return i


def _numpy(lines: List[str], i: int, header: int, params: Dict[str, str]) -> int:
    """Reads the entries of a NumPy section from line i up to the next
    underlined header; returns the index of that header."""
    names: List[str] = []
    text: List[str] = []

    def flush() -> None:
        for n in names:
            params[n.lstrip("*")] = _join(text)

    while i < len(lines):
        line = lines[i]
        if line.strip() and i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]) and not _NUMPY_RULE.match(line):
            break
        if line.strip() and _indent(line) <= header:
            m = _NUMPY_ENTRY.match(line.strip())
            if m:
                flush()
                names, text = [n.strip() for n in m.group(1).split(",")], []
        elif line.strip() and names:
            text.append(line)
        i += 1
    flush()
    return i


def _sphinx(lines: List[str], i: int, m: "re.Match[str]", params: Dict[str, str]) -> int:
    """Reads one Sphinx field and its continuation lines; returns the index
    of the line after it."""
    indent, kind, target, first = _indent(lines[i]), m.group(2), m.group(3).split(), m.group(4)
    text = [first]
    i += 1
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > indent:
        text.append(lines[i])
        i += 1
    if kind != "type" and target:
        params[target[-1].lstrip("*")] = _join(text)
    return i
