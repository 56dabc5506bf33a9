"""Tunables: module-level constants in a kernel that declare the values they may take.

    BLOCK_SIZE = 1024  # autogk: tune [256, 512, 1024, 2048, 4096]

The tune agent changes one of them per experiment; every result records the candidate's values.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

_LINE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?P<value>[^#\n]+?)\s*#\s*autogk:\s*tune\s+(?P<choices>\[.*\])\s*$",
                   re.MULTILINE)


@dataclass(frozen=True)
class Tunable:
    name: str
    value: Any
    choices: tuple[Any, ...]
    line: int


def parse(source: str) -> dict[str, Tunable]:
    out = {}
    for m in _LINE.finditer(source):
        try:
            value = ast.literal_eval(m["value"].strip())
            choices = tuple(ast.literal_eval(m["choices"]))
        except (ValueError, SyntaxError):
            continue
        out[m["name"]] = Tunable(m["name"], value, choices, source.count("\n", 0, m.start()) + 1)
    return out


def values(source: str) -> dict[str, Any]:
    return {name: t.value for name, t in parse(source).items()}


def set_value(source: str, name: str, value: Any) -> str:
    """The source with one tunable's value replaced; everything else byte-identical."""
    def repl(m: re.Match) -> str:
        if m["name"] != name:
            return m.group(0)
        s, e = m.span("value")
        base = m.start()
        return m.group(0)[:s - base] + repr(value) + m.group(0)[e - base:]
    new = _LINE.sub(repl, source)
    if values(new).get(name) != value:
        raise ValueError(f"could not set tunable {name}")
    return new
