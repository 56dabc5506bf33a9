"""Tunables: module-level constants in a kernel that declare the values they may take.

    BLOCK_SIZE = 1024  # autogk: tune [256, 512, 1024, 2048, 4096]

The tune agent changes one of them per experiment; every result records the candidate's values.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from autogk_git.errors import TargetError

_LINE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?P<value>[^#\n]+?)\s*#\s*autogk:\s*tune\s+(?P<choices>\[.*\])\s*$",
                   re.MULTILINE)
# A line that means to declare a tunable (an assignment carrying the marker in its comment), which
# `strict` parsing holds to the full form above; prose that only mentions the marker is not one.
_MARK = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_.]*\s*=[^#\n]*#\s*autogk:\s*tune\b")
FORM = "NAME = VALUE  # autogk: tune [CHOICE, ...]"


class TunableError(TargetError):
    """A `# autogk: tune` comment that does not parse."""


@dataclass(frozen=True)
class Tunable:
    name: str
    value: Any
    choices: tuple[Any, ...]
    line: int


def parse(source: str, strict: bool = False, where: str = "kernel.py") -> dict[str, Tunable]:
    """The declared tunables of a kernel source.

    strict: a line marked `# autogk: tune` that does not parse raises TunableError naming the line
    (the tuner must not skip a declaration silently); otherwise such lines are ignored (results
    record the values of whatever kernel an agent wrote)."""
    out = {}
    matched = set()
    for m in _LINE.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        try:
            value = ast.literal_eval(m["value"].strip())
            choices = tuple(ast.literal_eval(m["choices"]))
        except (ValueError, SyntaxError, TypeError):
            if strict:
                _bad(where, line, m.group(0), "the value or the choices are not Python literals")
            continue
        if strict and not choices:
            _bad(where, line, m.group(0), "the list of choices is empty")
        matched.add(line)
        out[m["name"]] = Tunable(m["name"], value, choices, line)
    if strict:
        for i, text in enumerate(source.splitlines(), 1):
            if _MARK.search(text) and i not in matched:
                _bad(where, i, text, "it is not of the form " + FORM +
                     " (a module-level UPPER_CASE constant, nothing after the list)")
    return out


def _bad(where: str, line: int, text: str, why: str) -> None:
    raise TunableError(f"{where} line {line}: cannot read the tunable declaration `{text.strip()}`: {why}",
                       f"write it as `{FORM}`, e.g. `BLOCK = 128  # autogk: tune [64, 128, 256]`, "
                       "or remove the `# autogk: tune` comment")


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
