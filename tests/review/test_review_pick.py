"""autogk pick: a kept and an archived experiment onto another branch, benchmarked there; a conflict."""
from __future__ import annotations

import json

import pytest

from conftest import autogk_in, git, notes_json
from review_support import copy_project, iterated_template


@pytest.fixture
def iterated(template_project, tmp_path_factory, tmp_path):
    return copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")


def _start(root):
    """The commit before any experiment: the first parent of the trunk's first merge."""
    first_merge = git(root, "log", "--first-parent", "--merges", "--reverse", "--format=%H", "main").split()[0]
    return git(root, "rev-parse", f"{first_merge}^1").strip()


def test_pick_kept_and_archived_onto_another_branch(iterated):
    root = iterated
    rows = {r["number"]: r for r in json.loads(autogk_in(root, "log", "--json").stdout)}
    kept = next(n for n, r in rows.items() if r["state"] == "kept")
    archived = next(n for n, r in rows.items() if r["state"] == "archived")
    git(root, "branch", "gpu2", _start(root))
    head_before = git(root, "rev-parse", "HEAD")

    out = json.loads(autogk_in(root, "pick", str(kept), "--onto", "gpu2", "--json").stdout)
    tip = git(root, "rev-parse", "gpu2").strip()
    assert out["commit"] == tip and git(root, "rev-parse", "gpu2^").strip() == out["previous_tip"]
    assert f"cherry picked from commit {rows[kept]['commit']}" in git(root, "log", "-1", "--format=%B", tip)
    assert git(root, "diff", f"{rows[kept]['commit']}^", rows[kept]["commit"]) == git(root, "diff", "gpu2^", "gpu2")
    note = notes_json(root, tip)
    assert note["kind"] == "pick" and note["picked_from"]["commit"] == rows[kept]["commit"]
    assert note["correct"] is True and out["result"]["correct"] is True

    out = json.loads(autogk_in(root, "pick", str(archived), "--onto", "gpu2", "--json").stdout)
    assert out["result"]["correct"] is False  # the archived one was reverted for a reason, and still is
    assert notes_json(root, out["commit"])["verdict"]["decision"] == "revert"
    # The user's checkout never moved; no worktree was left behind.
    assert git(root, "rev-parse", "HEAD") == head_before
    assert len(git(root, "worktree", "list").splitlines()) == 1


def test_pick_conflict_is_reported_with_the_commands_that_resolve_it(iterated):
    root = iterated
    rows = {r["number"]: r for r in json.loads(autogk_in(root, "log", "--json").stdout)}
    kept = next(n for n, r in rows.items() if r["state"] == "kept")
    git(root, "checkout", "-q", "-b", "other", _start(root))
    k = root / "kernels/scale/kernel.py"
    k.write_text(k.read_text().replace("BLOCK = 64", "BLOCK = 256"))
    git(root, "commit", "-qam", "hand-tuned block")
    tip = git(root, "rev-parse", "other")

    proc = autogk_in(root, "pick", str(kept), "--onto", "other", check=False)
    assert proc.returncode == 1
    assert "conflicts in: kernels/scale/kernel.py" in proc.stderr
    assert f"git cherry-pick -x {rows[kept]['commit']}" in proc.stderr
    assert "git cherry-pick --continue" in proc.stderr
    assert git(root, "rev-parse", "other") == tip
    assert git(root, "status", "--porcelain") == ""   # the pick ran in this checkout and was aborted cleanly
