"""Bisecting the trunk: the first commit that broke a target's correctness or made a workload slower.

The search is git's own: `git bisect start --first-parent BAD GOOD` and `git bisect run` in a
throwaway worktree, so the user's checkout, index and bisect state are never touched and the answer
has exactly git's semantics (skip = 125, abort >= 128). The step that judges one commit is
`python -m autogk_git.review.bisection step STATE`; it needs no checkout either, because kernels are read from
git objects.

Results are reused by the tree of the target's folder: any result note whose commit has the same
target tree as the commit under test (a trunk merge and its kept experiment, a commit that touched
only other files) answers without a benchmark. A commit that must be benchmarked gets a note in
`refs/notes/autogk/bisect`, so the next bisect reuses it too.

Timing comes from the notes (latency_us per workload) or from a backend that times. On a backend
that does not (the CPU interpreter) and without latencies in the notes, only correctness can be
bisected, and the report says so.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from autogk_git.record import kernels, ledger, notes, refs
from autogk_git.record.results import build_result
from autogk_git.errors import AutogkError
from autogk_git.git import commits, merges, repo, worktrees
from autogk_git.procs import module_command

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
Say = Callable[[str], None]


@dataclass
class Facts:
    """What is known about one kernel tree."""

    correct: bool | None = None
    why: str = ""
    latencies: dict[str, list[float]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    fresh: bool = False   # benchmarked just now (not serialized: a reuse is not a benchmark)

    def latency(self) -> dict[str, float]:
        return {u: statistics.median(v) for u, v in self.latencies.items() if v}

    def as_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "why": self.why, "latencies": self.latencies, "sources": self.sources}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Facts":
        return cls(d.get("correct"), d.get("why", ""), d.get("latencies", {}), d.get("sources", []))


def _add(m: Facts, result: dict[str, Any], label: str, source: str) -> None:
    if label == "candidate" and "correct" in result:
        ok = bool(result["correct"])
        if m.correct is None or not ok:
            m.correct = ok
            if not ok:
                m.why = (result.get("verdict") or {}).get("reason", "") or result.get("why", "incorrect")
    for u, lat in ledger.latencies(result, label).items():
        m.latencies.setdefault(u, []).append(lat)
    m.sources.append(source)


def known(root: Path, target: str, path: str, extra_commits: list[str]) -> dict[str, Facts]:
    """{target tree: Facts} from every result note and bisect note this clone wrote (a few git processes).

    A note fetched from a remote, or added by hand, is no fact here (repo.own_notes): matched by kernel
    tree, a collaborator's bisect note saying `correct` on their own commit of the same tree would
    answer for this clone's broken trunk without a benchmark."""
    mine = {ref: repo.own_noted(root, ref) for ref in (refs.NOTES_RESULTS, refs.NOTES_BISECT)}
    results = {c: notes.parse_result(t, c) for c, t in repo.read_notes(root, refs.NOTES_RESULTS).items()
               if c in mine[refs.NOTES_RESULTS]}
    results = {c: r for c, r in results.items() if r and r.get("target") == target}
    marks = {c: notes.parse_result(t, c) for c, t in repo.read_notes(root, refs.NOTES_BISECT).items()
             if c in mine[refs.NOTES_BISECT]}
    marks = {c: r for c, r in marks.items() if r and r.get("target") == target}
    parents = {c: r["parent"] for c, r in results.items() if r.get("parent")}
    tmap = kernels.trees(root, sorted({*results, *marks, *parents.values(), *extra_commits}), path)
    table: dict[str, Facts] = {}
    for c, r in results.items():
        if c in tmap:
            tag = f"result note on {c[:10]} (#{r.get('experiment', 0):04d})"
            _add(table.setdefault(tmap[c], Facts()), r, "candidate", tag)
        p = parents.get(c)
        if p in tmap and ledger.latencies(r, "parent"):
            _add(table.setdefault(tmap[p], Facts()), r, "parent", f"parent timing in the note on {c[:10]}")
    for c, r in marks.items():
        if c in tmap:
            _add(table.setdefault(tmap[c], Facts()), r, "candidate", f"bisect note on {c[:10]}")
    return table


