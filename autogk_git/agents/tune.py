"""The offline tuner: no LLM. Changes one declared tunable per experiment (two, once every single change
from the trunk has been tried), never repeating a tried config."""
from __future__ import annotations

import json

from autogk_git import tunables
from autogk_git.agents.base import Context, Proposal
from autogk_git.errors import AgentError
from autogk_git.record.results import was_measured


def _key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


def _single_ratios(measured: list[dict], current: dict) -> dict[tuple[str, str], float]:
    """(tunable, value) -> the objective ratio (candidate / parent) measured for the single change from
    `current` to that value; a change that failed the checks counts as infinitely slow."""
    out: dict[tuple[str, str], float] = {}
    for res in measured:
        parent, cand = res.get("parent_tunables"), res.get("tunables")
        if not parent or not cand or _key(parent) != _key(current):
            continue
        diff = [n for n in cand if cand.get(n) != current.get(n)]
        if len(diff) != 1 or set(cand) != set(current):
            continue
        verdict = res.get("verdict") or {}
        if res.get("correct") is False:
            ratio = float("inf")
        else:
            try:
                ratio = float(verdict.get("ratio"))
            except (TypeError, ValueError):
                continue
        out[(diff[0], _key(cand[diff[0]]))] = ratio
    return out


class TuneAgent:
    name = "tune"

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
        tried = {_key(current)}
        # Every candidate and parent measured so far, and those being measured now (parallel loop).
        # A revert because no workload could run on the backend measured nothing: not tried.
        measured = [r for r in ctx.history if was_measured(r)]
        for res in [*measured, *getattr(ctx, "in_flight", [])]:
            for k in ("tunables", "parent_tunables"):
                if res.get(k):
                    tried.add(_key(res[k]))
        # One parameter at a time first (nearest values first): a one-parameter move from the best kept
        # kernel isolates its effect. When every such move has been tried and none was kept, the trunk
        # is a local optimum of single changes; pairs of changes then reach what interactions hide
        # (more warps only pay with a larger block, ...). Pairs go in the order their two singles'
        # measured ratios predict (the product; 1 where a single has no ratio from this trunk), nearest
        # first among equals: two neutral changes before one that was clearly slower.
        steps = []
        for n, t in decl.items():
            idx = t.choices.index(t.value) if t.value in t.choices else 0
            for j, choice in enumerate(t.choices):
                if choice != t.value:
                    steps.append((abs(j - idx), j < idx, list(decl).index(n), n, choice))
        steps.sort()
        single_ratio = _single_ratios(measured, current)
        singles = [[s] for s in steps]
        pairs = [[a, b] for k, a in enumerate(steps) for b in steps[k + 1:] if a[3] != b[3]]

        def predicted(move: list) -> float:
            r = 1.0
            for m in move:
                r *= single_ratio.get((m[3], _key(m[4])), 1.0)
            return r
        pairs.sort(key=lambda m: (round(predicted(m), 4), m[0][0] + m[1][0], [x[2] for x in m], [x[0] for x in m]))
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
                     f"Current trunk configuration: `{_key(current)}`."]
            lines += [f"Change **{m[3]}** from `{current[m[3]]}` to `{m[4]}` ({m[0]} step(s) in its declared "
                      f"choices {list(decl[m[3]].choices)})." for m in move]
            lines += [f"Configurations already tried for this target: {len(tried)}.",
                      "Why: a one-parameter move from the best kept kernel isolates the parameter's effect."
                      if len(move) == 1 else
                      "Why: every one-parameter move from this kernel has been tried and none was kept; two "
                      "changes at once reach what their interaction hides."]
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
