"""Hooks: uninstall removes what install set; a tracked hooks folder gets no machine path; clear errors."""
from __future__ import annotations

from conftest import autogk, git


def test_uninstall_removes_the_notes_rewrite_settings(project):
    assert git(project, "config", "notes.rewriteRef").strip()
    autogk(project, "hooks", "uninstall")
    cfg = git(project, "config", "--list", "--local")
    assert "notes.rewrite" not in cfg.lower()


def test_a_tracked_hooks_folder_is_refused_with_the_way_out(project):
    autogk(project, "hooks", "uninstall")
    (project / ".husky").mkdir()
    (project / ".husky" / "pre-commit").write_text("#!/bin/sh\nnpm test\n")
    git(project, "add", ".husky")
    git(project, "commit", "-qm", "husky")
    git(project, "config", "core.hooksPath", ".husky")
    out = autogk(project, "hooks", "install", check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "inside the repository" in out.stderr and "python -m autogk_git.hook pre-commit" in out.stderr
    assert (project / ".husky" / "pre-commit").read_text() == "#!/bin/sh\nnpm test\n"
    assert not (project / ".husky" / "post-commit").exists()
    assert git(project, "status", "--porcelain") == ""


def test_an_ignored_hooks_folder_inside_the_checkout_is_fine(project):
    autogk(project, "hooks", "uninstall")
    with (project / ".gitignore").open("a") as f:
        f.write(".hooks/\n")
    git(project, "config", "core.hooksPath", ".hooks")
    autogk(project, "hooks", "install")
    assert "autogk-hook" in (project / ".hooks" / "pre-commit").read_text()


def test_a_chained_hook_in_the_way_is_a_clear_error(project):
    autogk(project, "hooks", "uninstall")
    hooks = project / ".git" / "hooks"
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (hooks / "pre-commit.autogk-chained").write_text("#!/bin/sh\nexit 0\n")
    out = autogk(project, "hooks", "install", check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "crashed" not in out.stderr
    assert "already exists" in out.stderr and "hint: move one of them away" in out.stderr
