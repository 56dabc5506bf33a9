"""The MLflow store: probing a server, opening a client, building the project's SQLite store whole, the
experiments runs are filed under, what a store's failure means, and the `mlflow server` command line.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from autogk_git.procs import no_gc, pid_alive


# A server store is probed before MLflow is asked anything: MLflow retries a refused connection with
# backoff for minutes per call (7 retries, 120 s timeouts by default), so a dead server made `iterate`,
# `sync` and `doctor` silent for over 3 minutes. Its own retries are bounded too, for a server that
# answers the probe and then stalls. A user's own MLFLOW_HTTP_REQUEST_* settings win.
PROBE_TIMEOUT_S = 3.0
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
_unreachable: dict[str, str] = {}  # uri -> why, for this process: one probe per store, not one per experiment


def store_unreachable(uri: str, why: str):
    from autogk_git.errors import AutogkError
    return AutogkError(f"the MLflow store {uri} does not answer ({why}, probed for {PROBE_TIMEOUT_S:g} s); nothing "
                       "was logged to it, and the result notes are intact",
                       "start that MLflow server, or point AUTOGK_TRACKING_URI / [tracking] uri at one that runs "
                       "(empty: the project's own SQLite store); then `autogk sync` logs what is missing")


def probe(uri: str) -> None:
    """An http(s) store answers within PROBE_TIMEOUT_S, or an AutogkError saying so (remembered per process)."""
    if not uri.startswith(("http://", "https://")):
        return
    if uri in _unreachable:
        raise store_unreachable(uri, _unreachable[uri])
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        return  # it answered: a server without /health, or behind a proxy that says no; MLflow will tell
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        _unreachable[uri] = str(getattr(reason, "strerror", None) or reason)[:120] or type(e).__name__
        raise store_unreachable(uri, _unreachable[uri]) from None


class _NoTraceback:
    """A logging filter that keeps a library's message line and drops its traceback: autogk says what
    failed and the fix itself (describe_error); `-v` shows MLflow's own lines in full."""

    def filter(self, record) -> bool:
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _quiet_tracebacks() -> None:
    import logging
    from autogk_git import env
    if env.mlflow_logging_level() in ("DEBUG", "INFO"):
        return
    handlers = [*logging.getLogger("mlflow").handlers, *logging.getLogger().handlers]
    if logging.lastResort is not None:  # where SQLAlchemy's and alembic's records end without a handler
        handlers.append(logging.lastResort)
    for h in handlers:
        if not any(isinstance(f, _NoTraceback) for f in h.filters):
            h.addFilter(_NoTraceback())


def open_client(project):
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    uri = project.tracking_uri()
    probe(uri)
    for k, v in HTTP_LIMITS.items():
        os.environ.setdefault(k, v)
    with no_gc():  # MLflow's imports and its SQLite store's (the first call's): ~0.3 CPU-s less
        import mlflow  # noqa: F401  (heavy: imported only here, only when logging)
        from mlflow.tracking import MlflowClient
        if uri.startswith("sqlite:///"):
            import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 - what the client's store imports

    _quiet_tracebacks()
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        db.parent.mkdir(parents=True, exist_ok=True)
        if not db.exists():
            _build_sqlite_store(db, project.artifact_root())
    return MlflowClient(tracking_uri=uri)


BUILDING = ".building"


def _build_sqlite_store(db: Path, artifacts: Path) -> None:
    """Build a new SQLite store aside, then link it into place: whole or absent, never half built.

    MLflow makes its tables with a chain of migrations that takes seconds; a process killed in between
    (a loop's first result, a first `autogk sync`) left a store that every later command refused
    ("table ... already exists", "out-of-date database schema") until a person moved it away.
    `os.link` fails when the name exists, so of two processes building one at once the first's stays.
    The migrations run once per MLflow version for a user: later stores are a copy of that empty one.
    """
    tmp = _aside(db)
    try:
        if not _copy_empty_store(tmp, artifacts):
            _migrate(tmp, artifacts)
        try:
            os.link(tmp, db)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)


def _aside(path: Path) -> Path:
    """Where this process builds `path` before moving it into place (.NAME.PID.building, empty), after
    removing what killed builders left beside it."""
    for old in path.parent.glob(f".{path.name}.*{BUILDING}*"):
        pid = old.name[len(path.name) + 2:].split(".", 1)[0]
        if not (pid.isdigit() and pid_alive(int(pid))):
            old.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{BUILDING}")
    tmp.unlink(missing_ok=True)
    return tmp


def _migrate(path: Path, artifacts: Path | str) -> None:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    SqlAlchemyStore(f"sqlite:///{path}", str(artifacts)).engine.dispose()  # closes it: no journal left


# The empty store MLflow's migrations made, kept once per MLflow and SQLAlchemy version under the user's
# cache (~/.cache/autogk/mlflow-stores/), with this stand-in as its default experiment's artifact root;
# a copy gets the project's own root: 0.6-1.4 s of migrations a new store became a 3 ms copy of ~1 MB
# (benchmarks/store_build.py).
EMPTY_ROOT = "/autogk-empty-store-artifacts"


def empty_store_dir() -> Path:
    from autogk_git import env
    return env.user_cache() / "mlflow-stores"


def _empty_store_path() -> Path:
    import mlflow
    import sqlalchemy
    return empty_store_dir() / f"mlflow-{mlflow.__version__}-sqlalchemy-{sqlalchemy.__version__}.db"


