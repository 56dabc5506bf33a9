"""Result notes: one human-readable line, then the JSON that is the source of truth."""
from __future__ import annotations

import json
from typing import Any


def summary_line(result: dict[str, Any]) -> str:
    v = result.get("verdict", {})
    figs = v.get("figures") or ""
    return (f"autogk {result.get('target')} #{result.get('experiment', 0):04d}: "
            f"{v.get('decision', '?').upper()} - {v.get('reason', '')}" + (f" [{figs}]" if figs else ""))


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