# ------------------------------------------------------------------------------------------------
# Judging one commit
# ------------------------------------------------------------------------------------------------

def facts_for(root: Path, target_name: str, commit: str, tree: str | None, state: dict[str, Any],
            say: Say) -> Facts:
    """What the notes know about commit's kernel, or a fresh benchmark of it (recorded as a bisect note)."""
    table = {k: Facts.from_dict(v) for k, v in state["table"].items()}
    for line in _journal(state):  # measured earlier in this bisect
        if line.get("tree") and line.get("facts"):
            table.setdefault(line["tree"], Facts.from_dict(line["facts"]))
    m = table.get(tree) if tree else None
    timed_needed = state["mode"] == "timing"
    if m is not None and (m.correct is False or (m.latency() if timed_needed else m.correct is not None)):
        return m
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop.verdict import first_failure
    from autogk_git.project import Project

    project = Project(root)
    target = project.target(target_name)
    backend = get_backend(state["backend"], project.config)
    if timed_needed and not backend.timing:
        return m or Facts(None, f"no latency in the notes and the {backend.name} backend does not time")
    say(f"benchmarking {commit[:10]} on the {backend.name} backend")
    src = kernels.sources_at(root, target, commit)
    bench = benchmark(target, backend, src, None, project.config, seed=int(commit[:8], 16), progress=say)
    fail = first_failure(bench)
    record = build_result(
        kind="bisect", target=target_name, commit=commit, parent=None, bench=bench, verdict=None,
        kernel_src=src.get("kernel.py", ""), correct=bool(bench.get("correct")) and not bench.get("error"),
        why=bench.get("error") or (f"{fail[2][:300]} (workload {fail[1][:8]}, {fail[0]})" if fail else ""))
    line = (f"autogk bisect {target_name}: {commit[:10]} "
            f"{'correct' if record['correct'] else 'INCORRECT'} on the {bench['backend']} backend")
    repo.write_note(root, refs.NOTES_BISECT, commit, line + "\n\n" + json.dumps(record, indent=1, sort_keys=True) + "\n")
    fresh = Facts(fresh=True)
    _add(fresh, record, "candidate", f"benchmarked {commit[:10]} on {bench['backend']}")
    return fresh


def pick_latency(m: Facts, base: dict[str, float], workload: str | None) -> tuple[float | None, str]:
    """(ratio of m to the baseline, what it covers) on one workload, or the geomean of the common ones."""
    lat = m.latency()
    if workload:
        keys = [u for u in lat if u.startswith(workload) and u in base]
        if not keys:
            return None, f"no latency for workload {workload}"
        u = keys[0]
        return lat[u] / base[u], f"workload {u[:8]}: {lat[u]:.3f} us vs {base[u]:.3f} us"
    common = [u for u in lat if u in base and base[u] > 0]
    if not common:
        return None, "no workload timed both here and at GOOD"
    r = ledger.geomean([lat[u] / base[u] for u in common])
    return r, f"geomean over {len(common)} workload(s)"


def judge(root: Path, commit: str, state: dict[str, Any], say: Say) -> dict[str, Any]:
    target = state["target"]
    tree = kernels.trees(root, [commit], state["path"]).get(commit)
    if tree is None:
        return {"commit": commit, "verdict": "skip", "code": SKIP, "why": f"no {state['path']} in this commit"}
    m = facts_for(root, target, commit, tree, state, say)
    out = {"commit": commit, "tree": tree, "facts": m.as_dict(), "benchmarked": m.fresh,
           "source": "; ".join(m.sources[:2]) or "unknown"}
    if m.correct is False:
        return {**out, "verdict": "bad", "code": BAD, "why": f"incorrect: {m.why}"[:400]}
    if m.correct is None and state["mode"] == "correctness":
        return {**out, "verdict": "skip", "code": SKIP, "why": m.why or "could not be checked"}
    if state["mode"] == "timing":
        ratio, what = pick_latency(m, state["baseline"], state.get("workload"))
        if ratio is None:
            return {**out, "verdict": "skip", "code": SKIP, "why": m.why or what}
        limit = 1 + state["threshold"]
        verdict = "bad" if ratio > limit else "good"
        return {**out, "verdict": verdict, "code": BAD if verdict == "bad" else GOOD, "ratio": ratio,
                "why": f"{ratio:.3f}x GOOD's latency ({what}); limit {limit:.3f}x"}
    return {**out, "verdict": "good", "code": GOOD, "why": "correct"}


