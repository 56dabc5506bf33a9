"""The pre-commit guard checks what is being committed, whichever way the commit is made: git's own
index for this commit (a temporary one for `commit -a`, `commit --only PATH` and `commit -- PATH`)."""
from __future__ import annotations

import subprocess

import pytest

from conftest import git

KERNEL = "kernels/scale/kernel.py"


@pytest.fixture
def branch(project):
    """A hand-made experiment branch with a tracked README and both files edited, nothing staged."""
    (project / "README.md").write_text("# project\n")
    git(project, "add", "README.md")
    git(project, "commit", "-qm", "readme")
    # The guard is what is tested; the post-commit benchmark of accepted commits is not needed here.
    (project / ".git" / "hooks" / "post-commit").unlink()
    git(project, "checkout", "-qb", "autogk/scale/0001-by-hand")
    (project / "README.md").write_text("# project\nnot a kernel change\n")
    k = project / KERNEL
    k.write_text(k.read_text().replace("BLOCK = 64 ", "BLOCK = 128 "))
    return project


def commit(root, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "commit", "-q", *args], cwd=root, capture_output=True, text=True)


def committed(root) -> list[str]:
    return git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split()


def test_commit_a_with_a_file_outside_is_refused(branch):
    head = git(branch, "rev-parse", "HEAD")
    proc = commit(branch, "-am", "sneak the README in")
    assert proc.returncode != 0 and "README.md" in proc.stderr and "may change only" in proc.stderr
    assert git(branch, "rev-parse", "HEAD") == head


def test_commit_a_with_only_the_kernel_is_accepted(branch):
    git(branch, "checkout", "--", "README.md")
    proc = commit(branch, "-am", "BLOCK 128")
    assert proc.returncode == 0, proc.stderr
    assert committed(branch) == [KERNEL]


def test_commit_only_path_outside_is_refused(branch):
    git(branch, "add", KERNEL)
    head = git(branch, "rev-parse", "HEAD")
    proc = commit(branch, "--only", "README.md", "-m", "sneak")
    assert proc.returncode != 0 and "README.md" in proc.stderr
    assert git(branch, "rev-parse", "HEAD") == head


def test_commit_only_the_kernel_is_accepted_while_the_readme_is_staged(branch):
    # The real index holds README.md, but this commit's own index holds only the kernel.
    git(branch, "add", "README.md")
    proc = commit(branch, "--only", KERNEL, "-m", "BLOCK 128")
    assert proc.returncode == 0, proc.stderr
    assert committed(branch) == [KERNEL]


def test_commit_dashdash_path_outside_is_refused(branch):
    head = git(branch, "rev-parse", "HEAD")
    proc = commit(branch, "-m", "sneak", "--", "README.md")
    assert proc.returncode != 0 and "README.md" in proc.stderr
    assert git(branch, "rev-parse", "HEAD") == head


def test_commit_dashdash_kernel_is_accepted_while_the_readme_is_staged(branch):
    git(branch, "add", "README.md")
    proc = commit(branch, "-m", "BLOCK 128", "--", KERNEL)
    assert proc.returncode == 0, proc.stderr
    assert committed(branch) == [KERNEL]


def test_commit_include_path_outside_is_refused(branch):
    git(branch, "add", KERNEL)
    proc = commit(branch, "--include", "README.md", "-m", "sneak")
    assert proc.returncode != 0 and "README.md" in proc.stderr


def test_commit_a_on_the_trunk_is_not_guarded(project):
    (project / ".git" / "hooks" / "post-commit").unlink()
    (project / "notes.txt").write_text("x\n")
    git(project, "add", "notes.txt")
    (project / "notes.txt").write_text("y\n")
    assert commit(project, "-am", "a note").returncode == 0
