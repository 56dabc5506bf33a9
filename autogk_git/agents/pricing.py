"""What an LLM request costs: a price table by model prefix, overridable in `[agent] prices`.

Prices are USD per million tokens: input, output, cache write (5 minutes), cache read. The built-in
rows are Anthropic's published list prices as read on platform.claude.com in 2026-11; a model that is
not listed (or a project with other terms) gets its row in `.autogk.toml`:

    [agent]
    prices = {"claude-sonnet-5-5" = [2.0, 10.0, 2.5, 0.2]}

A model id with a date suffix (`claude-sonnet-4-5-20250929`) takes its alias's row.

A row of two numbers derives cache write (1.25x input) and cache read (0.1x input).
"""
from __future__ import annotations

import re
from typing import Any

BUILTIN: dict[str, list[float]] = {
    "claude-opus-5-5": [4.0, 20.0],
    "claude-opus-5": [5.0, 25.0],
    "claude-sonnet-5-5": [2.0, 10.0, 2.5, 0.2],
    "claude-sonnet-5": [2.0, 10.0, 2.5, 0.2],
    "claude-opus-4-6": [5.0, 25.0],
    "claude-sonnet-4-6": [3.0, 15.0],
    "claude-opus-4-5": [5.0, 25.0],
    "claude-sonnet-4-5": [3.0, 15.0],
    "claude-haiku-4-5": [1.0, 5.0],
}

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def table(overrides: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    out = dict(BUILTIN)
    out.update(overrides or {})
    return out


def price_of(model: str, overrides: dict[str, list[float]] | None = None) -> list[float] | None:
    """[input, output, cache write, cache read] per million tokens, or None for an unlisted model."""
    rows = table(overrides)
    alias = re.sub(r"-\d{8}$", "", model)
    row = rows.get(model) or rows.get(alias)
    if row is None:
        return None
    row = [float(x) for x in row]
    if len(row) == 2:
        row += [row[0] * 1.25, row[0] * 0.1]
    return row


def cost_usd(model: str, usage: dict[str, Any], overrides: dict[str, list[float]] | None = None) -> float | None:
    """Cost of one request's (or a sum of requests') usage; None when the model has no price."""
    row = price_of(model, overrides)
    if row is None:
        return None
    tokens = [int(usage.get(k) or 0) for k in USAGE_KEYS]
    return sum(t * p for t, p in zip(tokens, row)) / 1e6


class Meter:
    """Sums the usage of many requests (one experiment, or one loop run) and prices it."""

    def __init__(self, model: str, overrides: dict[str, list[float]] | None = None) -> None:
        self.model = model
        self.overrides = overrides or {}
        self.totals = {k: 0 for k in USAGE_KEYS}
        self.requests: list[dict[str, Any]] = []
        self.cost = 0.0
        self.priced = price_of(model, self.overrides) is not None
        self.retries = 0

    def add(self, usage: dict[str, Any], seconds: float = 0.0) -> dict[str, Any]:
        row = {k: int(usage.get(k) or 0) for k in USAGE_KEYS}
        for k, v in row.items():
            self.totals[k] += v
        c = cost_usd(self.model, row, self.overrides) or 0.0
        self.cost += c
        rec = {"in": row["input_tokens"], "out": row["output_tokens"],
               "cache_w": row["cache_creation_input_tokens"], "cache_r": row["cache_read_input_tokens"],
               "usd": round(c, 6), "s": round(seconds, 2)}
        self.requests.append(rec)
        return rec

    @property
    def tokens(self) -> int:
        return sum(self.totals.values())

    def as_usage(self) -> dict[str, Any]:
        """The shape that goes into a result note's `cost` (numeric fields become MLflow metrics)."""
        return {"model": self.model, **self.totals, "tokens": self.tokens, "requests": len(self.requests),
                "retries": self.retries, "cost_usd": round(self.cost, 6), "priced": self.priced,
                "per_request": self.requests}


def add_usage(total: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """Sum the numeric fields of an experiment's usage into a loop run's total."""
    for k in (*USAGE_KEYS, "tokens", "requests", "retries", "turns", "cost_usd"):
        if isinstance(usage.get(k), (int, float)) and not isinstance(usage.get(k), bool):
            total[k] = round(total.get(k, 0) + usage[k], 6) if k == "cost_usd" else total.get(k, 0) + usage[k]
    return total