def _journal(state: dict[str, Any]) -> list[dict[str, Any]]:
    p = Path(state["journal"])
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def step(state_path: str) -> int:
    """One `git bisect run` step: judge HEAD of the bisect worktree; exit 0 good, 1 bad, 125 skip."""
    state = json.loads(Path(state_path).read_text())
    try:
        head = repo.head_sha(Path.cwd())
        res = judge(Path(state["root"]), head, state, lambda s: print(f"autogk bisect: {s}", flush=True))
    except Exception as e:  # noqa: BLE001 - broken infrastructure aborts the bisect rather than blaming a commit
        res = {"commit": "HEAD", "verdict": "abort", "code": ABORT + 1, "why": f"{type(e).__name__}: {e}"[:500]}
    with open(state["journal"], "a") as f:
        f.write(json.dumps(res) + "\n")
    print(f"autogk bisect: {res['commit'][:10]} {res['verdict']}: {res['why']}", flush=True)
    return res["code"]


# ------------------------------------------------------------------------------------------------
# The whole search
# ------------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    first_bad: str | None
    mode: str
    steps: list[dict[str, Any]]
    benchmarked: int
    reused: int
    message: str
    candidates: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"first_bad": self.first_bad, "mode": self.mode, "steps": self.steps, "benchmarked": self.benchmarked,
                "reused": self.reused, "message": self.message, "candidates": self.candidates}


def _counts(steps: list[dict[str, Any]]) -> tuple[int, int]:
    """(commits benchmarked, commits answered from notes), each commit counted once."""
    fresh = {s["commit"] for s in steps if s.get("benchmarked")}
    noted = {s["commit"] for s in steps if (s.get("facts") or {}).get("sources")} - fresh
    return len(fresh), len(noted)


