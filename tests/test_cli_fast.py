"""`autogk --help` and the hooks' no-op path must not import the heavy SDKs."""
from __future__ import annotations

import subprocess
import sys

from conftest import git

HEAVY = ("mlflow", "modal", "anthropic", "torch", "triton", "flashinfer_bench")


def test_help_imports_no_heavy_sdk():
    code = ("import sys\nfrom autogk_git.cli import cli\n"
            "try:\n    cli.main(['--help'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_hook_module_imports_no_heavy_sdk():
    code = f"import sys, autogk_git.hook\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_non_experiment_commit_never_starts_python(project, tmp_path):
    # The shim filters in shell: a commit on the trunk must not start Python. The installed shims are
    # pointed at a stand-in interpreter that leaves a mark and then runs the real one, so the test sees
    # whether Python started at all (the hook's Python would exit silently on a trunk commit).
    mark = tmp_path / "python-started"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {mark}\nexec {sys.executable} "$@"\n')
    stub.chmod(0o755)
    hooks = project / git(project, "rev-parse", "--git-path", "hooks").strip()
    for name in ("pre-commit", "post-commit"):
        h = hooks / name
        h.write_text(h.read_text().replace(sys.executable, str(stub)))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(project), "GIT_CONFIG_NOSYSTEM": "1", "AUTOGK_BENCH_HOOK_MODE": "foreground",
           "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}
    (project / "notes.txt").write_text("hello\n")
    git(project, "add", "notes.txt")
    proc = subprocess.run(["git", "commit", "-m", "docs"], cwd=project, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not mark.exists() and "autogk" not in proc.stdout + proc.stderr
    # The control: on an experiment branch the same shims do start Python (pre-commit refuses the file).
    git(project, "checkout", "-qb", "autogk/scale/0001-docs")
    (project / "notes.txt").write_text("hello again\n")
    proc = subprocess.run(["git", "commit", "-qam", "docs"], cwd=project, capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "notes.txt" in proc.stderr
    started = mark.read_text().split()  # -c SAFE_BOOT autogk_git.hook pre-commit (procs.SAFE_BOOT)
    assert started[0] == "-c" and started[-2:] == ["autogk_git.hook", "pre-commit"], started
