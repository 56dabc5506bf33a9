"""A command agent's run with nothing of it left running afterwards.

The agent's program runs as a child of this small process, which is a subreaper (PR_SET_CHILD_SUBREAPER):
whatever the program leaves behind, however it detaches (`setsid`, a double fork, `nohup ... &`), is
re-parented here instead of to init, so once the program has exited every process still under this one
is the agent's, and is killed. Without it a process the agent left running outlived the snapshot and
the undo after its run (agents/confine.py) and the comparison of the judge's Python environment
(agents/pyenv.py): it could write the judge's torch once both were done, or load the GPU while the
parent is timed. Inside bwrap its PID namespace already ends everything with the run; this process
wraps both ways the same. What it cannot reach: work handed to a service that runs outside this tree
(`systemd-run --user`, `at`, a login over ssh), which only an OS sandbox stops.

    python -c "<loader>" REPORT_FILE -- ARGV...

REPORT_FILE gets {"killed": N}, the processes still running after the program ended, or {"not_found":
...} when the program could not be started; the program's exit code is this process's.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from autogk_git.bench.judge import hygiene
from autogk_git.procs import NO_CWD

ROUNDS = 50  # stop-then-kill passes: a process that forks while it is being killed is caught on the next


def end_tree(pid: int) -> int:
    """Stop, then kill, every descendant of `pid` until none is left; returns how many there were."""
    seen: set[int] = set()
    for _ in range(ROUNDS):
        left = hygiene.descendants(pid)
        if not left:
            break
        seen.update(left)
        hygiene.kill_pids(left, signal.SIGSTOP)  # stopped first: none forks again between the two passes
        hygiene.kill_pids(left, signal.SIGKILL)
        hygiene.reap_children()
        time.sleep(0.01)
    return len(seen)


def command(report: str, argv: list[str]) -> list[str]:
    """The command line that runs `argv` under this module, from this interpreter and this package."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # It runs in the agent's worktree, outside the sandbox: the "" that -c puts first on sys.path (that
    # folder) goes, so nothing the agent leaves there (a json.py) is imported in its place.
    loader = (f"import sys; {NO_CWD}; sys.path.insert(0, {root!r}); from autogk_git.agents.reaper import main; "
              "sys.exit(main(sys.argv[1:]))")
    return [sys.executable, "-c", loader, report, "--", *argv]


def main(args: list[str]) -> int:
    report, argv = args[0], args[2:]
    hygiene.die_with_parent(signal.SIGTERM)  # autogk killed: the handler below ends the agent's tree
    hygiene.become_subreaper()

    def term(signum, frame) -> None:  # noqa: ARG001 - autogk's timeout, autogk gone, or Ctrl-C
        _report(report, {"killed": end_tree(os.getpid())})
        os._exit(128 + signum)

    # Ctrl-C reaches the terminal's group (this process and the program); a detached child is not in it,
    # and a KeyboardInterrupt here would leave it to init.
    signal.signal(signal.SIGTERM, term)
    signal.signal(signal.SIGINT, term)
    try:
        proc = subprocess.Popen(argv)
    except OSError as e:
        _report(report, {"not_found": str(e)})
        return 127
    rc = proc.wait()
    _report(report, {"killed": end_tree(os.getpid())})
    return rc if rc >= 0 else 128 - rc


def _report(path: str, what: dict) -> None:
    try:
        with open(path, "w") as f:
            json.dump(what, f)
    except OSError:
        pass


def read_report(path) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def run(argv: list[str], report: str, timeout: float | None, **popen) -> subprocess.CompletedProcess:
    """subprocess.run(argv, timeout=...) under the reaper: past the timeout the reaper is told to end the
    agent's whole tree (SIGTERM), then killed; TimeoutExpired is raised as subprocess.run raises it."""
    cmd = command(report, argv)
    p = subprocess.Popen(cmd, **popen)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
        raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err)
