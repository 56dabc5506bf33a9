"""A scripted coding agent for `autogk iterate --agent command`: the attempts a kernel engineer wrote.

    [agent] command = "python /path/to/benchmarks/flagship/attempt.py"   (or AUTOGK_AGENT_COMMAND)

Each attempt is a whole kernel file under benchmarks/flagship/<target>/NN_<name>.py, written by hand,
with its plan in NN_<name>.md (the first line is the hypothesis). autogk runs this script in the
experiment's checkout, as it would run `claude -p`: the script puts the next attempt not yet tried
in this project (not already the trunk's kernel, nor named in an earlier experiment's hypothesis,
as the prompt's history or the commits show)
into the target's kernel.py, writes the hypothesis to $AUTOGK_HYPOTHESIS_FILE, and prints the plan,
which autogk keeps as the experiment's plan note. autogk's own verdicts then keep or revert it.
With no attempt left it changes nothing (autogk then records an empty proposal).
FLAGSHIP_ATTEMPTS=NN_a,NN_b in the environment offers only those attempts (a project on another workload
set, say, that starts from the shipped best kernel and judges one change of its long calls). A plan with a
line `Judged on: long` (set names, comma-separated) is offered only to a project whose workloads hold one of
those bundled sets: a change of calls that the contest-shaped set never makes is not judged there.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # this checkout's autogk_git: the bundled targets' sets, as init names them


def uuids(path: Path) -> set[str]:
    from autogk_git.project import read_jsonl
    return {obj.get("workload", obj).get("uuid") for _, obj in read_jsonl(path)}


def project_sets(target: Path) -> set[str] | None:
    """The bundled workload sets (default, long, ...) the project's workloads hold any of; None where the target is
    not a bundled one (then every attempt is offered)."""
    from autogk_git.scaffold import bundled, workload_sets
    found = bundled(target.name)
    mine = target / "workloads.jsonl"
    if found is None or not mine.is_file():
        return None
    have = uuids(mine)
    return {name for name, f in workload_sets(found[1]).items() if uuids(f) & have}


def judged_on(plan: str) -> set[str] | None:
    """The sets a plan's `Judged on:` line names; None without one."""
    for line in plan.splitlines():
        if line.startswith("Judged on:"):
            return {x.strip() for x in line[len("Judged on:"):].split(",") if x.strip()}
    return None


def tried(worktree: Path) -> str:
    """What this project has tried: the prompt autogk wrote (its experiment history names each earlier
    hypothesis, reverted ones included) and the commit messages the checkout's git can see (the
    agent's git may be a throwaway clone that holds the trunk only)."""
    prompt = os.environ.get("AUTOGK_PROMPT_FILE")
    text = Path(prompt).read_text() if prompt and Path(prompt).is_file() else ""
    r = subprocess.run(["git", "log", "--all", "--format=%B"], cwd=worktree, capture_output=True, text=True)
    return text + (r.stdout if r.returncode == 0 else "")


def main() -> int:
    target = Path(os.environ["AUTOGK_TARGET_DIR"])
    worktree = Path(os.environ.get("AUTOGK_WORKTREE", "."))
    kernel = target / "kernel.py"
    attempts = sorted((HERE / target.name).glob("[0-9][0-9]_*.py"))
    only = [a.strip() for a in os.environ.get("FLAGSHIP_ATTEMPTS", "").split(",") if a.strip()]
    if only:
        attempts = [a for a in attempts if a.stem in only]
    if not attempts:
        print(f"no attempts written for {target.name} under {HERE}")
        return 0
    history = tried(worktree)
    current = kernel.read_text()
    sets = project_sets(target)
    for a in attempts:
        plan_file = a.with_suffix(".md")
        plan = plan_file.read_text() if plan_file.exists() else f"# {a.stem}\n"
        hypothesis = plan.splitlines()[0].lstrip("# ").strip()
        if a.read_text() == current or f"[{a.stem}]" in history:
            continue
        wants = judged_on(plan)
        if wants is not None and sets is not None and not wants & sets:
            continue  # a change of calls this project's workloads never make
        kernel.write_text(a.read_text())
        hyp = os.environ.get("AUTOGK_HYPOTHESIS_FILE")
        if hyp:
            Path(hyp).write_text(f"[{a.stem}] {hypothesis}\n")
        print(plan)
        return 0
    print(f"every attempt for {target.name} was tried: nothing changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
