"""A timed backend for CPU tests of the search: the Triton interpreter checks every kernel for real, and
each kernel's time is a model, its `COST = <us>` line (plus a steady 0.2 % round-to-round wobble).

What the search and the verdict do with times (which kernel a candidate is timed against, what merges,
what a node's rank is) is the loop's, not the GPU's: this backend lets a CPU test see it. It is put in
place of the interpreter in the registry the real backends sit in (bench/backends.BACKENDS), so the
loop reaches it through the same path as a real one.
"""
from __future__ import annotations

import math
import os
import re
import subprocess

from autogk_git.bench import backends
from autogk_git.bench.backends.interpret import InterpretBackend

ROUNDS = 8
FLOOR_US = 4.0  # every workload's floor in the model: COST = 4 is at the limit


def cost(src: str) -> float:
    """The kernel's `COST = <us>` line; `COST = <expression>` is evaluated over the kernel's tunables
    (a landscape for the tuner: `COST = 5.0 if A == 1 and B == 1 else 10.0 + 0.2 * A`)."""
    m = re.search(r"^COST = (.+?)\s*$", src, re.M)
    assert m, "a kernel timed by the model needs a `COST = <us>` line"
    try:
        return float(m[1])
    except ValueError:
        from autogk_git import tunables
        return float(eval(m[1], {}, tunables.values(src)))  # noqa: S307 - the test's own kernel text


class ModelTimedBackend(InterpretBackend):
    name = "interpret"
    timing = True

    def run(self, job, timeout_s, on_progress=None):
        if job["stage"] != "ab":
            return super().run(job, timeout_s, on_progress)
        settings = {k: v for k, v in job["settings"].items() if k not in ("screen", "parent_light")}
        out = super().run(dict(job, stage="full", settings=settings), timeout_s, on_progress)
        t = {label: cost(src["kernel.py"]) for label, src in job["sources"].items()}
        per_wl = []
        for u, c in out["labels"]["candidate"].items():
            p = out["labels"]["parent"].get(u, {})
            if c.get("status") != "PASSED" or p.get("status") != "PASSED":
                continue
            wob = [1 + 0.002 * (-1) ** r for r in range(ROUNDS)]
            cs = [t["candidate"] * w for w in wob]
            ps = [t["parent"] * w for w in reversed(wob)]
            lrs = [math.log(a / b) for a, b in zip(cs, ps)]
            c.update(latency_us=t["candidate"], samples_us=cs, floor_us=FLOOR_US, floor_rule="model",
                     ratio_vs_parent=t["candidate"] / t["parent"], rounds=ROUNDS)
            p.update(latency_us=t["parent"], samples_us=ps)
            per_wl.append({"uuid": u, "latency_us": t["candidate"], "base_latency_us": t["parent"],
                           "log_ratios": lrs})
        ratio = math.exp(sum(sum(w["log_ratios"]) for w in per_wl) / max(1, ROUNDS * len(per_wl)))
        out["ab"] = {"baseline": "parent", "workloads": per_wl, "rounds": ROUNDS if per_wl else 0,
                     "timer": "model", "stopped": "decided", "bandwidth_gbs": 1.0, "ratio": ratio,
                     "ci_low": ratio, "ci_high": ratio}
        out["gpu_s"] = 0.01
        return out


def install(monkeypatch) -> None:
    monkeypatch.setitem(backends.BACKENDS, "interpret", lambda config: ModelTimedBackend(config))


# ------------------------------------------------------------------------------------------------
# Experiments of a person, on the `scale` test target
# ------------------------------------------------------------------------------------------------

T = "kernels/scale"
KERNEL = f"{T}/kernel.py"


def rev(root, spec: str) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", spec], cwd=root, capture_output=True, text=True)
    return out.stdout.strip() or None


def set_cost(root, cost: float) -> None:
    text = (root / KERNEL).read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("COST = ")]
    i = next(i for i, ln in enumerate(lines) if ln.startswith("BLOCK = "))
    lines.insert(i, f"COST = {cost}")
    (root / KERNEL).write_text("\n".join(lines) + "\n")


def hand_experiment(root, number: int, start: str, cost: float, slug: str = "") -> str:
    """A person's experiment branched from start (any commit), concluded later by `autogk iterate`.
    AUTOGK_LOOP=1 keeps the post-commit hook from benchmarking it in its own process."""
    _git(root, "checkout", "-q", "-b", f"autogk/scale/{number:04d}-{slug or f'cost-{int(cost)}'}", start)
    set_cost(root, cost)
    env = {**os.environ, "AUTOGK_LOOP": "1"}
    subprocess.run(["git", "commit", "-qam", f"cost {cost}"], cwd=root, check=True, env=env)
    sha = rev(root, "HEAD")
    _git(root, "checkout", "-q", "main")
    return sha


def conclude(root) -> str:
    from conftest import autogk_in
    return autogk_in(root, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001").stdout


def _git(root, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def timed_project(project, monkeypatch):
    """The project's trunk with a kernel of modelled time 10 us, timed by the model backend."""
    install(monkeypatch)
    set_cost(project, 10.0)
    _git(project, "commit", "-qam", "scale: COST line for the timing model")
    return project