def _copy_empty_store(dest: Path, artifacts: Path) -> bool:
    """Write a copy of the user's empty store at `dest`, its default experiment's artifact root set to
    `artifacts`; the empty store is built first when there is none. False when this could not be done
    (a cache that cannot be written, a damaged copy): the caller then runs the migrations itself."""
    import sqlite3
    import shutil
    import time
    try:
        empty = _empty_store_path()
        if not empty.exists():
            empty.parent.mkdir(parents=True, exist_ok=True)
            part = _aside(empty)
            try:
                _migrate(part, EMPTY_ROOT)
                os.replace(part, empty)  # whole or absent, as the store itself
            finally:
                part.unlink(missing_ok=True)
        shutil.copyfile(empty, dest)
        con = sqlite3.connect(dest)
        try:
            with con:
                row = con.execute("SELECT artifact_location FROM experiments WHERE experiment_id = 0").fetchone()
                if row is None or not str(row[0]).startswith(EMPTY_ROOT) \
                        or con.execute("SELECT count(*) FROM alembic_version").fetchone()[0] != 1:
                    raise sqlite3.DatabaseError("not an empty store made by autogk")
                now = int(time.time() * 1000)
                con.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
                            "WHERE experiment_id = 0", (str(artifacts) + str(row[0])[len(EMPTY_ROOT):], now, now))
        finally:
            con.close()
        return True
    except (OSError, sqlite3.Error):
        dest.unlink(missing_ok=True)
        try:
            empty = _empty_store_path()
            if empty.exists():  # damaged: the next store builds it again
                empty.unlink()
        except OSError:
            pass
        return False


# The runs view a person opens (`autogk ui`): MLflow's shared view state, stored as an experiment tag
# and selected by `?viewStateShareKey=autogk` in the URL, shows commit, verdict and figures as columns.
VIEW_KEY = "autogk"
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
VIEW_COLUMNS = ["tags.`autogk.verdict`", "tags.`autogk.commit_short`", "tags.`autogk.figures`",
                "metrics.`geomean_latency_us`", "metrics.`ratio_vs_parent`", "metrics.`workloads_passed`",
                "metrics.`workloads_checked`"]


def view_state() -> str:
    return json.dumps({"selectedColumns": VIEW_COLUMNS, "orderByKey": "attributes.start_time", "orderByAsc": False})


def experiment_name(target: str) -> str:
    return f"autogk/{target}"


def experiment_id(client, project, target: str) -> str:
    name = experiment_name(target)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    art = project.artifact_root() / target
    art.mkdir(parents=True, exist_ok=True)
    return client.create_experiment(name, artifact_location=art.as_uri(),
                                    tags={"autogk.target": target, "autogk.trunk": project.trunk,
                                          VIEW_TAG: view_state()})


def target_experiment(project, target: str) -> tuple[Any, str]:
    """(client, experiment id) of `autogk/<target>`, made on first use (what a trace is written into)."""
    client = open_client(project)
    return client, experiment_id(client, project, target)

# Results that are not experiments (`kind`: a pick onto another branch, a bisect's commit on the trunk)
# have runs of their own in `autogk/<target>/<kind>s`, so the target's table keeps one row per experiment
# (a pick's run there read as a second "0001 KEEP"). The run a pick copied is tagged with where it went.
SIDE_KINDS = ("pick", "bisect")


def experiment_for(client, project, result: dict[str, Any]) -> str:
    kind = result.get("kind")
    if kind:
        return side_experiment(client, project, result["target"], f"{kind}s")
    return experiment_id(client, project, result["target"])


def side_experiment(client, project, target: str, kind: str) -> str:
    """The id of `autogk/<target>/<kind>` (reports, loops): records that are not experiments live beside
    the target's experiment, so its runs table lists experiments only. Created on first use."""
    name = experiment_name(target) + "/" + kind
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    art = project.artifact_root() / target / kind
    art.mkdir(parents=True, exist_ok=True)
    return client.create_experiment(name, artifact_location=art.as_uri(), tags={"autogk.target": target})


def check(project) -> None:
    """Open the store and read from it: raises whatever a locked, damaged or unreachable store raises."""
    open_client(project).search_experiments(max_results=1)


def describe_error(project, e: BaseException):
    """A failure of the MLflow store as an AutogkError that names the store and the fix."""
    from autogk_git.errors import AutogkError
    if isinstance(e, AutogkError):  # already says which store and the fix (an unreachable server)
        return e
    uri = project.tracking_uri()
    text = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
    low = str(e).lower()
    if isinstance(e, ModuleNotFoundError):
        return AutogkError("MLflow is not installed, so nothing can be logged",
                           "pip install mlflow, or turn tracking off: [tracking] enabled = false")
    if "locked" in low:
        hint = ("another process is writing to it (a loop, `autogk ui`, a second sync): wait for it and run "
                "`autogk sync` again")
    elif "not a database" in low or "malformed" in low or "corrupt" in low or "no such table" in low \
            or "can't locate revision" in low or "out-of-date database schema" in low \
            or ("table" in low and "already exists" in low):
        # "table ... already exists", "out-of-date": a store left half built by a process killed while
        # creating it (or made by another MLflow version). The notes rebuild it either way.
        store = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else uri
        hint = (f"the store is damaged; the notes are the source of truth, so rebuild it: "
                f"mv {store} {store}.bad && autogk sync --full")
    else:
        hint = ("check [tracking] uri in .autogk.toml (or AUTOGK_TRACKING_URI); leave it empty for the "
                "project's own SQLite store, or set [tracking] enabled = false")
    return AutogkError(f"the MLflow store {uri} could not be used ({text}); the result notes are intact", hint)


def server_command(project, host: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The `mlflow server` command line and environment for the project's store, with light settings.

    It runs mlflow in a child process, so this module (and the CLI) never imports it for the UI.
    """
    import sys
    uri = project.tracking_uri()
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    art = project.artifact_root()
    art.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri,
           "--default-artifact-root", art.as_uri(), "--host", host, "--port", str(port), "--workers", "1"]
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    return cmd, env
