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
set, say, that starts from the shipped best kernel and judges one change of its long calls).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


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
    for a in attempts:
        plan_file = a.with_suffix(".md")
        plan = plan_file.read_text() if plan_file.exists() else f"# {a.stem}\n"
        hypothesis = plan.splitlines()[0].lstrip("# ").strip()
        if a.read_text() == current or f"[{a.stem}]" in history:
            continue
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
