"""`autogk ui`: the MLflow UI on the project's store, bound to 127.0.0.1, one worker, no job runner."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import click

from autogk_git.errors import AutogkError
from autogk_git.project import Project

HOST = "127.0.0.1"


def free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise AutogkError("no free TCP port on 127.0.0.1", "pass --port N with a free port")


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
@click.option("--target", "-t", help="open this target's runs (default: the first target)")
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
              help="seconds to wait for the server to come up")
def ui(port, target, timeout_s) -> int:
    from autogk_git.tracking import mlflow_store  # no mlflow import: the server is a child process

    def stop(signum, frame):  # a SIGTERM (a service manager, a test) stops the server like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    project = Project.find()
    port = free_port(port)
    cmd, env = mlflow_store.server_command(project, HOST, port)
    base = f"http://{HOST}:{port}"
    click.echo(f"starting the MLflow UI on {project.tracking_uri()} ...", err=True)
    log = project.state_dir / "logs" / "mlflow-ui.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_up(base, proc, timeout_s)
        click.echo(experiment_url(base, target), nl=True)
        click.echo(f"MLflow UI up (pid {proc.pid}, log {log}); Ctrl-C stops it", err=True)
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
