"""The command agent runs in an OS sandbox (bubblewrap): what it tries outside its worktree fails inside
the agent, before anything needs undoing, and the experiment is judged as any other. Where there is no
sandbox, the note says why and the undo of agents/confine.py is the only line (tests/agents/test_confine*.py).
Claude Code and Codex get their own permission flags. The agent's own commit never leaves a background
benchmark that dies with a traceback."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, autogk, autogk_in, git, notes_json


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


FAKE = DATA / "fake_cli" / "fake_cli.py"
KERNEL = "kernels/scale/kernel.py"
RAW = "env -u GIT_DIR -u GIT_WORK_TREE git"  # the agent stepping out of its throwaway clone
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key-4f1c"


def bwrap_works() -> str:
    """'' where bwrap can make namespaces on this machine (asked of bwrap itself), else why not."""
    try:
        proc = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                               "--", "true"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return "bwrap is not installed (apt-get install bubblewrap)"
    return "" if proc.returncode == 0 else proc.stderr.strip()[:200]


needs_bwrap = pytest.mark.skipif(bool(bwrap_works()), reason=f"no bwrap sandbox here: {bwrap_works()}")


def env_for(actions, **extra) -> dict[str, str]:
    return {"AUTOGK_AGENT_COMMAND": f"{sys.executable} {FAKE}", "FAKE_CLI_ACTIONS": json.dumps(actions),
            "AUTOGK_TRACKING_ENABLED": "false", **extra}


def attempt(name: str, command: str) -> list:
    """A shell action that prints whether it got through: the agent's stdout lands in the plan note."""
    return ["sh", f"if ( {command} ) >/dev/null 2>&1; then echo ESCAPED:{name}; else echo BLOCKED:{name}; fi"]


def plan_of(project: Path, sha: str) -> str:
    return git(project, "notes", "--ref", "autogk/plans", "show", sha)


def outside_state(project: Path, remote: Path, home: Path) -> dict:
    return {"refs": git(project, "for-each-ref", "--format=%(refname) %(objectname)"),
            "remote": git(remote, "for-each-ref"), "gitconfig": (home / ".gitconfig").read_bytes(),
            "config": (project / ".git" / "config").read_bytes(),
            "status": git(project, "status", "--porcelain", "--untracked-files=all"),
            "hooks": sorted(p.name for p in (project / ".git" / "hooks").iterdir())}


@needs_bwrap
def test_a_hostile_agent_is_stopped_inside_the_sandbox_and_the_experiment_is_judged(project, tmp_path):
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(SECRET + "\n")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(project, "remote", "add", "origin", str(remote))
    git(project, "push", "-q", "origin", "main")
    outside = tmp_path / "outside.txt"
    head = git(project, "rev-parse", "HEAD").strip()
    before = outside_state(project, remote, home)
    actions = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "],
               attempt("outside", f"echo x > {outside}"),
               attempt("main-checkout", f"echo x >> {project}/README.md"),
               attempt("refs", f"echo {head} > {project}/.git/refs/heads/evil"),
               attempt("update-ref", f"{RAW} -C {project} update-ref refs/heads/evil2 HEAD"),
               attempt("hooks", f"echo 'exit 1' > {project}/.git/hooks/pre-push"),
               attempt("config", f"{RAW} -C {project} config core.hooksPath /tmp/evil"),
               attempt("gitconfig", "git config --global user.name Mallory"),
               attempt("ssh", "cat ~/.ssh/id_rsa"),
               ["sh", "cat ~/.ssh/id_rsa 2>/dev/null || true"],
               attempt("push-main", f"{RAW} -C {project} push -q origin HEAD:refs/heads/pushed"),
               attempt("push-clone", f"git push -q {remote} HEAD:refs/heads/pushed2"),
               attempt("worktree", f"echo ok > {KERNEL}.probe && rm {KERNEL}.probe"),
               ["hypothesis", "BLOCK 128"]]
    out = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json", env=env_for(actions))
    [exp] = json.loads(out.stdout)["experiments"]
    plan = plan_of(project, exp["commit"])
    escaped = [line for line in plan.splitlines() if line.startswith("ESCAPED:")]
    assert escaped == ["ESCAPED:worktree"], plan  # the worktree is writable, nothing else
    assert "sandbox: bwrap (network on)" in plan
    assert SECRET not in plan and SECRET not in out.stdout + out.stderr
    # Nothing needed undoing: the experiment is judged (merged here: untimed = "merge"), never invalid.
    assert exp["decision"] == "keep", exp
    result = notes_json(project, exp["commit"])
    assert result["correct"] is True and result["verdict"]["rule"] != "confinement"
    assert "outside its files" not in out.stderr
    assert not outside.exists()
    after = outside_state(project, remote, home)
    after["refs"] = "\n".join(r for r in after["refs"].splitlines() if "refs/heads/main " not in r
                              and "/autogk/" not in r)
    before["refs"] = "\n".join(r for r in before["refs"].splitlines() if "refs/heads/main " not in r
                               and "/autogk/" not in r)
    assert after == before


