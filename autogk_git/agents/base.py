"""The one agent interface: given an experiment's worktree and context, make ONE change."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from autogk_git.errors import AgentError
from autogk_git.project import Target


@dataclass
class Context:
    """What an agent may read before it changes the kernel."""

    worktree: Path                     # the experiment's checkout; edit files here
    target: Target                     # the target as seen inside the worktree
    number: int                        # the experiment number
    history: list[dict[str, Any]]      # result notes of this target's earlier experiments, oldest first
    plan: str | None = None            # a pending research plan (markdown), if any
    config: Any = None                 # the project's Config
    check: Any = None                  # callable(worktree) -> quick-check summary dict, for agents that test
    plan_id: str | None = None         # the commit the pending plan annotates (linked by an Autogk-Plan trailer)
    artifacts: dict[str, Path] = field(default_factory=dict)  # analysis reports by name, e.g. "workloads"
    say: Callable[[str], None] | None = None  # progress lines for the person watching
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    """Experiments being measured right now (parallel loop): {experiment, hypothesis, tunables}.
    Count them as tried: their results are not in `history` yet."""
    start: dict[str, Any] | None = None
    """Where the experiment starts when not from the trunk tip (a search node: loop/search.py):
    {experiment, state, commit, hypothesis, latency_vs_trunk}. It is still judged against the trunk."""


def printable(text: str, keep: str = "") -> str:
    """text without control characters (but those in keep): a NUL stopped `git commit`, an escape sequence
    would reach the terminal through `autogk log`."""
    return "".join(c for c in text if c in keep or c.isprintable())


@dataclass
class Proposal:
    """An agent's answer. `changed` is False when it has nothing left to try. Whichever agent made it, its
    text goes into a commit message, a branch name and the terminal: one printable line of hypothesis,
    and a rationale whose only control characters are newlines and tabs."""

    hypothesis: str                    # one line: the commit subject
    rationale: str = ""                # markdown: why, written as the plan note
    changed: bool = True
    usage: dict[str, Any] = field(default_factory=dict)  # tokens, cost_usd, turns, requests
    invalid: str = ""                  # why the experiment is void (the agent reached outside its files)

    def __post_init__(self) -> None:
        self.hypothesis = " ".join(printable(self.hypothesis).split())
        self.rationale = printable(self.rationale, keep="\n\t")


class AgentStopped(AgentError):
    """An agent ran out of turns, tokens or retries before proposing; `usage` is what it spent."""

    def __init__(self, message: str, hint: str | None = None, usage: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint)
        self.usage = usage or {}


class Agent(Protocol):
    name: str

    def propose(self, ctx: Context) -> Proposal:
        """Edit files under ctx.worktree (the target's editable files only) and describe the change."""
