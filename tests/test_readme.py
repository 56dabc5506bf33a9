"""The README as a new user follows it: command 1 on a fresh clone of this repository, then every row
of the "What to look at afterwards" table, word for word (`.venv/bin/autogk` is this interpreter's
`autogk`; setup.sh itself is left out: the interpreter running the tests is already set up)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BIN, REPO, git

README = REPO / "README.md"


def command_one() -> str:
    """README command 1, after its setup step."""
    m = re.search(r"^bash scripts/setup\.sh && (\.venv/bin/autogk iterate[^\n]*)$", README.read_text(), re.M)
    assert m, "README command 1 is no longer `bash scripts/setup.sh && .venv/bin/autogk iterate ...`"
    return m.group(1)


def table_rows() -> list[tuple[str, str]]:
    """(what, command) for each row of the review table: the command is the first `code` in the run column."""
    text = README.read_text()
    section = text.split("## What to look at afterwards", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 2 or cells[0] in ("to see", "---"):
            continue
        m = re.match(r"`([^`]+)`", cells[1])
        assert m, f"README table row without a command: {line}"
        rows.append((cells[0], m.group(1)))
    return rows


def as_run_here(cmd: str) -> str:
    return cmd.replace(".venv/bin/autogk", str(BIN / "autogk"))


ENV: dict[str, str] = {}  # set by the fixture: a module-scoped fixture runs before conftest's hermetic one


def hermetic_env(home) -> dict[str, str]:
    """What conftest's `hermetic` gives each test, for the one clone this module's tests share."""
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / ".gitconfig"
    cfg.write_text("[user]\n\tname = Test Person\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUTOGK_", "ANTHROPIC_", "MODAL_", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX"))}
    return {**env, "HOME": str(home), "GIT_CONFIG_GLOBAL": str(cfg), "GIT_CONFIG_NOSYSTEM": "1",
            "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def sh(root, cmd: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", as_run_here(cmd)], cwd=root, capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def ui_url(root, cmd: str) -> str:
    """`autogk ui` serves until stopped: read the URL it prints, then stop it as Ctrl-C would."""
    proc = subprocess.Popen(["bash", "-c", "exec " + as_run_here(cmd)], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        line = proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return line.strip()


@pytest.fixture(scope="module")
def after_command_one(tmp_path_factory):
    """A fresh clone of this repository on `main`, after README command 1 (one clone for every row)."""
    base = tmp_path_factory.mktemp("readme")
    ENV.clear()
    ENV.update(hermetic_env(base / "home"))
    root = base / "autogk"
    subprocess.run(["git", "clone", "-q", str(REPO), str(root)], check=True, env=ENV)
    git(root, "checkout", "-q", "-B", "main")  # the README's branch name, whatever this checkout's is
    t0 = time.monotonic()
    proc = sh(root, command_one(), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "done: 3 experiment(s)" in proc.stdout
    assert "INFO mlflow" not in proc.stdout + proc.stderr  # MLflow's own lines only with -v
    print(f"README command 1: {time.monotonic() - t0:.0f} s")
    return root


@pytest.mark.slow(41)
def test_every_row_of_the_review_table_works_as_written(after_command_one):
    root = after_command_one
    rows = table_rows()
    assert len(rows) >= 12
    seen = {}
    for what, cmd in rows:
        if re.search(r"autogk ui\b", cmd):
            url = ui_url(root, cmd)
            assert url.startswith("http://127.0.0.1:"), f"{cmd}: printed {url!r}"
            seen[cmd] = url
            continue
        proc = sh(root, cmd)
        assert proc.returncode == 0, f"README row '{what}': `{cmd}` exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        seen[cmd] = proc.stdout
    out = {c.split("autogk ")[-1].split()[0] if "autogk " in c else c: v for c, v in seen.items()}
    assert "#0001" in out["log"] and "#0003" in out["log"]
    assert "#0001" in out["show"] or "0001" in out["show"]
    assert "problem:" not in out["doctor"] and "warning: hooks are not installed" in out["doctor"]
    assert "judged" in out["bisect"] and "0 from notes, 0 benchmarked" not in out["bisect"]
    assert "picked" in out["pick"]
    assert "mlruns/packs/" in out["pack"]
    # Nothing the table runs leaves the repository dirty (reports and packs go to the ignored mlruns/).
    assert git(root, "status", "--porcelain") == ""