def _listener() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    return s, s.getsockname()[1]


@needs_bwrap
def test_network_false_gives_the_agent_no_network(project):
    server, port = _listener()
    connect = f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\""
    first = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "], attempt("net", connect), ["hypothesis", "x"]]
    second = [["replace", KERNEL, "BLOCK = 128 ", "BLOCK = 256 "], *first[1:]]  # the first one merged
    try:
        on = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json", env=env_for(first))
        off = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json",
                     env=env_for(second, AUTOGK_AGENT_NETWORK="false"))
    finally:
        server.close()
    [first] = json.loads(on.stdout)["experiments"]
    [second] = json.loads(off.stdout)["experiments"]
    assert "ESCAPED:net" in plan_of(project, first["commit"])  # the default: the host's network
    plan = plan_of(project, second["commit"])
    assert "BLOCKED:net" in plan and "sandbox: bwrap (network off)" in plan


def test_without_bwrap_one_warning_and_the_note_says_why(project, monkeypatch):
    from autogk_git.agents import bwrap
    monkeypatch.setattr(bwrap.shutil, "which", lambda name, *a, **k: None if name == "bwrap" else "/x")
    bwrap.probe.cache_clear()
    try:
        actions = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "], ["hypothesis", "BLOCK 128"]]
        out = autogk_in(project, "iterate", "-n", "2", "--agent", "command", "--json", env=env_for(actions))
        doctor = autogk_in(project, "doctor", check=False, env={"AUTOGK_AGENT_KIND": "command",
                                                                  "AUTOGK_AGENT_COMMAND": "git"})
    finally:
        bwrap.probe.cache_clear()
    exps = json.loads(out.stdout)["experiments"]
    assert exps and all(e["decision"] != "invalid" for e in exps)
    assert out.stderr.count("(sandbox: none: bwrap is not installed") == 2, out.stderr  # two agent runs
    assert out.stderr.count("runs without an OS sandbox") == 1, out.stderr
    assert "bwrap is not installed (apt-get install bubblewrap)" in out.stderr
    assert "sandbox: none: bwrap is not installed" in plan_of(project, exps[0]["commit"])
    assert "command agent sandbox: none: bwrap is not installed" in doctor.stdout, doctor.stdout


@needs_bwrap
def test_doctor_names_the_sandbox(project):
    out = autogk_in(project, "doctor", check=False, env={"AUTOGK_AGENT_KIND": "command", "AUTOGK_AGENT_COMMAND": "git"})
    assert "command agent sandbox: bwrap" in out.stdout, out.stdout
    out = autogk_in(project, "doctor", check=False, env={"AUTOGK_AGENT_KIND": "command", "AUTOGK_AGENT_COMMAND": "git",
                                                          "AUTOGK_AGENT_SANDBOX": "none"})
    assert 'command agent sandbox: none: [agent] sandbox = "none"' in out.stdout, out.stdout


