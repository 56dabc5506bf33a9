"""Many results at once (`autogk sync`): which notes have no complete run, and logging them in bulk
(straight into MLflow's SQL tables where the store allows it)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autogk_git.git import repo
from autogk_git.record import artifacts, refs
from autogk_git.tracking.run_data import TAG_COMMIT, bench_window, metrics_of, run_params, run_tags, trace_of
from autogk_git.tracking.runs import complete_run, link_trace, log_result, tag_picked_run
from autogk_git.tracking.store import SIDE_KINDS, experiment_for, experiment_name, open_client


def unlogged(project) -> list[tuple[str, int]]:
    """(target, number) of experiments with a result note on a commit here but no active, complete run:
    a loop killed between the note and the run (or inside logging), or an MLflow outage. `autogk sync`
    logs them."""
    from autogk_git.record.notes import parse_result
    from autogk_git.record.sharing import missing_commits
    texts = repo.read_notes(project.root, refs.NOTES_RESULTS)
    gone = missing_commits(project.root, sorted(texts))
    noted: dict[str, set[int]] = {}
    for c, t in texts.items():
        r = parse_result(t, c) if c not in gone else None
        if r and "target" in r and isinstance(r.get("experiment"), int) and not r.get("kind"):
            noted.setdefault(r["target"], set()).add(r["experiment"])
    client = open_client(project)
    out = []
    for target, numbers in sorted(noted.items()):
        exp = client.get_experiment_by_name(experiment_name(target))
        logged: set[int] = set()
        if exp is not None:
            for r in client.search_runs([exp.experiment_id], max_results=5000):
                n = r.data.tags.get("autogk.number", "")
                if n.isdigit() and complete_run(r):  # not one cut short
                    logged.add(int(n))
        out += [(target, n) for n in sorted(numbers - logged)]
    return out


def logged_commits(project, target: str) -> dict[str, bool]:
    """commit -> whether its run is complete. A run still RUNNING was cut short (a loop killed inside
    `log_result`, after the run was created): it has the commit's tag but may lack figures and
    artifacts, so sync completes it in place instead of skipping it or adding a second run."""
    client = open_client(project)
    names = [experiment_name(target), *(f"{experiment_name(target)}/{k}s" for k in SIDE_KINDS)]
    ids = [e.experiment_id for e in (client.get_experiment_by_name(n) for n in names) if e is not None]
    if not ids:
        return {}
    seen: dict[str, bool] = {}
    token = None
    while True:
        page = client.search_runs(ids, max_results=1000, page_token=token)
        for r in page:
            commit = r.data.tags.get(TAG_COMMIT, "")
            seen[commit] = seen.get(commit, False) or complete_run(r)
        token = page.token
        if not token:
            return seen


SYNC_CHUNK = 500   # runs written per database transaction


def _sanitize(v: float) -> tuple[bool, float]:
    """(is_nan, value) as MLflow's SQL store keeps a metric: NaN flagged, infinities clamped."""
    import math
    if math.isnan(v):
        return True, 0.0
    if math.isinf(v):
        return False, 1.7976931348623157e308 if v > 0 else -1.7976931348623157e308
    return False, v


def _sql_store(client):
    """MLflow's SQL tracking store behind the client, or None (a tracking server, a file store)."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:  # pragma: no cover - an MLflow without the SQL store
        return None
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if isinstance(store, SqlAlchemyStore) else None


def log_results(project, results: list[dict[str, Any]], progress=None, own: set[str] | None = None) -> int:
    """Log many result notes that MLflow does not have yet, as new runs; returns how many.

    With MLflow's SQL store (the default SQLite one) and a local artifact root, runs, tags, params and
    metrics of SYNC_CHUNK results go in one transaction and the artifacts are written as files where
    the artifact store keeps them: per-run client calls (four transactions and four git processes per
    result) made a sync of 10,000 notes take most of an hour. Anything else (a tracking server, a
    remote artifact store) falls back to `log_result` per result. own: the commits whose note this clone
    wrote (repo.own_noted); the others' runs are tagged `autogk.judged_here` false (None: all its own).
    """
    if not results:
        return 0
    client = open_client(project)
    store = _sql_store(client)
    exp_ids = {}
    for r in results:
        key = (r["target"], r.get("kind"))
        if key not in exp_ids:
            exp_ids[key] = experiment_for(client, project, r)
    exps = {k: client.get_experiment(i) for k, i in exp_ids.items()}
    local = all(e.artifact_location.startswith("file:") for e in exps.values())
    if store is None or not local:
        for i, r in enumerate(results, 1):
            log_result(project, r, known_new=True, judged_here=own is None or r["commit"] in own)
            if progress:
                progress(i, len(results), r)
        return len(results)
    done = 0
    for start in range(0, len(results), SYNC_CHUNK):
        chunk = results[start:start + SYNC_CHUNK]
        linked = _insert_runs(project, store, exps, chunk, artifacts.many_run_files(project, chunk), own)
        for run_id, result in linked:  # the few with an agent's trace in this store
            link_trace(client, run_id, result)
        for result in chunk:
            if result.get("kind") == "pick":
                tag_picked_run(client, project, result)
        done += len(chunk)
        if progress:
            progress(done, len(results), chunk[-1])
    return done


def _insert_runs(project, store, exps, chunk, files, own: set[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Insert the chunk's runs; returns (run id, result) of those whose note names an agent's trace."""
    import getpass
    import time
    import uuid
    from urllib.parse import unquote, urlparse

    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlParam, SqlRun, SqlTag

    now = int(time.time() * 1000)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    runs, tags, params, metrics, traced = [], [], [], [], []
    for result in chunk:
        run_id = uuid.uuid4().hex
        start, end = bench_window(result) or (now, now)
        if trace_of(result):
            traced.append((run_id, result))
        exp = exps[(result["target"], result.get("kind"))]
        art_uri = f"{exp.artifact_location.rstrip('/')}/{run_id}/artifacts"
        verdict = result.get("verdict", {})
        its_tags = run_tags(result, own is None or result["commit"] in own)
        runs.append({"run_uuid": run_id, "name": its_tags["mlflow.runName"], "source_type": "UNKNOWN",
                     "source_name": "", "entry_point_name": "", "user_id": user,
                     "status": "FINISHED" if verdict.get("decision") else "FAILED", "start_time": start,
                     "end_time": end, "deleted_time": None, "source_version": "", "lifecycle_stage": "active",
                     "artifact_uri": art_uri, "experiment_id": int(exp.experiment_id)})
        tags += [{"key": k, "value": v, "run_uuid": run_id} for k, v in its_tags.items()]
        params += [{"key": k, "value": v, "run_uuid": run_id} for k, v in run_params(result).items()]
        for k, v in metrics_of(result).items():
            is_nan, val = _sanitize(v)
            metrics.append({"key": k, "value": val, "timestamp": 0, "step": 0, "is_nan": is_nan, "run_uuid": run_id})
        d = Path(unquote(urlparse(art_uri).path))
        d.mkdir(parents=True, exist_ok=True)
        (d / "result.json").write_text(json.dumps(result, indent=1, sort_keys=True))
        for name, text in files.get(result["commit"], {}).items():
            (d / name).write_text(text)
    with store.ManagedSessionMaker() as session:
        session.execute(SqlRun.__table__.insert(), runs)
        session.execute(SqlTag.__table__.insert(), tags)
        if params:
            session.execute(SqlParam.__table__.insert(), params)
        if metrics:
            session.execute(SqlMetric.__table__.insert(), metrics)
            session.execute(SqlLatestMetric.__table__.insert(), metrics)
    return traced
