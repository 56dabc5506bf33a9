"""Replaying a one-line hand commit puts the Autogk-* trailers in a paragraph of their own."""
from __future__ import annotations

import os

from conftest import git

from autogk_git.git import repo
from autogk_git.loop.replay import replay_onto
from autogk_git.project import Project

KERNEL = "kernels/scale/kernel.py"


def test_replayed_one_line_commit_keeps_its_subject(project, monkeypatch):
    monkeypatch.setenv("AUTOGK_LOOP", "1")  # no hook benchmark for these hand commits
    git(project, "checkout", "-qb", "autogk/scale/0001-by-hand")
    k = project / KERNEL
    k.write_text(k.read_text().replace("BLOCK = 64 ", "BLOCK = 128 "))
    git(project, "commit", "-qam", "BLOCK 128")
    sha = git(project, "rev-parse", "HEAD").strip()
    git(project, "checkout", "-q", "main")
    (project / "other.txt").write_text("the trunk moves\n")
    git(project, "add", "other.txt")
    git(project, "commit", "-qm", "unrelated")
    tip = git(project, "rev-parse", "HEAD").strip()
    new, why = replay_onto(Project(project), "scale", 1, "autogk/scale/0001-by-hand", sha, tip)
    assert new, why
    assert git(project, "log", "-1", "--format=%s", new).strip() == "BLOCK 128"
    tr = repo.trailers(git(project, "log", "-1", "--format=%B", new))
    assert tr["Autogk-Parent"] == tip and tr["Autogk-Rebased-From"] == sha
