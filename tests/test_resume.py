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


@pytest.mark.slow(7)
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


def _scripted_agent(tmp_path, name: str, script: str) -> str:
    agent = tmp_path / name
    agent.write_text("#!/bin/sh\n" + script + "\n")
    agent.chmod(0o755)
    return str(agent)


def test_a_keep_whose_merge_waited_is_measured_again_against_the_trunk_it_lands_on(project, tmp_path):
    """A keep that could not merge (the trunk's checkout had an edit) waits as a kept ref, and autogk says to
    commit or stash, then iterate again. The person commits their edit (BLOCK = 32: correct alone), which
    breaks the kept change (a grid of n/64 blocks: correct only while BLOCK = 64). The next iterate used to
    merge the kept ref as it was, unjudged against that commit: half the outputs unwritten on the trunk."""
    kernel = project / "kernels" / "scale" / "kernel.py"
    grid64 = _scripted_agent(tmp_path, "grid64", "sed -i 's/triton.cdiv(n, BLOCK)/triton.cdiv(n, 64)/' "
                             "kernels/scale/kernel.py")
    kernel.write_text(kernel.read_text().replace("BLOCK = 64 ", "BLOCK = 32 ", 1))  # uncommitted, in main's checkout
    first = autogk_in(project, "iterate", "-n", "1", "--agent", "command", check=False,
                      env={"AUTOGK_AGENT_COMMAND": grid64})
    assert first.returncode != 0 and "commit or stash" in first.stdout + first.stderr, first.stdout + first.stderr
    assert git(project, "for-each-ref", "refs/autogk/kept/")  # kept, not merged
    git(project, "commit", "-qam", "person: BLOCK = 32")
    noop = _scripted_agent(tmp_path, "noop", "true")
    again = autogk_in(project, "iterate", "-n", "1", "--agent", "command", check=False,
                      env={"AUTOGK_AGENT_COMMAND": noop})
    text = again.stdout + again.stderr
    trunk_kernel = kernel.read_text()
    assert not ("BLOCK = 32 " in trunk_kernel and "triton.cdiv(n, 64)" in trunk_kernel), text
    assert "#0001 reverted" in text, text
    assert not git(project, "for-each-ref", "refs/autogk/kept/"), text


def test_a_trunk_commit_between_the_freshness_check_and_the_merge_is_not_merged_under(project, tmp_path,
                                                                                       monkeypatch):
    """The serial loop checks a keep's freshness, then profiles the new trunk kernel (seconds with ncu on
    a GPU), then merges: a person's commit in between was merged under the keep without a measurement.
    Now the merge refuses, the experiment stays open, and the next iterate measures it against that commit."""
    from autogk_git.loop import profile
    kernel = project / "kernels" / "scale" / "kernel.py"
    grid64 = _scripted_agent(tmp_path, "grid64", "sed -i 's/triton.cdiv(n, BLOCK)/triton.cdiv(n, 64)/' "
                             "kernels/scale/kernel.py")

    def person_commits(*args, **kwargs):
        kernel.write_text(kernel.read_text().replace("BLOCK = 64 ", "BLOCK = 32 ", 1))
        git(project, "commit", "-qam", "person: BLOCK = 32")
        return False
    monkeypatch.setattr(profile, "after_verdict", person_commits)
    first = autogk_in(project, "iterate", "-n", "1", "--agent", "command", check=False,
                      env={"AUTOGK_AGENT_COMMAND": grid64})
    text = first.stdout + first.stderr
    assert "moved to" in text and "before its merge: not merged" in text, text
    assert "triton.cdiv(n, 64)" not in kernel.read_text(), text
    monkeypatch.undo()
    noop = _scripted_agent(tmp_path, "noop", "true")
    again = autogk_in(project, "iterate", "-n", "1", "--agent", "command", check=False,
                      env={"AUTOGK_AGENT_COMMAND": noop})
    text = again.stdout + again.stderr
    assert "#0001 reverted" in text and "triton.cdiv(n, 64)" not in kernel.read_text(), text


def test_a_keep_note_this_clone_did_not_write_is_judged_again_before_anything_merges(project):
    """A teammate's experiment branch and its keep note arrive through a hub (here: a note added with git
    itself, as a fetch would bring it); the person checks the branch out under its own name. The next
    iterate used to conclude it on that note: a merge of a kernel this clone's judge never saw."""
    from autogk_git.record.notes import format_result, parse_result
    autogk_in(project, "iterate", "-n", "1", "--agent", "tune")
    [line] = git(project, "notes", "--ref", "autogk/results", "list").splitlines()
    real = parse_result(git(project, "notes", "--ref", "autogk/results", "show", line.split()[1]))
    kernel = project / "kernels" / "scale" / "kernel.py"
    good = kernel.read_text()
    trunk = git(project, "rev-parse", "main").strip()
    git(project, "checkout", "-q", "-b", "autogk/scale/0002-faster")
    kernel.write_text(good.replace("x * scale", "x * 0.0 * scale") if "x * scale" in good else good.replace("scale", "0.0 * scale", 1))
    git(project, "commit", "-q", "--no-verify", "-am", "faster")
    sha = git(project, "rev-parse", "HEAD").strip()
    forged = {**real, "commit": sha, "parent": trunk, "experiment": 2, "branch": "autogk/scale/0002-faster"}
    forged.pop("against", None)
    forged["verdict"] = {**real["verdict"], "decision": "keep"}
    git(project, "notes", "--ref", "autogk/results", "add", "-f", "-m", format_result(forged), sha)
    git(project, "checkout", "-q", "main")
    out = autogk_in(project, "conclude", check=False)
    text = out.stdout + out.stderr
    assert "not written by this clone" in text and "#0002 reverted" in text, text
    assert kernel.read_text() == good, text
    assert not git(project, "for-each-ref", "refs/autogk/kept/scale/0002"), text


def test_the_tuner_does_not_take_configurations_as_tried_from_notes_this_clone_did_not_write(project):
    """Revert notes that arrive from a hub (added with git itself here, on commits under experiment refs, as
    a fetch brings both) listing every one-parameter move from the trunk made the user's tuner stop with
    nothing left to try: configurations no judge here measured were taken as measured. The loop now decides
    from the notes this clone wrote; `log` still shows the fetched ones."""
    from autogk_git.record.notes import format_result, parse_result
    autogk_in(project, "iterate", "-n", "1", "--agent", "tune")
    [line] = git(project, "notes", "--ref", "autogk/results", "list").splitlines()
    real = parse_result(git(project, "notes", "--ref", "autogk/results", "show", line.split()[1]))
    trunk = git(project, "rev-parse", "main").strip()
    configs = [{"BLOCK": b, "MASK": m} for b in (32, 64, 128) for m in (True, False)]
    for i, cfg in enumerate(configs):
        number = 30 + i
        sha = git(project, "commit-tree", f"{trunk}^{{tree}}", "-p", trunk, "-m", f"marker {number}").strip()
        git(project, "update-ref", f"refs/autogk/archive/scale/{number:04d}", sha)
        forged = {**real, "commit": sha, "parent": trunk, "against": trunk, "experiment": number,
                  "tunables": cfg, "parent_tunables": cfg, "verdict": {**real["verdict"], "decision": "revert"}}
        git(project, "notes", "--ref", "autogk/results", "add", "-f", "-m", format_result(forged), sha)
    shown = {r["number"] for r in json.loads(autogk_in(project, "log", "--json").stdout)}
    assert set(range(30, 36)) <= shown
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "tune", check=False)
    text = out.stdout + out.stderr
    assert "nothing left to try" not in text and "tune: " in text, text
