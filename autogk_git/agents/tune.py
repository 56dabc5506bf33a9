"""The offline tuner: no LLM. Changes one declared tunable per experiment (two, once every single change
from its start has been tried), never repeating a tried config. Single moves no trunk has measured go
first; a move measured from an earlier trunk (the same parameter and values, another parameter changed
since) comes after them, in the order of the ratio it had.

With `[search] strategy = "trunk"` every experiment starts at the trunk tip: singles, then pairs. With
`beam` or `best` the tuner searches the experiment tree (loop/search.py picks the node, through
`TuneAgent.node_filter`): a coordinate search that may continue from a near-miss, a node at most
`[search] near_miss` slower than the trunk, because an optimum is often two single steps away through a
first step that did not pay on its own (a larger block only pays with more warps). A node whose every
single change has been tried (and lost: a winner would have become the trunk) is a dead end and is never
picked again; the trunk's pairs come only when no live node is left.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from autogk_git import tunables
from autogk_git.agents.base import Context, Proposal
from autogk_git.bench import ncu
from autogk_git.errors import AgentError
from autogk_git.record.results import was_measured

SEARCHING = ("beam", "best")


def _key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


def _move_ratios(measured: list[dict], current: dict, *, elsewhere: bool = False) -> dict[tuple[str, str], tuple]:
    """(tunable, value) -> (objective ratio, candidate / parent; experiment number) of the single change
    from `current`'s value of that tunable to `value`: measured from `current` itself, or with `elsewhere`
    from another configuration that holds the same value there (an earlier trunk; the latest such
    result wins). A change that failed the checks counts as infinitely slow."""
    out: dict[tuple[str, str], tuple] = {}
    for res in measured:
        parent, cand = res.get("parent_tunables"), res.get("tunables")
        if not parent or not cand or set(cand) != set(current) or set(parent) != set(current):
            continue
        if (_key(parent) == _key(current)) == elsewhere:  # from current itself, or (elsewhere) from another
            continue
        diff = [n for n in cand if cand.get(n) != parent.get(n)]
        if len(diff) != 1 or _key(parent[diff[0]]) != _key(current[diff[0]]):
            continue
        verdict = res.get("verdict") or {}
        if res.get("correct") is False:
            ratio = float("inf")
        else:
            try:
                ratio = float(verdict.get("ratio"))
            except (TypeError, ValueError):
                continue
        out[(diff[0], _key(cand[diff[0]]))] = (ratio, res.get("experiment"))
    return out


def tried_configs(history: list[dict[str, Any]], in_flight: list[dict[str, Any]] = ()) -> set[str]:
    """Every configuration measured so far (candidates and the parents they were timed against) and those
    being measured now. A revert because no workload could run on the backend measured nothing: not tried."""
    tried: set[str] = set()
    for res in [*(r for r in history if was_measured(r)), *in_flight]:
        for k in ("tunables", "parent_tunables"):
            if res.get(k):
                tried.add(_key(res[k]))
    return tried


def single_steps(decl: dict[str, tunables.Tunable], current: dict[str, Any]) -> list[tuple]:
    """Every one-parameter move from `current`, nearest value first: (distance, downward, order, name, value)."""
    steps = []
    for k, (n, t) in enumerate(decl.items()):
        value = current.get(n, t.value)
        idx = t.choices.index(value) if value in t.choices else 0
        for j, choice in enumerate(t.choices):
            if choice != value:
                steps.append((abs(j - idx), j < idx, k, n, choice))
    return sorted(steps)


def dead_end(decl: dict[str, tunables.Tunable], config: dict[str, Any], tried: set[str]) -> bool:
    """True when every one-parameter move from `config` over the declared tunables has been tried."""
    config = {n: config.get(n, t.value) for n, t in decl.items()}
    return all(_key(dict(config, **{s[3]: s[4]})) in tried for s in single_steps(decl, config))


class TuneAgent:
    name = "tune"

    def node_filter(self, config, trunk_source: str, history: list[dict[str, Any]],
                    in_flight: list[dict[str, Any]] = ()) -> Callable[[Any], bool] | None:
        """Which search nodes (loop/search.Node: `tunables`, `latency_us`) the tuner may start from, or None
        when it does not search (`[search] strategy = "trunk"`, or nothing declared). The trunk is live
        while one of its single changes is untried; another node while it is a near-miss (at most
        `near_miss` slower than the trunk; an untimed node is unknown, so kept) with one untried."""
        s = getattr(config, "search", None)
        if s is None or s.strategy not in SEARCHING:
            return None
        try:
            decl = tunables.parse(trunk_source)
        except tunables.TunableError:
            return None
        if not decl:
            return None
        tried = tried_configs(history, in_flight)

        def live(node, trunk_latency: float | None = None) -> bool:
            cfg = getattr(node, "tunables", None)
            if node.number is None and cfg is None:  # a trunk no result has described yet: its own source's
                cfg = {n: t.value for n, t in decl.items()}
            if cfg is None or set(cfg) != set(decl):
                return node.number is None  # not the tuner's kind of node; the trunk always stays a candidate
            if node.number is not None and node.latency_us and trunk_latency \
                    and node.latency_us > trunk_latency * (1 + s.near_miss):
                return False
            return not dead_end(decl, cfg, tried)
        return live

    def propose(self, ctx: Context) -> Proposal:
        path = ctx.worktree / ctx.target.rel / "kernel.py"
        source = path.read_text()
        try:
            decl = tunables.parse(source, strict=True, where=f"{ctx.target.rel}/kernel.py")
        except tunables.TunableError as e:
            raise AgentError(e.message, e.hint) from None
        if not decl:
            return Proposal("nothing to tune", "kernel.py declares no tunables "
                            "(lines like `BLOCK = 128  # autogk: tune [64, 128, 256]`).", changed=False)
        current = {n: t.value for n, t in decl.items()}
        # Every candidate and parent measured so far, and those being measured now (parallel loop).
        measured = [r for r in ctx.history if was_measured(r)]
        tried = tried_configs(ctx.history, getattr(ctx, "in_flight", []))
        tried.add(_key(current))
        # One parameter at a time first (nearest values first): a one-parameter move from the best kept
        # kernel isolates its effect. When every such move has been tried and none was kept, the trunk
        # is a local optimum of single changes; pairs of changes then reach what interactions hide
        # (more warps only pay with a larger block, ...). Pairs go in the order their two singles'
        # measured ratios predict (the product; 1 where a single has no ratio from this trunk), nearest
        # first among equals: two neutral changes before one that was clearly slower.
        steps = single_steps(decl, current)
        single_ratio = {m: r for m, (r, _) in _move_ratios(measured, current).items()}
        # The same one-parameter move measured from an earlier trunk (another parameter has changed since):
        # moves never measured go first, then these by the ratio they had (a neutral one before one that
        # lost by 20 %). On sparse attention (2026-12-06, an H100) the tuner spent 10 of 20 experiments
        # retrying, after a 3 % keep elsewhere, moves that had lost by 4-25 %, before the untried move
        # that was kept.
        before = _move_ratios(measured, current, elsewhere=True)
        steps.sort(key=lambda s: (0, 0.0) if (s[3], _key(s[4])) not in before
                   else (1, round(before[(s[3], _key(s[4]))][0], 3)))
        singles = [[s] for s in steps]
        pairs = [[a, b] for k, a in enumerate(steps) for b in steps[k + 1:] if a[3] != b[3]]

        def predicted(move: list) -> float:
            r = 1.0
            for m in move:
                r *= single_ratio.get((m[3], _key(m[4])), 1.0)
            return r
        pairs.sort(key=lambda m: (round(predicted(m), 4), m[0][0] + m[1][0], [x[2] for x in m], [x[0] for x in m]))
        start = getattr(ctx, "start", None)
        where = (f"experiment #{start.get('experiment'):04d} ({start.get('state')}"
                 + (f", {start['latency_vs_trunk']:.3f}x the trunk's latency" if start.get("latency_vs_trunk") else "")
                 + ")") if start and start.get("experiment") is not None else "the trunk tip"
        for move in [*singles, *pairs]:
            cand = dict(current, **{m[3]: m[4] for m in move})
            if _key(cand) in tried:
                continue
            text = source
            for m in move:
                text = tunables.set_value(text, m[3], m[4])
            path.write_text(text)
            hypothesis = "tune: " + ", ".join(f"{m[3]} {current[m[3]]} -> {m[4]}" for m in move)
            lines = [f"## Plan (tune agent, experiment {ctx.number:04d})", "",
                     f"Starting configuration (from {where}): `{_key(current)}`."]
            lines += [f"Change **{m[3]}** from `{current[m[3]]}` to `{m[4]}` ({m[0]} step(s) in its declared "
                      f"choices {list(decl[m[3]].choices)})." for m in move]
            lines += [f"Configurations already tried for this target: {len(tried)}.",
                      # Why the kernel is slow, as Nsight Compute saw it (bench/ncu.py): the log says it too.
                      f"Profile: {ncu.one_line(ctx.history, ctx.config)}."]
            if start and start.get("experiment") is not None:
                lines.append("Why: a coordinate search continuing from a near-miss node of the search tree: its "
                             "own change did not beat the trunk, but one more change from it may (an interaction "
                             "a single change from the trunk cannot show). It is timed against the trunk.")
            elif len(move) == 1:
                lines.append("Why: a one-parameter move from the best kept kernel isolates the parameter's effect.")
                if (move[0][3], _key(move[0][4])) in before:
                    r, n = before[(move[0][3], _key(move[0][4]))]
                    lines.append(f"The same move from an earlier trunk (experiment {n}) measured ratio {r:.4f}; every "
                                 "move not measured from any trunk was tried first, the others go by that ratio.")
            else:
                lines.append("Why: every one-parameter move from this kernel has been tried and none was kept; "
                             "two changes at once reach what their interaction hides.")
            if len(move) > 1:
                known = [f"{m[3]} -> {m[4]}: {single_ratio[(m[3], _key(m[4]))]:.4f}" for m in move
                         if (m[3], _key(m[4])) in single_ratio]
                lines.append(f"Predicted ratio from the single changes: {predicted(move):.4f} (product of "
                             f"the measured ones: {'; '.join(known) or 'none measured from this trunk'}); "
                             "pairs are tried best predicted first.")
            return Proposal(hypothesis, "\n".join(lines) + "\n")
        return Proposal("tuning exhausted", f"every one- and two-parameter change of `{_key(current)}` has been "
                        f"tried ({len(tried)} configurations); use another agent or widen the choices.",
                        changed=False)
