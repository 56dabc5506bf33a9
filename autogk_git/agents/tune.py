"""The offline tuner: no LLM. Changes one declared tunable per experiment, never repeating a tried config."""
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
        # One step at a time: the nearest untried value of each tunable, nearest steps first.
        moves = []
        for n, t in decl.items():
            idx = t.choices.index(t.value) if t.value in t.choices else 0
            for j, choice in enumerate(t.choices):
                if choice != t.value:
                    moves.append((abs(j - idx), j < idx, n, choice))
        moves.sort(key=lambda m: (m[0], m[1], list(decl).index(m[2])))
        for dist, _, name, choice in moves:
            cand = dict(current, **{name: choice})
            if _key(cand) in tried:
                continue
            path.write_text(tunables.set_value(source, name, choice))
            hypothesis = f"tune: {name} {current[name]} -> {choice}"
            lines = [f"## Plan (tune agent, experiment {ctx.number:04d})", "",
                     f"Current trunk configuration: `{_key(current)}`.",
                     f"Change **{name}** from `{current[name]}` to `{choice}` ({dist} step(s) in its declared "
                     f"choices {list(decl[name].choices)}).",
                     f"Configurations already tried for this target: {len(tried)}.",
                     "Why: a one-parameter move from the best kept kernel isolates the parameter's effect."]
            return Proposal(hypothesis, "\n".join(lines) + "\n")
        return Proposal("tuning exhausted", f"every one-step change of `{_key(current)}` has been tried "
                        f"({len(tried)} configurations); use another agent or widen the choices.", changed=False)
