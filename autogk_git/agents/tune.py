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
        # (more warps only pay with a larger block, ...), nearest pairs first.
        steps = []
        for n, t in decl.items():
            idx = t.choices.index(t.value) if t.value in t.choices else 0
            for j, choice in enumerate(t.choices):
                if choice != t.value:
                    steps.append((abs(j - idx), j < idx, list(decl).index(n), n, choice))
        steps.sort()
        singles = [(s[0], [s]) for s in steps]
        pairs = [(a[0] + b[0], [a, b]) for k, a in enumerate(steps) for b in steps[k + 1:] if a[3] != b[3]]
        pairs.sort(key=lambda m: (m[0], [x[2] for x in m[1]], [x[0] for x in m[1]]))
        for _, move in [*singles, *pairs]:
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
            return Proposal(hypothesis, "\n".join(lines) + "\n")
        return Proposal("tuning exhausted", f"every one- and two-parameter change of `{_key(current)}` has been "
                        f"tried ({len(tried)} configurations); use another agent or widen the choices.",
                        changed=False)
