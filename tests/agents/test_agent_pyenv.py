"""Without an OS sandbox, a command agent that writes the Python environment the judge imports stops the
loop (agents/pyenv.py): torch patched in site-packages, a sitecustomize.py, planted bytecode."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autogk_git.agents import pyenv
from conftest import DATA

FAKE = DATA / "fake_cli" / "fake_cli.py"


@pytest.fixture
def project(small_project):
    return small_project


def propose(project, monkeypatch, actions):
    from autogk_git.agents.base import Context
    from autogk_git.agents.command import CommandAgent
    from autogk_git.loop import experiment as ex
    from autogk_git.project import Project

    for k, v in {"AUTOGK_AGENT_COMMAND": f"{sys.executable} {FAKE}", "FAKE_CLI_ACTIONS": json.dumps(actions),
                 "AUTOGK_TRACKING_ENABLED": "false", "AUTOGK_AGENT_SANDBOX": "none",
                 "AUTOGK_AGENT_WATCH_PYTHON": "true"}.items():
        monkeypatch.setenv(k, v)
    p = Project(project)
    wt, _ = ex.open_worktree(p, "scale", 1, "main")
    ctx = Context(worktree=wt, target=p.target("scale").at(wt), number=1, history=[], config=Project(project).config)
    return CommandAgent(ctx.config).propose(ctx)


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """A stand-in for site-packages (the real one is never written by a test), with torch's timer in it."""
    site = tmp_path / "site-packages"
    (site / "torch" / "cuda").mkdir(parents=True)
    (site / "torch" / "cuda" / "__init__.py").write_text("def elapsed_time(a, b):\n    return b - a\n")
    monkeypatch.setattr(pyenv, "judge_roots", lambda: [site])
    return site


@pytest.mark.parametrize("how", ["patch", "sitecustomize", "mtime kept"])
def test_an_agent_that_writes_the_judges_python_environment_stops_the_loop(project, monkeypatch, fake_env, how):
    # Without bwrap the undo after the run covered the repository and the watched paths only: an agent
    # could rewrite torch's timer (or add a sitecustomize.py that every interpreter, the judge's too,
    # runs first) and every later figure was what the patch said. "mtime kept": the write then puts the
    # file's modification time back, as `touch -r` does; its change time still moves.
    from autogk_git.errors import AgentError
    timer = fake_env / "torch" / "cuda" / "__init__.py"
    acts = {"patch": [["sh", f"echo 'elapsed_time = lambda a, b: (b - a) * 0.5' >> {timer}"]],
            "sitecustomize": [["sh", f"echo 'import os' > {fake_env / 'sitecustomize.py'}"]],
            "mtime kept": [["sh", f"cp -p {timer} /tmp/autogk-pyenv-$$ && echo '#' >> {timer} && "
                                  f"touch -r /tmp/autogk-pyenv-$$ {timer} && rm /tmp/autogk-pyenv-$$"]]}[how]
    before = pyenv.fingerprint([fake_env])
    with pytest.raises(AgentError, match="reached outside its files") as e:
        propose(project, monkeypatch, [*acts, ["sh", "echo '# a change' >> kernels/scale/kernel.py"]])
    assert "the Python environment the judge runs in" in e.value.message, e.value.message
    changed = pyenv.changes(before, pyenv.fingerprint([fake_env]))
    assert changed and all(c.split(": ")[0] in e.value.message for c in changed[:5]), (changed, e.value.message)


def test_an_agent_that_leaves_it_alone_is_not_stopped_and_the_real_roots_are_read(project, monkeypatch):
    # The real roots (standard library, this interpreter's site-packages): read, not written, by a
    # well-behaved run. A stop here would be a false one.
    roots = pyenv.judge_roots()
    assert any((r / "torch").is_dir() for r in roots), roots
    proposal = propose(project, monkeypatch, [["sh", "echo '# a change' >> kernels/scale/kernel.py"]])
    assert proposal is not None


def test_the_walk_sees_a_root_made_after_it_began(tmp_path):
    user_site = tmp_path / "user-site"
    before = pyenv.fingerprint([user_site])
    user_site.mkdir()
    (user_site / "usercustomize.py").write_text("import os\n")
    assert pyenv.changes(before, pyenv.fingerprint([user_site])) == [
        f"{user_site}: made", f"{user_site / 'usercustomize.py'}: made"]
    assert os.path.isdir(user_site)


