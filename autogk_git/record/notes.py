"""Result notes: one human-readable line, then the JSON that is the source of truth."""
from __future__ import annotations

import json
from typing import Any


def summary_line(result: dict[str, Any]) -> str:
    v = result.get("verdict", {})
    figs = v.get("figures") or ""
    return (f"autogk {result.get('target')} #{result.get('experiment', 0):04d}: "
            f"{v.get('decision', '?').upper()} - {v.get('reason', '')}" + (f" [{figs}]" if figs else ""))


TERMINAL_WIDTH = 120  # what a verdict printed as progress may take; the note and --json keep the whole text


def fit(text: str, width: int = TERMINAL_WIDTH, more: str = "") -> str:
    """text within width characters, cut at a word (never inside one) and marked with `…` and `more`
    (where the rest is: `autogk show 3`)."""
    indent = text[:len(text) - len(text.lstrip())]
    text = indent + " ".join(text.split())
    if len(text) <= width:
        return text
    tail = "…" + (f" ({more})" if more else "")
    room = max(10, width - len(tail))
    cut = text[:room + 1].rsplit(" ", 1)[0] if " " in text[:room + 1] else text[:room]
    return cut.rstrip(" ;,:([") + tail


def verdict_lines(result: dict[str, Any], width: int = TERMINAL_WIDTH) -> list[str]:
    """The verdict as progress: its decision and reason on one line, its figures on a second when they add
    anything; each within width, the rest in `autogk show N` (the note holds the full text)."""
    v = result.get("verdict", {})
    n = result.get("experiment", 0)
    more = f"autogk show {n}"
    word = {"untimed": "HELD", "invalid": "VOID"}.get(v.get("decision", ""), v.get("decision", "?").upper())
    head = f"#{n:04d}: {word} - {v.get('reason', '')}"
    lines = [fit(head, width, more)]
    figs = v.get("figures") or ""
    if figs and "ratio" in v:  # a timed verdict's figures; an untimed one's repeat the coverage the reason says
        lines.append(fit(f"  figures: {figs}", width, more))
    return lines


def format_result(result: dict[str, Any]) -> str:
    return summary_line(result) + "\n\n" + json.dumps(result, indent=1, sort_keys=True) + "\n"


def parse_result(text: str, commit: str | None = None) -> dict[str, Any] | None:
    """The result JSON of a note; None when it holds none.

    An amend or rebase copies the old commit's note onto the new commit (notes.rewriteRef), where
    git concatenates it with the new commit's own result. Given `commit`, only a result measured on
    that commit counts: a copied, stale result reads as "not benchmarked yet".
    """
    decoder = json.JSONDecoder()
    pos, found = 0, []
    while True:
        start = text.find("{", pos)
        if start < 0:
            break
        try:
            data, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        if isinstance(data, dict):
            found.append(data)
        pos = end
    if commit is not None:
        found = [d for d in found if d.get("commit") == commit]
    return found[0] if found else None
