"""What git holds of one experiment's run beside its result note: the kernel, the diff against its
parent, the plan. MLflow shows them as the run's artifacts (kernel.py, diff.patch, plan.md).

The loop passes what it already holds when it logs a run (tracking/runs.py `log_result`'s `files`);
these readers fill in the rest, and serve the callers that hold nothing (`autogk sync` of old notes, a
pick, a hook's run).
"""
from __future__ import annotations

from typing import Any

from autogk_git.git import commits, repo
from autogk_git.project import Project
from autogk_git.record import refs

KERNEL, DIFF, PLAN = "kernel.py", "diff.patch", "plan.md"


def run_files(project: Project, result: dict[str, Any], held: dict[str, str] | None = None) -> dict[str, str]:
    """{artifact name: text} for one result: what `held` names, the rest read from git. A kernel or plan
    git does not have is left out, and the diff when the result has no parent."""
    files = dict(held or {})
    rel = project.target_rel(result["target"])
    if KERNEL not in files:
        kernel = repo.show_file(project.root, result["commit"], rel + "/kernel.py")
        if kernel is not None:
            files[KERNEL] = kernel
    if DIFF not in files and result.get("parent"):
        files[DIFF] = repo.diff(project.root, result["parent"], result["commit"], rel)
    if PLAN not in files:
        plan = repo.read_note(project.root, refs.NOTES_PLANS, result["commit"])
        if plan:
            files[PLAN] = plan
    return files


def many_run_files(project: Project, results: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """{commit: {artifact name: text}} for many results in a few git processes (not four per result)."""
    files: dict[str, dict[str, str]] = {r["commit"]: {} for r in results}
    specs = {f"{r['commit']}:{project.target_rel(r['target'])}/kernel.py": r["commit"] for r in results}
    blobs = repo.cat_blobs(project.root, list(specs))
    for spec, commit in specs.items():
        if spec in blobs:
            files[commit][KERNEL] = blobs[spec].decode(errors="replace")
    for target in {r["target"] for r in results}:
        pairs = [r for r in results if r["target"] == target and r.get("parent")]
        if not pairs:
            continue
        # One diff-tree for all pairs. A line "COMMIT PARENT" diffs PARENT -> COMMIT (the ids after the
        # first stand for its parents); with --always each diff, empty or not, follows a line holding
        # COMMIT, in input order.
        out = commits.patches(project.root, [(r["commit"], r["parent"]) for r in pairs], project.target_rel(target))
        k, current = -1, None
        for line in out.splitlines(keepends=True):
            if k + 1 < len(pairs) and line.rstrip("\n") == pairs[k + 1]["commit"]:
                k += 1
                current = pairs[k]["commit"]
                files[current][DIFF] = ""
            elif current is not None:
                files[current][DIFF] += line
    for commit, text in repo.read_notes(project.root, refs.NOTES_PLANS, list(files)).items():
        files[commit][PLAN] = text
    return files
