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

from autogk_git import refs
from autogk_git.errors import AutogkError
from autogk_git.git.run import git

LOOP_ENV = "AUTOGK_LOOP"


def _pid_file(state_dir: Path, sha: str) -> Path:
    d = state_dir / "bench"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{sha}.pid"


def running_bench_pid(state_dir: Path, sha: str) -> int | None:
    p = state_dir / "bench" / f"{sha}.pid"
    try:
        pid = int(p.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    except PermissionError:
        return pid


def _experiment_branch() -> refs.ExperimentRef | None:
    out = subprocess.run(["git", "symbolic-ref", "--quiet", "HEAD"], capture_output=True, text=True)
    parsed = refs.ExperimentRef.parse(out.stdout.strip()) if out.returncode == 0 else None
    return parsed[1] if parsed and parsed[0] == "branch" else None


def pre_commit() -> int:
    exp = _experiment_branch()
    if exp is None or os.environ.get(LOOP_ENV):
        return 0
    from autogk_git.project import Project
    project = Project.find()
    target = project.target(exp.target)
    staged = [p for p in git("diff", "--cached", "--name-only", cwd=project.root).splitlines() if p]
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
    if exp is None or os.environ.get(LOOP_ENV):
        return 0
    from autogk_git.project import Project
    project = Project.find()
    sha = git("rev-parse", "HEAD", cwd=project.root).strip()
    if project.config.bench.hook_mode == "foreground" or os.environ.get("AUTOGK_HOOK_FOREGROUND"):
        return bench(project, sha, exp.branch)
    log = project.state_dir / "logs" / f"{exp.target}-{exp.number:04d}-{sha[:10]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "autogk_git.hook", "bench", sha, exp.branch],
                                cwd=str(project.root), stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    _pid_file(project.state_dir, sha).write_text(str(proc.pid))
    print(f"autogk: benchmarking experiment #{exp.number:04d} ({sha[:10]}) in the background; log: {log}\n"
          f"autogk: see the result with `autogk show {exp.number}`; `autogk iterate` concludes it (merge or archive)")
    return 0


def bench(project, sha: str, branch: str) -> int:
    from autogk_git.loop import experiment as ex
    exp = refs.ExperimentRef.parse(branch)[1]
    pid_file = _pid_file(project.state_dir, sha)
    pid_file.write_text(str(os.getpid()))
    try:
        ex.evaluate(project, exp.target, exp.number, sha, branch, lambda s: print(f"autogk: {s}", flush=True))
    finally:
        pid_file.unlink(missing_ok=True)
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