def test_an_agent_that_plants_a_binary_in_the_judges_triton_cache_stops_the_loop(project, monkeypatch, tmp_path):
    # The timer's L2 flush is a Triton kernel of the judge's, compiled once into the judge's own Triton
    # cache and loaded from there by every later job's kernel processes (bench/judge/hygiene.py). The
    # kernel's sandbox keeps it out of reach, but without bwrap an agent runs as the same user: a flush
    # binary there that flushes nothing would give every later window a warm L2. The walk covered the
    # interpreter's folders and the judge's bytecode, not this cache: the write went unseen.
    from types import SimpleNamespace

    from autogk_git.errors import AgentError
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    judge_cache = tmp_path / "triton" / "autogk-judge"  # where kernel processes load the flush from
    flush = judge_cache / "3f2a" / "_autogk_l2_flush.cubin"
    flush.parent.mkdir(parents=True)
    flush.write_bytes(b"\x7fELF")
    # The interpreter's own folders are walked by the test above; here only autogk's caches are.
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(pyenv, "sysconfig", SimpleNamespace(get_paths=lambda: {"stdlib": str(empty)}))
    monkeypatch.setattr(pyenv, "site", SimpleNamespace(getsitepackages=lambda: [str(empty)],
                                                       getusersitepackages=lambda: str(empty)))
    with pytest.raises(AgentError, match="reached outside its files") as e:
        propose(project, monkeypatch, [["sh", f"printf 'planted' >> {flush}"],
                                       ["sh", "echo '# a change' >> kernels/scale/kernel.py"]])
    assert f"{flush}: changed" in e.value.message, e.value.message
    assert str(judge_cache) in e.value.message.split("remove the judge's")[-1]


def test_a_process_the_agent_leaves_running_is_ended_with_its_run(project, monkeypatch, fake_env, tmp_path):
    # Without bwrap (whose PID namespace ends everything with the run) a process the agent detached
    # (`setsid ... &`) outlived the run, the undo and the comparison of the judge's environment: here it
    # waits out both, then patches torch's timer, and every later figure is the patch's. The reaper
    # (agents/reaper.py) kills whatever the agent left running before the undo and the comparison.
    import re
    import time
    pidfile = tmp_path / "daemon.pid"
    timer = fake_env / "torch" / "cuda" / "__init__.py"
    before = timer.read_text()
    daemon = (f"setsid sh -c 'echo $$ > {pidfile}; sleep 4; echo \"elapsed_time = lambda a, b: 0\" >> {timer}' "
              "</dev/null >/dev/null 2>&1 &")
    proposal = propose(project, monkeypatch, [["sh", daemon], ["sh", f"while [ ! -s {pidfile} ]; do sleep 0.05; done"],
                                              ["sh", "echo '# a change' >> kernels/scale/kernel.py"]])
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:  # a zombie an instant, at most
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), f"the process the agent left ({pid}) still runs"
    assert re.search(r"the agent left [1-9]\d* process\(es\) running after it ended; killed", proposal.rationale), \
        proposal.rationale
    assert timer.read_text() == before


def test_the_reaper_ends_a_tree_that_forks_while_it_is_killed(tmp_path):
    # A process that forks again and again (each child detaching) is stopped before it is killed, pass
    # after pass, so none is left when end_tree returns; the program's exit code is kept.
    import subprocess
    import time

    from autogk_git.agents import reaper
    report = tmp_path / "report.json"
    mark = f"# reaper-test-{os.getpid()}-{tmp_path.name}"
    spawner = (f"{mark}\nimport os, time\n"
               "for _ in range(3):\n"
               "    if os.fork() == 0:\n"
               "        os.setsid()\n"
               "        while True:\n"
               "            if os.fork() == 0:\n"
               "                time.sleep(60)\n"
               "            time.sleep(0.01)\n"
               "time.sleep(0.3)\n"
               "os._exit(3)\n")
    done = reaper.run([sys.executable, "-c", spawner], str(report), 60, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
    assert done.returncode == 3, done.stderr
    killed = reaper.read_report(report)["killed"]
    assert killed >= 3, killed
    time.sleep(0.2)
    assert not [p for p in os.listdir("/proc") if p.isdigit() and mark in _cmdline(int(p))]


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        return ""


def test_ctrl_c_on_the_reaper_ends_what_the_agent_detached(tmp_path):
    # Ctrl-C signals the terminal's group: the reaper and the program, not a child the program detached
    # (setsid). The reaper ends the tree before it exits, as at the end of a run.
    import signal
    import subprocess
    import time

    from autogk_git.agents import reaper
    pidfile = tmp_path / "child.pid"
    script = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 120' </dev/null >/dev/null 2>&1 & sleep 120"
    p = subprocess.Popen(reaper.command(str(tmp_path / "report.json"), ["sh", "-c", script]), start_new_session=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    os.killpg(p.pid, signal.SIGINT)
    assert p.wait(timeout=30) == 128 + signal.SIGINT
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), "the detached child outlived Ctrl-C"


def test_autogks_own_package_is_compared_too():
    # A red-team finding (2026-12-06): installed editable (a checkout of autogk), the package lies outside
    # site-packages, so an agent without a sandbox could patch the loop or the judge of later experiments.
    import autogk_git
    from autogk_git.agents import pyenv
    package = Path(autogk_git.__file__).parent.resolve()
    assert any(r == package or r in package.parents for r in pyenv.judge_roots())


def test_the_subreaper_imports_nothing_from_the_agents_folder(tmp_path):
    # It runs in the agent's worktree, outside the sandbox, and -c put that folder first on sys.path:
    # a json.py there (committed in a project, or left by an agent) ran in place of the standard library's.
    from autogk_git.agents import reaper
    mark = tmp_path / "planted-json-ran"
    (tmp_path / "json.py").write_text(f"open({str(mark)!r}, 'w').write('ran')\nfrom _json import *\n")
    done = reaper.run([sys.executable, "-c", "print('ok')"], str(tmp_path / "report.json"), 60, cwd=str(tmp_path),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
    assert not mark.exists()
