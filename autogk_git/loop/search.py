"""The search frontier: which node the next experiment branches from (`[search] strategy`, `--from N`).

The experiment graph is a tree. Its nodes are the trunk tip and every experiment judged on every
workload (kept, archived or held: record/figures.judged_all), ranked by their confirmed figures (the
geometric mean of the candidate's measured latencies; an untimed node has none and ranks after the
timed ones, newest first). Kept experiments the trunk already holds are not nodes of their own: the
trunk is at least as good.

    trunk   every experiment branches from the trunk tip (the default; a line, not a tree)
    beam    the trunk and the best `width - 1` other nodes; the next experiment branches from the one
            of them with the fewest children (in flight included), so parallel workers spread over it
    best    best-first with exploration: the node with the highest
            log(trunk latency / node latency) + exploration * sqrt(ln(1 + all children) / (1 + its children))

An agent may narrow the frontier (`live`, e.g. agents/tune.TuneAgent.node_filter): the offline tuner
drops nodes that are dead ends for it (every single change tried) or far slower than the trunk; the
strategy then picks among what is left, the trunk when nothing is.

Whatever the start, an experiment is measured against the trunk tip and merges only when it beats it
(record/trunk.baseline): a start off the trunk is a place to search from, never a yardstick.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from autogk_git.errors import AutogkError
from autogk_git.git import repo
from autogk_git.project import Project
from autogk_git.record import refs
from autogk_git.record.experiments import scan
from autogk_git.record.figures import geomean, judged_all, latencies

STRATEGIES = ("trunk", "beam", "best")


@dataclass
class Node:
    """A place an experiment may branch from."""

    commit: str
    number: int | None          # None: the trunk tip
    state: str                  # trunk | archived | held | kept | open
    hypothesis: str = ""
    latency_us: float | None = None   # geomean of the confirmed per-workload latencies; None: untimed
    children: int = 0
    tunables: dict[str, Any] | None = None   # the node's declared tunables, as its result recorded them

    @property
    def name(self) -> str:
        return "the trunk tip" if self.number is None else f"#{self.number:04d} ({self.state})"

    def as_start(self, trunk_latency: float | None) -> dict[str, Any]:
        """What an agent is told of where its experiment starts."""
        out: dict[str, Any] = {"experiment": self.number, "state": self.state, "commit": self.commit,
                               "hypothesis": self.hypothesis}
        if self.latency_us and trunk_latency:
            out["latency_vs_trunk"] = round(self.latency_us / trunk_latency, 4)
        return out


def _states(project: Project, target: str) -> dict[str, tuple[int, str]]:
    return {e.sha: (n, e.state) for n, e in scan(project, target).items() if e.sha}


def trunk_latency(history: list[dict[str, Any]], tip: str) -> float | None:
    """The trunk tip's geomean latency: its figures as the parent of the newest experiment timed against it."""
    for r in reversed(history):
        if (r.get("against") or r.get("parent")) == tip and r.get("timing") and judged_all(r):
            lat = latencies(r, "parent")
            if lat:
                return geomean(list(lat.values()))
    return None


def trunk_tunables(history: list[dict[str, Any]], tip: str) -> dict[str, Any] | None:
    """The trunk tip's tunables: as the parent an experiment was timed against, or as a keep's candidate."""
    for r in reversed(history):
        if (r.get("against") or r.get("parent")) == tip and r.get("parent_tunables") is not None:
            return r["parent_tunables"]
        if r.get("commit") == tip and r.get("tunables") is not None:
            return r["tunables"]
    return None


def nodes(project: Project, target: str, history: list[dict[str, Any]], tip: str,
          in_flight_bases: list[str] = ()) -> list[Node]:
    """The trunk tip first, then every other confirmed node, best first."""
    states = _states(project, target)
    trunk = Node(tip, None, "trunk", latency_us=trunk_latency(history, tip), tunables=trunk_tunables(history, tip))
    others = []
    for r in history:
        c = r.get("commit")
        if not c or c not in states or not judged_all(r) or (r.get("verdict") or {}).get("decision") == "invalid":
            continue
        number, state = states[c]
        if state == "kept" and repo.is_ancestor(project.root, c, tip):
            continue  # the trunk holds it already
        lat = latencies(r) if r.get("timing") else {}
        others.append(Node(c, number, state, r.get("hypothesis", ""), geomean(list(lat.values())) if lat else None,
                           tunables=r.get("tunables")))
    others.sort(key=lambda n: (n.latency_us is None, n.latency_us or 0.0, -(n.number or 0)))
    every = [trunk, *others]
    by_commit = {n.commit: n for n in every}
    for parent in [r.get("parent") for r in history] + list(in_flight_bases):
        if parent in by_commit:
            by_commit[parent].children += 1
    return every


