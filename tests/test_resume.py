"""Stop the loop with SIGKILL at any point: the next run finishes or discards, never duplicates or loses."""
from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from conftest import BIN, autogk_in, git, notes_json


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


def kill_when(project, marker: str, nth: int = 1) -> str:
    """Run `autogk iterate -n 5` and SIGKILL it when the nth output line containing marker appears."""
    proc = subprocess.Popen([str(BIN / "autogk"), "iterate", "-n", "5"], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    seen, out = 0, []
    for line in proc.stdout:
        out.append(line)
        if marker in line:
            seen += 1
            if seen == nth:
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, "".join(out)
    return "".join(out)


def experiment_refs(project) -> dict[int, list[tuple[str, str]]]:
    refs: dict[int, list[tuple[str, str]]] = {}
    lines = git(project, "for-each-ref", "--format=%(refname) %(objectname)", "refs/autogk/").splitlines()
    for line in lines:
        name, sha = line.split()
        kind, number = name.split("/")[2], int(name.rsplit("/", 1)[-1])
        refs.setdefault(number, []).append((kind, sha))
    return refs


@pytest.mark.slow
@pytest.mark.parametrize("marker,nth,resumed", [
    ("committed", 2, "#0002: committed but not benchmarked"),   # killed while #2 is benchmarked
    (": KEEP - ", 1, "#0001 kept: merged"),                     # after #1's result note, before its merge
    ("quick:", 2, "#0002: committed but not benchmarked"),      # killed inside a worker run of #2
])
def test_sigkill_then_resume_leaves_no_duplicate_and_loses_nothing(project, marker, nth, resumed):
    before = kill_when(project, marker, nth)
    assert "Traceback" not in before
    # Resume only (no new experiment: a limit reached at once), in-process: what is left is the point.
    out = autogk_in(project, "iterate", "-n", "0", "--max-time", "0.001").stdout
    assert "recovered a stale lock" in out
    assert resumed in out

    refs = experiment_refs(project)
    numbers = sorted(refs)
    assert numbers == list(range(1, len(numbers) + 1)), refs       # no gap, no number twice
    for n, entries in refs.items():
        assert len(entries) == 1, (n, entries)                      # kept XOR archived
        kind, sha = entries[0]
        note = notes_json(project, sha)
        assert note["experiment"] == n
        assert {"kept": "keep", "archive": "revert"}[kind] == note["verdict"]["decision"]
    # Everything concluded: no branch, no worktree, no lock.
    assert git(project, "branch", "--list", "autogk/*").strip() == ""
    assert len(git(project, "worktree", "list").splitlines()) == 1
    assert not (project / ".git" / "autogk" / "loop.lock").exists()
    # Every kept experiment is on the trunk exactly once.
    merged = git(project, "log", "--first-parent", "--merges", "--format=%B%x00", "main")
    for n, [(kind, sha)] in refs.items():
        if kind == "kept":
            assert merged.count(f"Autogk-Experiment: {n}\n") == 1
    rows = json.loads(autogk_in(project, "log", "--json").stdout)
    assert [r["number"] for r in rows] == numbers and all(r["decision"] != "pending" for r in rows)


def test_live_lock_refuses_a_second_loop(project):
    proc = subprocess.Popen([str(BIN / "autogk"), "iterate", "-n", "2"], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            if "proposing" in line:
                break
        second = autogk_in(project, "iterate", "-n", "1", check=False)
        assert second.returncode == 1
        assert "another autogk loop" in second.stderr and "hint:" in second.stderr
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
