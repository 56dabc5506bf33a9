"""The command agent is confined: whatever it does outside its editable files is undone, reported, and
makes the experiment invalid; the repository ends exactly as it was."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import DATA, autogk, git, notes_json


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


FAKE = DATA / "fake_cli" / "fake_cli.py"
KERNEL = "kernels/scale/kernel.py"
OWN = ("refs/autogk/", "refs/notes/autogk/", "refs/heads/autogk/")  # autogk's own records


def env_for(actions) -> dict[str, str]:
    # No OS sandbox: these test the undo after the run, the only line where bwrap cannot run (the
    # sandbox itself: tests/agents/test_agent_sandbox.py).
    return {"AUTOGK_AGENT_COMMAND": f"{sys.executable} {FAKE}", "FAKE_CLI_ACTIONS": json.dumps(actions),
            "AUTOGK_TRACKING_ENABLED": "false", "AUTOGK_AGENT_SANDBOX": "none"}


def tree_state(d: Path) -> dict[str, tuple]:
    """Every path under d with its kind, mode and bytes (or link target)."""
    out = {}
    for p in sorted(d.rglob("*")) if d.exists() else []:
        st = p.lstat()
        data = os.readlink(p) if p.is_symlink() else None if p.is_dir() else p.read_bytes()
        out[str(p.relative_to(d))] = (st.st_mode, data)
    return out


def repo_state(root: Path, outside: Path) -> dict:
    refs = [line for line in git(root, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
            if not line.startswith(OWN)]
    return {"status": git(root, "status", "--porcelain", "--untracked-files=all"),
            "head": git(root, "symbolic-ref", "HEAD"), "refs": refs,
            "config": (root / ".git" / "config").read_bytes(), "hooks": tree_state(root / ".git" / "hooks"),
            "info": tree_state(root / ".git" / "info"), "autogk.toml": (root / ".autogk.toml").read_bytes(),
            "readme": (root / "README.md").read_bytes(), "user_file": (root / "mine.txt").read_bytes(),
            "index": git(root, "ls-files", "-s"), "outside": tree_state(outside)}


def watched_project(project: Path, tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "existing.txt").write_text("the user's file\n")
    cfg = project / ".autogk.toml"
    cfg.write_text(cfg.read_text().replace("[agent]\n", f'[agent]\nwatch = ["{outside}"]\n', 1))
    (project / "README.md").write_text("# a project\n")
    git(project, "add", "README.md")
    git(project, "commit", "-qam", "watch a folder outside the repository")
    # A person's uncommitted work in the main checkout must survive byte for byte.
    (project / "README.md").write_text((project / "README.md").read_text() + "my unsaved edit\n")
    (project / "mine.txt").write_text("untracked, mine\n")
    return outside


def test_a_hostile_agent_leaves_the_repository_exactly_as_before(project, tmp_path):
    outside = watched_project(project, tmp_path)
    main, raw = str(project), "env -u GIT_DIR -u GIT_WORK_TREE git"
    actions = [
        ["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "],
        ["sh", "git commit -qam 'agent commit in its sandbox' && git branch sandbox-branch"],
        ["sh", f"{raw} commit -qam 'agent commit past the sandbox'"],           # moves the experiment branch
        ["sh", f"{raw} -C {main} branch evil main && {raw} -C {main} tag evil-tag"],
        ["sh", f"{raw} -C {main} config core.hooksPath /tmp/evil-hooks"],
        ["write", f"{main}/.git/hooks/pre-push", "#!/bin/sh\necho pwned > /tmp/pwned\n"],
        ["sh", f"chmod +x {main}/.git/hooks/pre-push"],
        ["write", f"{main}/.git/info/exclude", "*\n"],
        ["replace", f"{main}/.autogk.toml", "[agent]", "[agent]\nbogus_key = 1"],
        ["replace", f"{main}/README.md", "my unsaved edit", "agent's edit"],
        ["write", f"{main}/kernels/scale/inputs.py", "def planted(): pass\n"],
        ["sh", f"rm {main}/mine.txt"],
        ["write", f"{outside}/evil.txt", "left behind\n"],
        ["replace", f"{outside}/existing.txt", "user", "agent"],
        ["sh", f"{raw} -C {main} add README.md"],
        ["hypothesis", "BLOCK 64 -> 128, and a few things it should not do"],
    ]
    before = repo_state(project, outside)
    out = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json", env=env_for(actions))
    after = repo_state(project, outside)
    for key in before:
        assert after[key] == before[key], key
    assert not (project / ".git" / "hooks" / "pre-push").exists()

    [exp] = json.loads(out.stdout)["experiments"]
    assert exp["decision"] == "invalid", exp
    result = notes_json(project, exp["commit"])
    assert result["verdict"]["rule"] == "confinement" and result["timing"] is None
    plan = git(project, "notes", "--ref", "autogk/plans", "show", exp["commit"])
    for what in (".git/hooks", ".autogk.toml", ".git/config", "refs/heads/evil", "refs/tags/evil-tag",
                 "evil.txt", "existing.txt", "inputs.py", "mine.txt", "README.md", "index",
                 "own commit", "refs/heads/autogk/scale/0001-wip"):
        assert what in plan, what
    # Not kept: the trunk is where it was, the experiment is archived with its (editable) change only.
    assert git(project, "rev-parse", "main").strip() == git(project, "rev-parse", "HEAD").strip()
    assert "Autogk-Experiment: 1" not in git(project, "log", "-3", "--format=%B", "main")
    assert git(project, "diff", "--name-only", f"{exp['commit']}^", exp["commit"]).split() == [KERNEL]
    assert "Autogk-Invalid:" in git(project, "log", "-1", "--format=%B", exp["commit"])
    # The agent's versions are kept for the person to inspect.
    kept = project / ".git" / "autogk" / "confined" / "0001"
    assert any(p.name == "pre-push" for p in kept.rglob("*"))
    assert "outside its files" in out.stderr
    # It reads as invalid wherever experiments are listed.
    assert "#0001 VOID" in autogk(project, "log").stdout
    assert json.loads(autogk(project, "log", "--verdict", "invalid", "--json").stdout)[0]["number"] == 1
    assert "INVALID" in autogk(project, "show", "1").stdout.upper()


def test_a_symlinked_kernel_is_refused_and_the_experiment_invalid(project):
    kernel = (project / KERNEL).read_bytes()
    actions = [["sh", f"rm {KERNEL} && ln -s /etc/hostname {KERNEL}"], ["hypothesis", "a link"]]
    out = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json",
                 env={**env_for(actions), "AUTOGK_TRACKING_ENABLED": "true"})  # an invalid result in MLflow too
    assert "MLflow logging failed" not in out.stderr + out.stdout
    [exp] = json.loads(out.stdout)["experiments"]
    assert exp["decision"] == "invalid"
    assert git(project, "ls-tree", exp["commit"], KERNEL).startswith("100644 blob")
    assert (project / KERNEL).read_bytes() == kernel and not (project / KERNEL).is_symlink()
    assert "symbolic link" in git(project, "notes", "--ref", "autogk/plans", "show", exp["commit"])


def test_a_commit_in_the_sandbox_is_thrown_away_and_the_loop_commits(project):
    actions = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "],
               ["sh", "git commit -qam 'my own commit' && git config user.name Mallory"],
               ["hypothesis", "BLOCK 64 -> 128"]]
    out = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json", env=env_for(actions))
    [exp] = json.loads(out.stdout)["experiments"]
    assert exp["decision"] == "keep", exp
    log = git(project, "log", "--format=%s", "main")
    assert "my own commit" not in log and "BLOCK 64 -> 128" in log
    assert "Mallory" not in git(project, "config", "--list")
    assert "own commit" in git(project, "notes", "--ref", "autogk/plans", "show", exp["commit"])


def test_a_failing_agent_is_undone_too(project, monkeypatch):
    """A CLI that escapes and then fails (or deletes its worktree's .git file) leaves nothing behind."""
    from autogk_git.agents.base import Context
    from autogk_git.agents.command import CommandAgent
    from autogk_git.errors import AgentError
    from autogk_git.loop import experiment as ex
    from autogk_git.project import Project

    p = Project(project)
    wt, branch = ex.open_worktree(p, "scale", 1, "main")
    before = (project / ".git" / "config").read_bytes(), git(project, "for-each-ref")
    actions = [["sh", "env -u GIT_DIR -u GIT_WORK_TREE git config user.name Mallory"],
               ["sh", "env -u GIT_DIR -u GIT_WORK_TREE git tag planted"],
               ["sh", "rm .git"], ["exit", 3]]
    for k, v in env_for(actions).items():
        monkeypatch.setenv(k, v)
    ctx = Context(worktree=wt, target=p.target("scale").at(wt), number=1, history=[], config=Project(project).config)
    with pytest.raises(AgentError, match="exited with code 3") as e:
        CommandAgent(ctx.config).propose(ctx)
    assert "reached outside its files" in e.value.message and "refs/tags/planted" in e.value.message
    assert ((project / ".git" / "config").read_bytes(), git(project, "for-each-ref")) == before
    assert (wt / ".git").is_file() and git(wt, "status", "--porcelain") == ""


def test_git_in_the_sandbox_sees_the_experiment_as_the_agent_expects(project, tmp_path):
    """A CLI that inspects its change with git (as coding CLIs do) sees its worktree against the base."""
    seen = tmp_path / "seen.txt"
    actions = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "],
               ["sh", f"(git rev-parse --abbrev-ref HEAD; git status --porcelain; git diff --stat) > {seen}"],
               ["hypothesis", "BLOCK 128"]]
    out = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json", env=env_for(actions))
    assert json.loads(out.stdout)["experiments"][0]["decision"] == "keep"
    lines = seen.read_text().splitlines()
    assert lines[0] == "autogk/scale/0001-wip" and lines[1] == f" M {KERNEL}" and "1 file changed" in lines[-1]
