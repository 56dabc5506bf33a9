"""The one place that counts experiments by outcome and says the counts in words.

Every summary a person reads (the loop's last line, `log`'s footer, the report's page and figure, the
offline research plan) counts through `Tally`, so "held" is never read as "reverted" in one place and
as "pending" in another. A decision (the verdict in the result note) maps to one outcome:

    keep -> kept      revert -> reverted      untimed -> held (correct, untimed, not merged)
    invalid -> invalid (reached outside its files)      anything else -> open (no verdict yet)
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

OUTCOME = {"keep": "kept", "revert": "reverted", "untimed": "held", "invalid": "invalid"}
ORDER = ("kept", "reverted", "held", "invalid", "open")
WORDS = {"kept": "kept", "reverted": "reverted", "held": "held untimed", "invalid": "invalid", "open": "open"}


def outcome(decision: str | None) -> str:
    """kept | reverted | held | invalid | open, from a verdict's decision."""
    return OUTCOME.get(decision or "", "open")


@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)

    @classmethod
    def of(cls, decisions: Iterable[str | None]) -> "Tally":
        return cls(Counter(outcome(d) for d in decisions))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __getitem__(self, name: str) -> int:
        return self.counts.get(name, 0)

    def as_dict(self) -> dict[str, int]:
        return {k: self[k] for k in ORDER}

    def words(self) -> str:
        """`5 experiment(s): 0 kept, 1 reverted, 4 held untimed`: kept and reverted always, the rest when any."""
        parts = [f"{self[k]} {WORDS[k]}" for k in ORDER if k in ("kept", "reverted") or self[k]]
        return f"{self.total} experiment(s): " + ", ".join(parts)