def pick(strategy: str, width: int, exploration: float, frontier: list[Node], trunk_open: bool = True) -> Node:
    """The node the next experiment branches from. frontier[0] is the trunk; `trunk_open` False: the
    trunk is not to be picked while another node is there (a dead end for the agent)."""
    trunk = frontier[0]
    if strategy == "trunk" or len(frontier) == 1:
        return trunk
    if strategy == "beam":
        beam = frontier[:max(1, width)] if trunk_open else frontier[1:max(2, width)]
        return min(beam, key=lambda n: n.children)  # min() keeps the first of equals: the better ranked
    total = sum(n.children for n in frontier)

    def value(n: Node) -> float:
        gain = math.log(trunk.latency_us / n.latency_us) if n.latency_us and trunk.latency_us else 0.0
        return gain + exploration * math.sqrt(math.log(1 + total) / (1 + n.children))
    return max(frontier if trunk_open else frontier[1:], key=value)


def resolve_start(project: Project, target: str, spec: str) -> str:
    """`--from N`: experiment N's commit (kept, archived, held or open), or the trunk tip for `trunk`."""
    if spec.strip().lower() in ("trunk", project.trunk):
        tip = repo.rev(project.root, refs.branch(project.trunk))
        if tip:
            return tip
    try:
        number = int(spec.lstrip("#"))
    except ValueError:
        raise AutogkError(f"--from {spec}: not an experiment number",
                          "pass the number `autogk log` shows (e.g. --from 3), or --from trunk") from None
    e = scan(project, target).get(number)
    if e is None or not e.sha:
        raise AutogkError(f"--from {spec}: {target} has no experiment #{number:04d}",
                          "list the experiments with `autogk log --tree`")
    return e.sha


def choose(project: Project, target: str, history: list[dict[str, Any]], tip: str,
           in_flight_bases: list[str] = (), start: str | None = None,
           live: Callable[[Node, float | None], bool] | None = None) -> tuple[Node, float | None]:
    """(the start node, the trunk's latency) by `--from` when given, else by `[search] strategy` over
    the nodes `live` admits (all when None; the trunk always stays, as the fallback)."""
    frontier = nodes(project, target, history, tip, in_flight_bases)
    if start:
        found = next((n for n in frontier if n.commit == start), None)
        if found is None:  # an explicit start need not be confirmed (an open or incorrect experiment)
            number, state = _states(project, target).get(start, (None, "trunk" if start == tip else "commit"))
            found = Node(start, number, state)
        return found, frontier[0].latency_us
    s = project.config.search
    trunk_open = True
    if live is not None and s.strategy != "trunk":
        lat = frontier[0].latency_us
        trunk_open = live(frontier[0], lat)
        frontier = [frontier[0], *(n for n in frontier[1:] if live(n, lat))]
    return pick(s.strategy, s.width, s.exploration, frontier, trunk_open), frontier[0].latency_us


def floor_reached(project: Project, target: str) -> str | None:
    """Why the loop may stop: the trunk is within `[search] floor_share` of every workload's floor."""
    share = project.config.search.floor_share
    tip = repo.rev(project.root, refs.branch(project.trunk))
    if not share or not tip:
        return None
    from autogk_git.record import floor
    from autogk_git.record.experiments import results
    tr = floor.trunk_shares(results(project, target, own_only=True), tip, repo.rev(project.root, f"{tip}^2"))
    if not tr or tr["min_share"] < share:
        return None
    return (f"the trunk is within {share:.0%} of the floor on every workload ({len(tr['shares'])} timed; lowest "
            f"{tr['min_share']:.1%} on {tr['worst'][:8]}, as measured by #{tr['experiment']:04d}): "
            "[search] floor_share reached")
