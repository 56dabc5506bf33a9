"""`autogk conclude [N]`: a hand-made or interrupted experiment concluded without starting another or
moving the person's checkout; Ctrl-C in `iterate` names what it left open and the command that finishes it."""
from __future__ import annotations

import signal
import subprocess

import pytest

from conftest import BIN, autogk_in, git


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


def experiment_refs(root) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname)", "refs/autogk/").split()


def test_conclude_applies_a_hand_experiments_verdict_and_leaves_the_checkout_where_it_was(project):
    root = project
    branch = "autogk/scale/0001-by-hand"
    git(root, "checkout", "-q", "-b", branch)
    kernel = root / "kernels/scale/kernel.py"
    kernel.write_text(kernel.read_text().replace("BLOCK = 64", "BLOCK = 128", 1))
    git(root, "commit", "-qam", "by hand: BLOCK 128")  # the post-commit hook benchmarks it
    out = autogk_in(root, "conclude", "1").stdout
    assert "concluded 1 experiment(s): 1 kept, 0 reverted" in out, out
    assert experiment_refs(root) == ["refs/autogk/kept/scale/0001"]            # nothing else started
    assert git(root, "branch", "--show-current").strip() == branch              # the checkout stayed
    assert "BLOCK = 128" in kernel.read_text() and git(root, "status", "--porcelain") == ""
    assert git(root, "rev-parse", "main^2").strip() == git(root, "rev-parse", branch).strip()  # merged
    assert "left branch autogk/scale/0001-by-hand checked out" in out, out
    again = autogk_in(root, "conclude", "1").stdout  # the branch stays while checked out: nothing is done twice
    assert "#0001 was concluded already (kept)" in again and "concluded 1" not in again, again
    assert experiment_refs(root) == ["refs/autogk/kept/scale/0001"]
    gone = autogk_in(root, "conclude", "7", check=False)
    assert gone.returncode == 1 and "is not open" in gone.stderr and "autogk log --state open" in gone.stderr


def test_ctrl_c_in_iterate_names_the_open_experiment_and_how_to_finish_it(project):
    root = project
    proc = subprocess.Popen([str(BIN / "autogk"), "iterate", "-n", "3"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:  # interrupt while #1 is being benchmarked: committed, no verdict yet
        seen.append(line)
        if line.startswith("quick: "):
            proc.send_signal(signal.SIGINT)
            break
    rest, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, "".join(seen) + rest + err
    assert "left open: #0001 (autogk/scale/0001-" in err, err
    assert "autogk conclude 1 --target scale" in err and "autogk iterate --target scale" in err, err
    out = autogk_in(root, "conclude").stdout
    assert "concluded 1 experiment(s)" in out, out
    assert len(experiment_refs(root)) == 1
