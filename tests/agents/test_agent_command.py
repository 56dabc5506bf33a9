"""The command agent with a small script standing in for `claude -p` / `codex exec`."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, DATA, autogk_in, git

from autogk_git.agents.base import Context
from autogk_git.agents.command import CommandAgent
from autogk_git.errors import AgentError, ConfigError
from autogk_git.project import Project


@pytest.fixture
def project(small_project):
    """Two workloads, both in the quick stage (conftest.small_project): these tests are not about workloads."""
    return small_project


FAKE = DATA / "fake_cli" / "fake_cli.py"
KERNEL = "kernels/scale/kernel.py"


def env_for(actions, **extra) -> dict[str, str]:
    return {"AUTOGK_AGENT_COMMAND": f"{sys.executable} {FAKE}", "FAKE_CLI_ACTIONS": json.dumps(actions),
            "AUTOGK_TRACKING_ENABLED": "false", **extra}


def test_commits_editable_changes_and_discards_the_rest(project, tmp_path):
    prompt_copy = tmp_path / "prompt.txt"
    actions = [["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 128 "],
               ["replace", "README.md", "", "scribbled\n"] if (project / "README.md").exists()
               else ["write", "README.md", "scribbled\n"],
               ["write", "kernels/scale/definition.json", "{}"],
               ["write", "notes/new.txt", "untracked outside\n"],
               ["hypothesis", "BLOCK 64 -> 128 for fewer programs"]]
    readme_before = (project / "README.md").read_text() if (project / "README.md").exists() else None
    out = autogk_in(project, "iterate", "-n", "1", "--agent", "command", "--json",
                 # The copy is written outside the worktree, which the OS sandbox would refuse.
                 env=env_for(actions, FAKE_CLI_PROMPT_COPY=str(prompt_copy), AUTOGK_AGENT_SANDBOX="none"))
    report = json.loads(out.stdout)
    [exp] = report["experiments"]
    assert exp["hypothesis"] == "BLOCK 64 -> 128 for fewer programs" and exp["decision"] == "keep"
    # Only the kernel is in the commit; the trunk's other files are as they were.
    assert git(project, "diff", "--name-only", f"{exp['commit']}^", exp["commit"]).split() == [KERNEL]
    assert "Autogk-Agent: command" in git(project, "log", "-1", "--format=%B", exp["commit"])
    plan = git(project, "notes", "--ref", "autogk/plans", "show", exp["commit"])
    assert "discarded changes outside the editable files" in plan and "definition.json" in plan
    assert "discarded changes outside" in out.stderr
    assert git(project, "show", "main:kernels/scale/definition.json").strip() != "{}"
    assert (project / "README.md").exists() == (readme_before is not None)
    assert not (project / "notes").exists()
    # The generated prompt carries the rules, the editable files and where to write the hypothesis.
    prompt = prompt_copy.read_text()
    assert "ONE change per experiment" in prompt and f"{KERNEL}" in prompt and "hypothesis.txt" in prompt


def context(root) -> Context:
    p = Project(root)
    return Context(worktree=root, target=p.target("scale"), number=1, history=[], config=p.config)


def test_a_failing_cli_is_an_error_and_leaves_the_checkout_clean(project, monkeypatch):
    for k, v in env_for([["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 32 "], ["exit", 2]]).items():
        monkeypatch.setenv(k, v)
    ctx = context(project)
    with pytest.raises(AgentError, match="exited with code 2: failing as asked"):
        CommandAgent(ctx.config).propose(ctx)
    assert git(project, "status", "--porcelain").strip() == ""


def test_no_editable_change_means_nothing_to_try(project, monkeypatch):
    for k, v in env_for([["write", "elsewhere.txt", "x"], ["say", "I found nothing to improve."]]).items():
        monkeypatch.setenv(k, v)
    ctx = context(project)
    prop = CommandAgent(ctx.config).propose(ctx)
    assert not prop.changed and "I found nothing to improve." in prop.rationale
    assert not (project / "elsewhere.txt").exists()


def test_the_hypothesis_falls_back_to_the_last_line_of_output(project, monkeypatch):
    for k, v in env_for([["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 32 "], ["say", "Halved BLOCK."]]).items():
        monkeypatch.setenv(k, v)
    ctx = context(project)
    prop = CommandAgent(ctx.config).propose(ctx)
    assert prop.changed and prop.hypothesis == "Halved BLOCK." and prop.usage["command_s"] >= 0


def test_the_hypothesis_file_gives_one_printable_line(project, monkeypatch):
    # Read as the agent left it: a NUL stopped `git commit`, escape sequences reached the terminal.
    for k, v in env_for([["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 32 "],
                         ["hypothesis", "Halved\x00 BLOCK\x1b]0;title\x07"]]).items():
        monkeypatch.setenv(k, v)
    ctx = context(project)
    prop = CommandAgent(ctx.config).propose(ctx)
    assert prop.changed and prop.hypothesis == "Halved BLOCK]0;title", prop.hypothesis


def test_placeholders_place_the_prompt(project, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_COMMAND", "tool --in {prompt_file} --flag")
    agent = CommandAgent(Project(project).config)
    assert agent.argv("P", Path("/tmp/p.md")) == ["tool", "--in", "/tmp/p.md", "--flag"]
    monkeypatch.setenv("AUTOGK_AGENT_COMMAND", "claude -p")
    assert CommandAgent(Project(project).config).argv("do it", Path("x")) == ["claude", "-p", "do it"]


def test_without_a_command_the_error_says_what_to_set(project):
    with pytest.raises(ConfigError) as e:
        CommandAgent(Project(project).config)
    assert "[agent] command" in e.value.hint


def test_ctrl_c_leaves_a_resumable_state(project, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, **env_for([["replace", KERNEL, "BLOCK = 64 ", "BLOCK = 32 "], ["sleep", "60"]]),
           "TMPDIR": str(tmp)}
    proc = subprocess.Popen([str(BIN / "autogk"), "iterate", "-n", "1", "--agent", "command"], cwd=project,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + 60
    marker = None
    while time.time() < deadline and marker is None:
        found = list(tmp.glob("autogk-command-*/sleeping"))
        marker = found[0] if found else None
        time.sleep(0.2)
    assert marker is not None, "the stand-in CLI never started"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not list(tmp.glob("autogk-command-*"))  # the prompt folder is cleaned up
    # The next run starts cleanly and completes an experiment.
    out = autogk_in(project, "iterate", "-n", "1", "--json", env={"AUTOGK_TRACKING_ENABLED": "false"})
    report = json.loads(out.stdout)
    assert [e["number"] for e in report["experiments"]] == [1]
    assert git(project, "branch", "--list", "autogk/*").strip() == ""


def test_a_program_that_is_not_there_says_so(project, monkeypatch):
    monkeypatch.setenv("AUTOGK_AGENT_COMMAND", "no-such-agent-cli -p")
    monkeypatch.setenv("AUTOGK_AGENT_SANDBOX", "none")
    ctx = context(project)
    with pytest.raises(AgentError, match="'no-such-agent-cli' was not found"):
        CommandAgent(ctx.config).propose(ctx)
    assert git(project, "status", "--porcelain").strip() == ""


def test_past_its_time_limit_the_agent_and_all_it_started_are_ended(project, monkeypatch, tmp_path):
    # subprocess.run's timeout killed the CLI's own process only: a child it had detached (setsid) ran on
    # past the limit, the undo and the next experiment (agents/reaper.py ends the whole tree).
    pidfile = tmp_path / "child.pid"
    for k, v in env_for([["sh", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 120' </dev/null >/dev/null 2>&1 &"],
                         ["sh", f"while [ ! -s {pidfile} ]; do sleep 0.05; done"], ["sleep", "120"]],
                        AUTOGK_AGENT_SANDBOX="none", AUTOGK_AGENT_COMMAND_TIMEOUT_S="6").items():
        monkeypatch.setenv(k, v)
    ctx = context(project)
    with pytest.raises(AgentError, match="ran past 6 s and was stopped"):
        CommandAgent(ctx.config).propose(ctx)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), f"the CLI's detached child ({pid}) outlived the time limit"
