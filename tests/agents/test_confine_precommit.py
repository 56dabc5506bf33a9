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


# Each way git builds this commit's own index: (what is staged or undone first, the commit's arguments).
REFUSED = {
    "commit -a": ([], ["-am", "sneak the README in"]),
    "commit --only PATH": ([("add", KERNEL)], ["--only", "README.md", "-m", "sneak"]),
    "commit -- PATH": ([], ["-m", "sneak", "--", "README.md"]),
    "commit --include PATH": ([("add", KERNEL)], ["--include", "README.md", "-m", "sneak"]),
}
ACCEPTED = {
    "commit -a": ([("checkout", "--", "README.md")], ["-am", "BLOCK 128"]),
    # The real index holds README.md, but this commit's own index holds only the kernel.
    "commit --only PATH": ([("add", "README.md")], ["--only", KERNEL, "-m", "BLOCK 128"]),
    "commit -- PATH": ([("add", "README.md")], ["-m", "BLOCK 128", "--", KERNEL]),
}


@pytest.mark.parametrize("how", list(REFUSED))
def test_a_commit_with_a_file_outside_is_refused(branch, how):
    before, args = REFUSED[how]
    for step in before:
        git(branch, *step)
    head = git(branch, "rev-parse", "HEAD")
    proc = commit(branch, *args)
    assert proc.returncode != 0 and "README.md" in proc.stderr and "may change only" in proc.stderr, proc.stderr
    assert git(branch, "rev-parse", "HEAD") == head


@pytest.mark.parametrize("how", list(ACCEPTED))
def test_a_commit_of_the_kernel_alone_is_accepted(branch, how):
    before, args = ACCEPTED[how]
    for step in before:
        git(branch, *step)
    proc = commit(branch, *args)
    assert proc.returncode == 0, proc.stderr
    assert committed(branch) == [KERNEL]


def test_commit_a_on_the_trunk_is_not_guarded(project):
    (project / ".git" / "hooks" / "post-commit").unlink()
    (project / "notes.txt").write_text("x\n")
    git(project, "add", "notes.txt")
    (project / "notes.txt").write_text("y\n")
    assert commit(project, "-am", "a note").returncode == 0
