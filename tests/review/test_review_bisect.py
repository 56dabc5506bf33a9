"""autogk bisect: a planted breakage (CPU, real benchmarks) and a planted slowdown (latencies in notes)."""
from __future__ import annotations

import json

import pytest

from conftest import autogk_in, git
from review_support import copy_project, iterated_template

from autogk_git.git import repo


@pytest.fixture
def iterated(template_project, tmp_path_factory, tmp_path):
    return copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")


def _commit(root, msg, path, text):
    (root / path).write_text(text)
    git(root, "add", path)
    git(root, "commit", "-qm", msg)
    return git(root, "rev-parse", "HEAD").strip()


def _repo_state(root):
    return (git(root, "rev-parse", "HEAD"), git(root, "status", "--porcelain"), git(root, "worktree", "list"),
            git(root, "for-each-ref", "refs/bisect"), git(root, "symbolic-ref", "HEAD"))


def test_bisect_finds_the_commit_that_broke_correctness(iterated):
    root = iterated
    kernel = root / "kernels/scale/kernel.py"
    good = git(root, "rev-parse", "main").strip()
    src = kernel.read_text()
    _commit(root, "program notes", "kernels/scale/program.md", "# scale\nnotes\n")
    broken = _commit(root, "simplify masking", "kernels/scale/kernel.py",
                     src.replace("MASK = True", "MASK = False"))
    _commit(root, "readme", "README.md", "hello\n")
    _commit(root, "comment", "kernels/scale/kernel.py", kernel.read_text() + "# a comment\n")
    before = _repo_state(root)

    out = json.loads(autogk_in(root, "bisect", good, "main", "--json").stdout)

    assert out["first_bad"] == broken
    assert out["mode"] == "correctness"
    assert _repo_state(root) == before  # checkout, index, worktrees and bisect state untouched
    judged = {s["commit"]: s for s in out["steps"]}
    assert judged[broken]["verdict"] == "bad" and "INCORRECT" in judged[broken]["why"]
    # GOOD is a trunk merge: its kernel tree is the kept experiment's, so the note answers for it.
    assert "result note" in out["steps"][0]["source"]
    assert out["reused"] >= 1
    # Only commits with a kernel tree no note covers were benchmarked; each got a bisect note for next time.
    assert 1 <= out["benchmarked"] <= 3
    noted = git(root, "notes", "--ref", "autogk/bisect", "list").split()
    assert len(noted) // 2 == out["benchmarked"]
    again = json.loads(autogk_in(root, "bisect", good, "main", "--json").stdout)
    assert again["first_bad"] == broken and again["benchmarked"] == 0


def _timed_note(target, commit, number, lat):
    """A result note as a timed backend writes it (per-workload latency_us), for testing the search."""
    wl = {u: {"status": "PASSED", "latency_us": v} for u, v in lat.items()}
    res = {"schema": 1, "target": target, "experiment": number, "commit": commit, "parent": None,
           "timing": True, "backend": "synthetic", "correct": True, "stages": {"stride": {"workloads": {"candidate": wl}}},
           "verdict": {"decision": "keep", "reason": "synthetic", "figures": ""}}
    return f"autogk {target} #{number:04d}: KEEP - synthetic\n\n" + json.dumps(res)


def test_bisect_finds_a_slowdown_from_latencies_in_notes(project):
    """Synthetic timing: notes written by this test carry latencies; the search logic is what is tested."""
    root = project
    kernel = root / "kernels/scale/kernel.py"
    a, b = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
    commits = []
    for i in range(9):
        sha = _commit(root, f"step {i}", "kernels/scale/kernel.py", kernel.read_text() + f"# v{i}\n")
        commits.append(sha)
        lat = {a: 10.0 * (1.10 if i >= 6 else 1.0) * (1 + 0.002 * (i % 3)),   # A regresses 10% at 6
               b: 20.0 * (1.30 if i >= 3 else 1.0)}                          # B regresses 30% at 3
        # written as the loop writes its notes (autogk's own writer): a note added with git itself is no
        # fact to bisect (test_bisect_takes_no_fact_from_a_note_this_clone_did_not_write)
        repo.write_note(root, "refs/notes/autogk/results", sha, _timed_note("scale", sha, i + 1, lat))
    git(root, "commit", "-q", "--allow-empty", "-m", "outside the kernel")  # same kernel tree as step 8
    before = _repo_state(root)

    out = json.loads(autogk_in(root, "bisect", commits[0], "main", "--workload", a[:34] + "0a",
                            "--threshold", "5", "--json").stdout)
    assert out["mode"] == "timing" and out["first_bad"] == commits[6]
    assert out["benchmarked"] == 0

    out = json.loads(autogk_in(root, "bisect", commits[0], "main", "-w", b, "--threshold", "5", "--json").stdout)
    assert out["first_bad"] == commits[3]

    # Geomean of both workloads: sqrt(1.3) = 1.140 from step 3, sqrt(1.1 * 1.3) = 1.196 from step 6.
    out = json.loads(autogk_in(root, "bisect", commits[0], "main", "--threshold", "15", "--json").stdout)
    assert out["first_bad"] == commits[6]
    out = json.loads(autogk_in(root, "bisect", commits[0], "main", "--threshold", "10", "--json").stdout)
    assert out["first_bad"] == commits[3]
    assert _repo_state(root) == before


def test_bisect_takes_no_fact_from_a_note_this_clone_did_not_write(iterated):
    """A collaborator's commit of the same kernel tree as this clone's broken trunk, with a bisect note
    saying it is correct, arrived through a hub: matched by tree, it answered for the broken trunk and
    bisect found nothing. A note not written here is no fact: the broken kernel is benchmarked."""
    root = iterated
    kernel = root / "kernels/scale/kernel.py"
    good = git(root, "rev-parse", "main").strip()
    broken = _commit(root, "simplify masking", "kernels/scale/kernel.py",
                     kernel.read_text().replace("MASK = True", "MASK = False"))
    git(root, "commit", "-q", "--allow-empty", "-m", "a collaborator's commit of the same tree")
    theirs = git(root, "rev-parse", "HEAD").strip()
    mark = {"schema": 1, "target": "scale", "commit": theirs, "correct": True, "backend": "interpret",
            "verdict": {"decision": "keep", "reason": "", "figures": ""}}
    git(root, "notes", "--ref", "autogk/bisect", "add", "-f", "-m",
        "autogk bisect scale: good\n\n" + json.dumps(mark), theirs)
    out = json.loads(autogk_in(root, "bisect", good, "main", "--json").stdout)
    assert out["first_bad"] == broken, out
