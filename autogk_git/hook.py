"""Git hook entry points. The installed shims filter in shell, so a non-experiment commit never starts Python.

    python -m autogk_git.hook post-commit   benchmark a hand-made experiment commit
    python -m autogk_git.hook pre-commit    refuse changes outside the target's editable files
    python -m autogk_git.hook bench SHA BRANCH ROOT   the background benchmark (started by post-commit)
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
from autogk_git.procs import module_command

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
    taken = _number_taken(project, exp)
    if taken:
        from autogk_git.record.experiments import next_number
        print(f"autogk: branch {exp.branch} names experiment #{exp.number:04d} of target '{exp.target}', which "
              f"{taken}: its verdict would be recorded, then the loop would take the branch for that experiment "
              f"and delete it unmerged.\n  rename the branch to the next free number: git branch -m "
              f"autogk/{exp.target}/{next_number(project, exp.target):04d}-{exp.slug or 'idea'}",
              file=sys.stderr)
        return 1
    if bad:
        print(f"autogk: branch {exp.branch} is an experiment on target '{exp.target}'; it may change only "
              f"{target.rel}/{{{','.join(target.editable)}}}, so the measurement compares kernels and nothing else.\n"
              f"  not allowed here: {', '.join(bad)}\n"
              f"  unstage them (git restore --staged {' '.join(bad)}) or commit them on {project.trunk}.",
              file=sys.stderr)
        return 1
    return 0


def _number_taken(project, exp: refs.ExperimentRef) -> str | None:
    """Why exp's number is not this branch's to use (None: it is): concluded already (kept, archived or
    held), or the number of another open experiment branch."""
    for what, ref in (("was kept", exp.kept_ref), ("was reverted (archived)", exp.archive_ref),
                      ("is held untimed", exp.untimed_ref)):
        if repo.rev(project.root, ref):
            return f"{what} already ({ref})"
    others = [name for name, _ in repo.for_each_ref(project.root, refs.branches_of(exp.target, exp.number))
              if name != exp.branch_ref]
    if others:
        return f"is open already on {refs.short_branch(others[0])}"
    return None


def post_commit() -> int:
    exp = _experiment_branch()
    if exp is None or env.in_loop():
        return 0
    from autogk_git.project import Project
    project = Project.find()
    sha = repo.head_sha(project.root)
    if _agents_own(project.root, sha):
        # The command agent committed in its worktree itself (--no-verify skips only pre-commit). The loop
        # undoes that commit and commits the experiment; a benchmark of it would outlive its worktree.
        print(f"autogk: {sha[:10]} is the command agent's own commit: not benchmarked (the loop commits "
              f"experiment #{exp.number:04d} itself)")
        return 0
    if project.config.bench.hook_mode == "foreground" or env.hook_foreground():
        return bench(project, sha, exp.branch)
    log = project.state_dir / "logs" / f"{exp.target}-{exp.number:04d}-{sha[:10]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        proc = subprocess.Popen(module_command("autogk_git.hook", "bench", sha, exp.branch, str(project.root)),
                                cwd=str(project.root), stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    pid_file(project.state_dir, sha).write_text(str(proc.pid))
    print(f"autogk: benchmarking experiment #{exp.number:04d} ({sha[:10]}) in the background; log: {log}\n"
          f"autogk: see the result with `autogk show {exp.number}`; `autogk iterate` concludes it (merge or archive)")
    return 0


def _agents_own(root: Path, sha: str) -> bool:
    from autogk_git.agents.confine import is_marker
    return any(is_marker(email) for _, email in repo.committers(root, f"{sha}~1", sha))


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


def background_bench(sha: str, branch: str, root: Path | None) -> int:
    """The benchmark post-commit started; its checkout may be removed under it (the loop concluded or
    undid the experiment meanwhile): then it ends with one line in its log, not a traceback."""
    from autogk_git.project import Project

    def gone(why: str) -> int:
        print(f"autogk: the background benchmark of {sha[:10]} ({branch}) stopped: its checkout {root} was removed "
              f"({why[:200]}), so nothing was recorded; `autogk show` says what the loop decided", flush=True)
        return 1

    if root is not None and not root.is_dir():  # a folder above it may be another checkout: never judge there
        return gone("before it started")
    try:
        return bench(Project.find(root), sha, branch)
    except (AutogkError, OSError) as e:
        if root is None or root.is_dir():
            raise
        return gone("while it ran: " + (e.message if isinstance(e, AutogkError) else f"{type(e).__name__}: {e}"))


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["pre-commit"]:
            return pre_commit()
        if argv[:1] == ["post-commit"]:
            return post_commit()
        if argv[:1] == ["bench"]:
            return background_bench(argv[1], argv[2], Path(argv[3]) if len(argv) > 3 else None)
    except AutogkError as e:
        print(f"autogk: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
