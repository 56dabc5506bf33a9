"""`autogk ui`: the MLflow UI on the project's store, bound to 127.0.0.1 (unless --host), one worker, no job runner.

MLflow's own variables can move the bind address behind the command's back (`MLFLOW_GUNICORN_OPTS="--bind
0.0.0.0:5000"` makes gunicorn listen on every interface); they are not passed on, and the addresses
the server really listens on are read back from the kernel and printed."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import click

from autogk_git import env
from autogk_git.errors import AutogkError
from autogk_git.project import Project

HOST = "127.0.0.1"
BIND_VARS = env.MLFLOW_BIND  # through which MLflow (or the server under it) takes a bind address of its own


def free_port(preferred: int, host: str = HOST) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for port in (preferred, 0):
        with socket.socket(family) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise AutogkError(f"no free TCP port on {host}", "pass --port N with a free port")


def listening(port: int) -> list[str]:
    """host:port of each listening TCP socket on port (Linux: /proc/net/tcp*); [] where unknown."""
    found = []
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            lines = open(f"/proc/net/{name}").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, state = f[1], f[3]
            addr, p = local.split(":")
            if state != "0A" or int(p, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr)
            if v6:
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                host = socket.inet_ntop(socket.AF_INET6, raw)
                found.append(f"[{host}]:{port}")
            else:
                found.append(f"{socket.inet_ntop(socket.AF_INET, raw[::-1])}:{port}")
    return sorted(set(found))


def wait_up(base: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AutogkError(f"the MLflow server exited with code {proc.returncode} before it was up",
                              "run it by hand to see why: python -m mlflow server --workers 1 "
                              "(or check `autogk doctor`)")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AutogkError(f"the MLflow server did not answer on {base} within {timeout_s:.0f} s",
                      "try again with a longer --timeout, or check that the store is readable")


def _post(base: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"{base}/api/2.0/mlflow/{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def experiment_url(base: str, target: str | None) -> str:
    """The runs page of the target's experiment (the first autogk one when no target is given), opened
    on autogk's view: commit, verdict and figures as columns (stores made before it get it here)."""
    from autogk_git.tracking.mlflow_store import VIEW_KEY, VIEW_TAG, view_state
    try:
        exps = sorted(_post(base, "experiments/search", {"max_results": 1000, "filter": "name LIKE 'autogk/%'"})
                      .get("experiments", []), key=lambda e: e["name"])
        for e in exps:
            _post(base, "experiments/set-experiment-tag",
                  {"experiment_id": e["experiment_id"], "key": VIEW_TAG, "value": view_state()})
        chosen = [e for e in exps if e["name"] == f"autogk/{target}"] if target else exps
        if chosen:
            return f"{base}/#/experiments/{chosen[0]['experiment_id']}/runs?viewStateShareKey={VIEW_KEY}"
    except (OSError, KeyError, ValueError):
        pass
    return base + "/"


@click.command("ui", help="Open the MLflow UI on the project's runs (127.0.0.1; prints the URL).")
@click.option("--port", type=int, default=5000, show_default=True, help="port; another free one if taken")
@click.option("--host", default=HOST, show_default=True,
              help="address to listen on; 0.0.0.0 lets anyone who reaches this machine read and change the runs")
@click.option("--target", "-t", help="open this target's runs (default: the first target)")
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
              help="seconds to wait for the server to come up")
def ui(port, host, target, timeout_s) -> int:
    from autogk_git.tracking import mlflow_store  # no mlflow import: the server is a child process

    def stop(signum, frame):  # a SIGTERM (a service manager, a test) stops the server like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    project = Project.find()
    port = free_port(port, host)
    cmd, server_env = mlflow_store.server_command(project, host, port)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base = f"http://{'[' + shown + ']' if ':' in shown else shown}:{port}"
    dropped = env.mlflow_bind_set()
    if dropped:
        click.echo(f"ignoring {', '.join(dropped)}: autogk chooses the address itself (--host)", err=True)
    child_env = {k: v for k, v in os.environ.items() if k not in BIND_VARS}
    click.echo(f"starting the MLflow UI on {project.tracking_uri()} ...", err=True)
    log = project.state_dir / "logs" / "mlflow-ui.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, env={**child_env, **server_env}, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_up(base, proc, timeout_s)
        click.echo(experiment_url(base, target), nl=True)
        where = listening(port) or [f"{host}:{port}"]
        click.echo(f"MLflow UI up (pid {proc.pid}, log {log}), listening on {', '.join(where)}; Ctrl-C stops it",
                   err=True)
        if any(not (w.startswith("127.") or w.startswith("[::1]")) for w in where):
            click.echo("warning: the UI is reachable from other machines; anyone who reaches it can read and "
                       "change the runs (run `autogk ui` without --host to keep it local)", err=True)
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