def run(project, good: str, bad: str, target: str, workload: str | None, threshold_pct: float | None,
        backend: str | None, say: Say) -> Outcome:
    root = project.root
    g, b = repo.rev(root, good), repo.rev(root, bad)
    for name, sha in ((good, g), (bad, b)):
        if not sha:
            raise AutogkError(f"'{name}' is not a commit", "pass two trunk revisions: autogk bisect GOOD BAD")
    if g == b:  # e.g. a trunk that has not moved yet (on CPU, correct experiments are held, not merged)
        return Outcome(None, "none", [], 0, 0, f"GOOD ({good}) and BAD ({bad}) are the same commit: nothing to "
                       "bisect until the trunk moves past GOOD")
    if not repo.is_ancestor(root, g, b):
        raise AutogkError(f"GOOD ({good}) is not an ancestor of BAD ({bad})",
                          f"pick GOOD from `git log --first-parent {bad}`")
    line = commits.first_parent_line(root, g, b)
    if not line or b not in line:
        raise AutogkError("nothing to bisect between GOOD and BAD", "check the two revisions")
    from autogk_git.bench.backends import get_backend
    backend_name = backend or project.config.bench.backend
    timing_backend = get_backend(backend_name, project.config).timing
    path = project.target_rel(target)
    table = known(root, target, path, [g, b, *line])
    g_tree = kernels.trees(root, [g], path).get(g)
    base_m = table.get(g_tree, Facts()) if g_tree else Facts()
    threshold = (threshold_pct if threshold_pct is not None else 5.0) / 100.0
    mode = "timing" if (base_m.latency() or timing_backend) else "correctness"
    if threshold_pct is not None and mode == "correctness":
        say(f"note: no latency at GOOD in the notes and the {get_backend(backend_name, project.config).name} "
            "backend does not time: bisecting correctness only")
    with tempfile.TemporaryDirectory(prefix="autogk-bisect-") as tmp:
        state = {"root": str(root), "target": target, "path": path, "workload": workload, "threshold": threshold,
                 "mode": mode, "backend": backend_name, "journal": str(Path(tmp) / "journal.jsonl"),
                 "table": {k: v.as_dict() for k, v in table.items()}, "baseline": {}}
        state_path = Path(tmp) / "state.json"
        state_path.write_text(json.dumps(state))
        base_fresh = False
        if mode == "timing":
            base = facts_for(root, target, g, g_tree, state, say)
            if not base.latency():
                raise AutogkError(f"no latency for GOOD ({good}): {base.why}",
                                  "bisect on a GPU backend (--backend local or modal), or drop --threshold")
            state["baseline"] = base.latency()
            base_fresh = base.fresh
            if g_tree:  # judging GOOD below reuses this measurement
                state["table"][g_tree] = base.as_dict()
            if workload and not any(u.startswith(workload) for u in state["baseline"]):
                raise AutogkError(f"GOOD has no timing for workload {workload}",
                                  f"timed workloads: {', '.join(u[:8] for u in state['baseline'])}")
        # Correctness needs nothing of GOOD to judge BAD: BAD first, and a BAD that is not bad ends the
        # bisect before GOOD is benchmarked (a CPU check of a kernel no note has seen takes ~30 s).
        # Timing judges BAD against GOOD's latency, measured above.
        b_res = judge(root, b, state, say) if mode == "correctness" else None
        if b_res is not None and b_res["verdict"] != "bad":
            return Outcome(None, mode, [b_res], *_counts([b_res]),
                           f"BAD ({bad}) is not bad ({b_res['verdict']}: {b_res['why']}): nothing to find; "
                           f"GOOD ({good}) was not judged")
        g_res = judge(root, g, state, say)
        if mode == "timing" and base_fresh:  # measured just above, then reused from the table
            g_res["benchmarked"] = True
        if g_res["verdict"] != "good":
            raise AutogkError(f"GOOD ({good}) is not good: {g_res['why']}", "pick an earlier GOOD")
        state_path.write_text(json.dumps(state))
        if b_res is None:
            b_res = judge(root, b, state, say)
        with open(state["journal"], "a") as f:
            f.write(json.dumps(b_res) + "\n")
        if b_res["verdict"] != "bad":
            return Outcome(None, mode, [g_res, b_res], *_counts([g_res, b_res]),
                           f"BAD ({bad}) is not bad ({b_res['verdict']}: {b_res['why']}): nothing to find")
        wt = Path(tmp) / "wt"
        worktrees.add_worktree(root, wt, b, detach=True)
        try:
            proc = merges.bisect_first_parent(wt, b, g, *module_command("autogk_git.review.bisection", "step",
                                                                       str(state_path)))
            out = proc.stdout + proc.stderr
            for ln in out.splitlines():
                if ln.startswith("autogk bisect:"):
                    say(ln[len("autogk bisect: "):])
        finally:
            worktrees.remove_worktree(root, wt)
        steps = [g_res] + _journal(state)
    first = None
    candidates: list[str] = []
    for ln in out.splitlines():
        if ln.endswith("is the first bad commit"):
            first = ln.split()[0]
    if first is None and "first bad commit could be any of" in out:
        candidates = [ln.strip() for ln in out.split("first bad commit could be any of:")[1].splitlines()
                      if len(ln.strip()) == 40]
    if proc.returncode != 0 and first is None and not candidates:
        raise AutogkError(f"git bisect run stopped: {out.strip().splitlines()[-1] if out.strip() else proc.returncode}",
                          "see the steps above; fix the benchmark setup (`autogk doctor`) and run again")
    mode_words = ("slower by more than " + f"{threshold * 100:g}% " +
                  (f"on workload {workload}" if workload else "(geomean)") + " or incorrect") \
        if mode == "timing" else "incorrect (correctness only: no timing available)"
    msg = (f"first bad commit: {first}" if first else
           f"the first bad commit is one of {len(candidates)} (the others could not be tested)")
    return Outcome(first, mode, steps, *_counts(steps),
                   f"{msg}; bad means {mode_words}", candidates)


if __name__ == "__main__":
    if sys.argv[1:2] == ["step"]:
        sys.exit(step(sys.argv[2]))
    sys.exit(ABORT + 1)