def test_sandbox_none_keeps_the_undo_as_the_only_line(project):
    actions = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "],
               attempt("hooks", f"echo 'exit 1' > {project}/.git/hooks/pre-push"), ["hypothesis", "BLOCK 128"]]
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "command", "--json",
                    env=env_for(actions, AUTOGK_AGENT_SANDBOX="none"))
    [exp] = json.loads(out.stdout)["experiments"]
    assert exp["decision"] == "invalid", exp
    plan = plan_of(project, exp["commit"])
    assert "ESCAPED:hooks" in plan and 'sandbox: none: [agent] sandbox = "none"' in plan
    assert ".git/hooks/pre-push: created; removed" in plan
    assert "runs without an OS sandbox" not in out.stderr  # asked for: no warning
    assert not (project / ".git" / "hooks" / "pre-push").exists()


FAKE_CLI = """#!{python}
import json, os, re, sys
from pathlib import Path
args = sys.argv[1:-1]  # the prompt is the last argument
print("ARGV " + json.dumps(args))
if "--settings" in args:
    print("SETTINGS " + json.dumps(json.loads(Path(args[args.index("--settings") + 1]).read_text())))
k = Path("kernels/scale/kernel.py")
k.write_text(re.sub(r"BLOCK = [0-9]+ ", "BLOCK = " + os.environ.get("FAKE_BLOCK", "128") + " ", k.read_text()))
Path(os.environ["AUTOGK_HYPOTHESIS_FILE"]).write_text("BLOCK 128\\n")
"""


def fake_cli(folder: Path, name: str) -> Path:
    folder.mkdir(exist_ok=True)
    exe = folder / name
    exe.write_text(FAKE_CLI.format(python=sys.executable))
    exe.chmod(0o755)
    return folder


def recorded(project: Path, out) -> tuple[list[str], dict | None]:
    [exp] = json.loads(out.stdout)["experiments"]
    plan = plan_of(project, exp["commit"])
    argv = json.loads(next(line for line in plan.splitlines() if line.startswith("ARGV "))[5:])
    settings = [json.loads(line[9:]) for line in plan.splitlines() if line.startswith("SETTINGS ")]
    return argv, (settings[0] if settings else None)


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_claude_code_gets_its_permission_settings(project, tmp_path, sandbox):
    if sandbox == "bwrap" and bwrap_works():
        pytest.skip(f"no bwrap sandbox here: {bwrap_works()}")
    path = f"{fake_cli(tmp_path / 'bin', 'claude')}{os.pathsep}{os.environ['PATH']}"
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "command", "--json",
                    env={"AUTOGK_AGENT_COMMAND": "claude -p --model x", "PATH": path,
                         "AUTOGK_AGENT_SANDBOX": sandbox, "AUTOGK_TRACKING_ENABLED": "false"})
    argv, settings = recorded(project, out)
    assert argv[:2] == ["--permission-mode", "acceptEdits"] and argv[-3:] == ["-p", "--model", "x"], argv
    assert "--settings" in argv
    deny = settings["permissions"]["deny"]
    assert {"Bash(git:*)", "Bash(pip:*)", "WebFetch", "WebSearch"} <= set(deny)
    [exp] = json.loads(out.stdout)["experiments"]
    assert exp["decision"] == "keep", exp
    assert "Claude Code permissions: added --permission-mode acceptEdits --settings" in plan_of(project, exp["commit"])


def test_claude_codes_own_permission_mode_is_kept(project, tmp_path):
    path = f"{fake_cli(tmp_path / 'bin', 'claude')}{os.pathsep}{os.environ['PATH']}"
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "command", "--json",
                    env={"AUTOGK_AGENT_COMMAND": "claude -p --permission-mode plan", "PATH": path,
                         "AUTOGK_TRACKING_ENABLED": "false"})
    argv, _ = recorded(project, out)
    assert argv.count("--permission-mode") == 1 and "plan" in argv and "--settings" in argv, argv


