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


def test_non_experiment_commit_never_starts_python(project):
    # The shim filters in shell: a commit on the trunk must leave no trace of the Python hook.
    (project / "notes.txt").write_text("hello\n")
    git(project, "add", "notes.txt")
    proc = subprocess.run(["git", "commit", "-m", "docs"], cwd=project, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(project), "GIT_CONFIG_NOSYSTEM": "1",
                               "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
                               "GIT_COMMITTER_EMAIL": "a@b"})
    assert proc.returncode == 0, proc.stderr
    assert "autogk" not in proc.stdout + proc.stderr
