"""`autogk ui` listens on 127.0.0.1 only, whatever MLflow's own variables say, and prints where it listens."""
from __future__ import annotations

import os
import signal
import socket
import subprocess

from conftest import BIN
from autogk_git.commands.ui import listening


def test_mlflow_bind_variables_do_not_open_the_ui_to_every_interface(project):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MLFLOW_GUNICORN_OPTS": f"--bind 0.0.0.0:{port}", "GUNICORN_CMD_ARGS": f"--bind 0.0.0.0:{port}"}
    proc = subprocess.Popen([str(BIN / "autogk"), "ui", "--port", str(port)], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith(f"http://127.0.0.1:{port}"), proc.stderr.read()
        assert listening(port) == [f"127.0.0.1:{port}"]
        err = ""
        while "listening on" not in err:
            err += proc.stderr.readline()
        assert "ignoring MLFLOW_GUNICORN_OPTS, GUNICORN_CMD_ARGS" in err
        assert f"listening on 127.0.0.1:{port};" in err
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