def test_codex_exec_gets_its_workspace_sandbox(project, tmp_path):
    path = f"{fake_cli(tmp_path / 'bin', 'codex')}{os.pathsep}{os.environ['PATH']}"
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "command", "--json",
                    env={"AUTOGK_AGENT_COMMAND": "codex exec --model y", "PATH": path,
                         "AUTOGK_TRACKING_ENABLED": "false"})
    argv, settings = recorded(project, out)
    assert argv == ["exec", "--sandbox", "workspace-write", "--skip-git-repo-check", "--model", "y"], argv
    assert settings is None
    # Another program is left as given.
    path = f"{fake_cli(tmp_path / 'bin2', 'mycli')}{os.pathsep}{os.environ['PATH']}"
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "command", "--json",
                    env={"AUTOGK_AGENT_COMMAND": "mycli exec --model y", "PATH": path, "FAKE_BLOCK": "256",
                         "AUTOGK_TRACKING_ENABLED": "false"})
    assert recorded(project, out)[0] == ["exec", "--model", "y"]


def test_the_agents_own_commit_leaves_no_background_benchmark_to_die(project):
    """Without the sandbox the agent can commit in its worktree's real git directory (--no-verify skips
    only pre-commit): post-commit must not start a background benchmark of a commit the loop undoes."""
    actions = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "],
               ["sh", f"{RAW} commit --no-verify -qam 'my own commit' 2>&1"],  # hooks print to stderr
               ["hypothesis", "BLOCK 128"]]
    out = autogk(project, "iterate", "-n", "1", "--agent", "command", "--json",
                 env=env_for(actions, AUTOGK_AGENT_SANDBOX="none", AUTOGK_BENCH_HOOK_MODE="background"))
    [exp] = json.loads(out.stdout)["experiments"]
    assert exp["decision"] == "invalid", exp  # its commit moved the experiment's branch: as today
    state = project / ".git" / "autogk"
    deadline = time.time() + 300
    while time.time() < deadline and list(state.glob("bench/*.pid")):  # a background benchmark still running
        time.sleep(0.5)
    logs = list((state / "logs").glob("*.log")) if (state / "logs").exists() else []
    text = "".join(p.read_text() for p in logs)
    assert "Traceback" not in text, text
    assert not logs, text  # no background benchmark started
    assert "is the command agent's own commit: not benchmarked" in plan_of(project, exp["commit"])


def test_a_background_benchmark_whose_checkout_is_removed_ends_in_one_line(project, tmp_path):
    """A benchmark post-commit started, whose worktree the loop removed: one line in its log, no traceback."""
    wt = tmp_path / "wt"
    git(project, "worktree", "add", "-q", "-b", "autogk/scale/0001-mine", str(wt), "main")
    k = wt / KERNEL
    k.write_text(re.sub(r"BLOCK = [0-9]+ ", "BLOCK = " + os.environ.get("FAKE_BLOCK", "128") + " ", k.read_text()))
    subprocess.run(["git", "commit", "-qam", "BLOCK 128"], cwd=wt, check=True,
                   env={**os.environ, "AUTOGK_LOOP": "1"})  # the hooks leave it alone: benchmarked below
    sha = git(wt, "rev-parse", "HEAD").strip()
    git(project, "worktree", "remove", "--force", str(wt))
    proc = subprocess.run([sys.executable, "-m", "autogk_git.hook", "bench", sha, "autogk/scale/0001-mine", str(wt)],
                          cwd=project, capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    assert len(text.strip().splitlines()) == 1 and f"background benchmark of {sha[:10]}" in text, text
    assert "its checkout" in text and "was removed" in text
    assert git(project, "notes", "--ref", "autogk/results", "list").strip() == ""  # nothing judged elsewhere
