"""Git hook entry points. The installed shims filter in shell, so a non-experiment commit never starts Python.

    python -m autogk_git.hook post-commit   benchmark a hand-made experiment commit
    python -m autogk_git.hook pre-commit    refuse changes outside the target's editable files
    python -m autogk_git.hook bench SHA BRANCH   the background benchmark (started by post-commit)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autogk_git import env
from autogk_git.record import refs
from autogk_git.errors import AutogkError
from autogk_git.git import index, repo
from autogk_git.loop.background import pid_file, running_bench_pid

def _experiment_branch() -> refs.ExperimentRef | None:
    head = repo.head_ref(None, inherit=True)
    parsed = refs.ExperimentRef.parse(head) if head else None
    return parsed[1] if parsed and parsed[0] == "branch" else None


def pre_commit() -> int:
    exp = _experiment_branch()
    if exp is None or env.in_loop():
        return 0
    from autogk_git.project import Project
    project = Project.find()
    target = project.target(exp.target)
    # git's own index for this commit: `commit -a` and `commit PATH` stage into a temporary index named by
    # GIT_INDEX_FILE, which must not be stripped here.
    staged = index.staged_names(project.root, inherit=True)
    bad = [p for p in staged if not target.is_editable(p)]
    if bad:
        print(f"autogk: branch {exp.branch} is an experiment on target '{exp.target}'; it may change only "
              f"{target.rel}/{{{','.join(target.editable)}}}, so the measurement compares kernels and nothing else.\n"
              f"  not allowed here: {', '.join(bad)}\n"
              f"  unstage them (git restore --staged {' '.join(bad)}) or commit them on {project.trunk}.",
              file=sys.stderr)
        return 1
    return 0


def post_commit() -> int:
    exp = _experiment_branch()
    if exp is None or env.in_loop():
        return 0
    from autogk_git.project import Project
    project = Project.find()
    sha = repo.head_sha(project.root)
    if project.config.bench.hook_mode == "foreground" or env.hook_foreground():
        return bench(project, sha, exp.branch)
    log = project.state_dir / "logs" / f"{exp.target}-{exp.number:04d}-{sha[:10]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "autogk_git.hook", "bench", sha, exp.branch],
                                cwd=str(project.root), stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    pid_file(project.state_dir, sha).write_text(str(proc.pid))
    print(f"autogk: benchmarking experiment #{exp.number:04d} ({sha[:10]}) in the background; log: {log}\n"
          f"autogk: see the result with `autogk show {exp.number}`; `autogk iterate` concludes it (merge or archive)")
    return 0


def bench(project, sha: str, branch: str) -> int:
    from autogk_git.loop import experiment as ex
    exp = refs.ExperimentRef.parse(branch)[1]
    pid_path = pid_file(project.state_dir, sha)
    pid_path.write_text(str(os.getpid()))
    try:
        ex.evaluate(project, exp.target, exp.number, sha, branch, lambda s: print(f"autogk: {s}", flush=True))
    finally:
        pid_path.unlink(missing_ok=True)
    return 0


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["pre-commit"]:
            return pre_commit()
        if argv[:1] == ["post-commit"]:
            return post_commit()
        if argv[:1] == ["bench"]:
            from autogk_git.project import Project
            return bench(Project.find(), argv[1], argv[2])
    except AutogkError as e:
        print(f"autogk: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
