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


def parse_result(text: str) -> dict[str, Any] | None:
    """The JSON part of a result note; None when the note holds no JSON object."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        data = json.loads(text[start:])
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None
