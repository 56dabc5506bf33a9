"""MLflow runs (with `traces.py`, the only modules that import mlflow). Result notes are the source of
truth; this mirrors them.

One MLflow experiment per target (`autogk/<target>`), one run per autogk experiment, found again by
its `autogk.commit` tag so that logging twice (the loop, then `autogk sync`) updates, never duplicates.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autogk_git.git import repo
from autogk_git.procs import pid_alive
from autogk_git.record import refs

TAG_COMMIT = "autogk.commit"


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


def _client(project):
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    uri = project.tracking_uri()
    probe(uri)
    for k, v in HTTP_LIMITS.items():
        os.environ.setdefault(k, v)
    import mlflow  # noqa: F401  (heavy: imported only here, only when logging)
    from mlflow.tracking import MlflowClient

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
    """
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    for old in db.parent.glob(f".{db.name}.*{BUILDING}*"):  # left by a killed builder
        pid = old.name[len(db.name) + 2:].split(".", 1)[0]
        if not (pid.isdigit() and pid_alive(int(pid))):
            old.unlink(missing_ok=True)
    tmp = db.with_name(f".{db.name}.{os.getpid()}{BUILDING}")
    tmp.unlink(missing_ok=True)
    try:
        SqlAlchemyStore(f"sqlite:///{tmp}", str(artifacts)).engine.dispose()  # closes it: no journal left
        try:
            os.link(tmp, db)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)


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


def _experiment_id(client, project, target: str) -> str:
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
    client = _client(project)
    return client, _experiment_id(client, project, target)


# Results that are not experiments (`kind`: a pick onto another branch, a bisect's commit on the trunk)
# have runs of their own in `autogk/<target>/<kind>s`, so the target's table keeps one row per experiment
# (a pick's run there read as a second "0001 KEEP"). The run a pick copied is tagged with where it went.
SIDE_KINDS = ("pick", "bisect")


def _experiment_for(client, project, result: dict[str, Any]) -> str:
    kind = result.get("kind")
    if kind:
        return _side_experiment(client, project, result["target"], f"{kind}s")
    return _experiment_id(client, project, result["target"])


def _tag_picked_run(client, project, result: dict[str, Any]) -> None:
    """On the run of the experiment a pick copied: `autogk.picked_onto` = 'branch commit' (each pick)."""
    src = (result.get("picked_from") or {}).get("commit")
    exp = client.get_experiment_by_name(experiment_name(result["target"]))
    run = _find_run(client, exp.experiment_id, src) if src and exp is not None else None
    if run is None:
        return
    onto = f"{result.get('branch') or '?'} {result['commit'][:10]}"
    have = [p for p in run.data.tags.get("autogk.picked_onto", "").split(", ") if p]
    if onto not in have:
        client.set_tag(run.info.run_id, "autogk.picked_onto", ", ".join([*have, onto])[:5000])


def _find_run(client, exp_id: str, commit: str):
    runs = client.search_runs([exp_id], filter_string=f"tags.`{TAG_COMMIT}` = '{commit}'", max_results=1)
    return runs[0] if runs else None


def _metric_key(text: str) -> str:
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in text)


def metrics_of(result: dict[str, Any]) -> dict[str, float]:
    """Flat metrics: per-workload errors (and latencies where timed), plus summary figures."""
    out: dict[str, float] = {"correct": 1.0 if result.get("correct") else 0.0}
    for stage, res in result.get("stages", {}).items():
        for label, wls in res.get("workloads", {}).items():
            if label != "candidate":
                continue
            for uuid, w in wls.items():
                base = _metric_key(f"{stage}.{uuid[:8]}")
                out[f"{base}.passed"] = 1.0 if w.get("status") == "PASSED" else 0.0
                for k in ("max_abs_err", "max_rel_err", "latency_us", "speedup_vs_reference"):
                    if isinstance(w.get(k), (int, float)):
                        out[f"{base}.{k}"] = float(w[k])
    for k, v in (result.get("verdict") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"verdict.{k}"] = float(v)
    for k, v in (result.get("cost") or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"cost.{k}"] = float(v)
    out.update(key_figures(result))
    return out


def key_figures(result: dict[str, Any]) -> dict[str, float]:
    """The few figures the runs table shows as columns: workloads passed, and latency where timed."""
    from autogk_git.record import ledger
    cand = {}
    for res in (result.get("stages") or {}).values():
        cand.update((res.get("workloads") or {}).get("candidate") or {})
    out = {"workloads_checked": float(len(cand)),
           "workloads_passed": float(sum(1 for w in cand.values() if w.get("status") == "PASSED"))}
    lat = ledger.geomean(list(ledger.latencies(result).values()))
    if lat is not None:
        out["geomean_latency_us"] = lat
    ratio = ledger.ratio_vs_parent(result)
    if ratio is not None:
        out["ratio_vs_parent"] = ratio
    from autogk_git.record import floor
    fl = floor.of(result)  # how far from the limit: the lowest share of the floor, and each workload's
    if fl and "min_share" in fl:
        out["floor_share_min"] = float(fl["min_share"])
        for u, r in fl["workloads"].items():
            if "share" in r:
                out[f"floor_share.{_metric_key(u[:8])}"] = float(r["share"])
    for w in (result.get("profile") or {}).get("workloads") or []:  # Nsight Compute: the first kernel of each
        k = (w.get("kernels") or [{}])[0]
        for name in ("duration_us", "sm_pct", "dram_pct", "achieved_occupancy_pct"):
            if isinstance(k.get(name), (int, float)):
                out[f"profile.{_metric_key(w['uuid'][:8])}.{name}"] = float(k[name])
    return out


def run_name(result: dict[str, Any]) -> str:
    """`0003 KEEP 1a2b3c4 tune: BLOCK 64 -> 128`: number, verdict and commit read in any runs view."""
    decision = ((result.get("verdict") or {}).get("decision") or "pending").upper()
    if result.get("kind") or not isinstance(result.get("experiment"), int):
        # `pick #0001 onto other-branch: ...` is the hypothesis of a pick; a bisect's names its commit
        what = result.get("hypothesis") or f"{result.get('kind') or 'result'} of {result['commit'][:10]}"
        return f"{decision} {result['commit'][:7]} {what}"[:250]
    return f"{result['experiment']:04d} {decision} {result['commit'][:7]} {result.get('hypothesis', '')}"[:250]


def _tags(result: dict[str, Any]) -> dict[str, str]:
    verdict = result.get("verdict") or {}
    return {
        TAG_COMMIT: result["commit"], "autogk.branch": result.get("branch") or "",
        "autogk.parent": result.get("parent") or "", "autogk.verdict": verdict.get("decision", ""),
        "autogk.agent": result.get("agent", ""), "autogk.backend": result.get("backend", ""),
        "autogk.number": f"{result['experiment']:04d}" if isinstance(result.get("experiment"), int) else "",
        "autogk.target": result["target"], "autogk.kind": result.get("kind") or "experiment",
        "autogk.rule": verdict.get("rule", ""), "autogk.figures": verdict.get("figures", ""),
        "mlflow.runName": run_name(result), "autogk.commit_short": result["commit"][:10],
        "mlflow.note.content": f"{verdict.get('decision', '').upper()}: {verdict.get('reason', '')}",
        **_slurm_tags(result),
    }


def _slurm_tags(result: dict[str, Any]) -> dict[str, str]:
    """Where each stage's SLURM job ran (slurm backend): `autogk.slurm.<stage>` = 'job 12 on node, GPU 0'."""
    out = {}
    for stage, res in (result.get("stages") or {}).items():
        info = res.get("slurm") or {}
        if info.get("job_id"):
            out[f"autogk.slurm.{stage}"] = (f"job {info['job_id']} on {info.get('node') or '?'}"
                                            + (f", GPU {info['gpus']}" if info.get("gpus") else "")
                                            + (f", {info['state']}" if info.get("state") not in (None, "COMPLETED") else ""))
    return out


def _params(result: dict[str, Any]) -> dict[str, str]:
    params = {f"tunable.{k}": str(v) for k, v in (result.get("tunables") or {}).items()}
    params["hypothesis"] = (result.get("hypothesis") or "")[:500]
    return params


def bench_window(result: dict[str, Any]) -> tuple[int, int] | None:
    """(start, end) of the benchmark in epoch milliseconds, from the note: the run's Duration in the UI
    is the benchmark's wall time, not the moment it was logged (a sync after a clone logs years later)."""
    import datetime as dt
    try:
        end = dt.datetime.fromisoformat(str(result["created"])).timestamp()
    except (KeyError, ValueError):
        return None
    wall = (result.get("cost") or {}).get("bench_wall_s")
    wall = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall >= 0 else 0.0
    return int((end - wall) * 1000), int(end * 1000)


def trace_of(result: dict[str, Any]) -> str | None:
    """The id of the agent's conversation trace (tracking/traces.py), which the agent put in its usage."""
    tid = (result.get("cost") or {}).get("trace_id")
    return tid if isinstance(tid, str) and tid else None


def _link_trace(client, run_id: str, result: dict[str, Any]) -> None:
    """Show the agent's conversation on the experiment's run, tagged with what it became. A note from
    another clone names a trace this store never had: nothing to link, and nothing is wrong."""
    tid = trace_of(result)
    if tid is None:
        return
    try:
        client.get_trace(tid)
    except Exception:  # noqa: BLE001 - MLflow raises its own not-found error; the trace is elsewhere
        return
    client.link_traces_to_run([tid], run_id)
    verdict = (result.get("verdict") or {}).get("decision", "")
    for k, v in {TAG_COMMIT: result["commit"], "autogk.verdict": verdict,
                 "autogk.hypothesis": (result.get("hypothesis") or "")[:250]}.items():
        client.set_trace_tag(tid, k, v)


def log_result(project, result: dict[str, Any], known_new: bool = False) -> str:
    """Create or update the run for one result note; returns the run id.

    known_new: the caller has just listed the logged commits and this one is not among them, so the
    per-run search is skipped (what makes `autogk sync` of many notes cheaper).
    """
    from mlflow.entities import Metric, Param, RunTag

    client = _client(project)
    exp_id = _experiment_for(client, project, result)
    run = None if known_new else _find_run(client, exp_id, result["commit"])
    verdict = result.get("verdict", {})
    tags = _tags(result)
    window = bench_window(result)
    if run is None:
        run = client.create_run(exp_id, tags=tags, run_name=tags["mlflow.runName"],
                                start_time=window[0] if window else None)
        run_id = run.info.run_id
        params = [Param(k, v) for k, v in _params(result).items()]
    else:
        run_id = run.info.run_id
        # A run cut short may lack its params; MLflow refuses to change one, so only the missing go.
        params = [Param(k, v) for k, v in _params(result).items() if k not in run.data.params]
    ts = 0
    metrics = [Metric(k, v, ts, 0) for k, v in metrics_of(result).items()]
    client.log_batch(run_id, metrics=metrics, params=params, tags=[RunTag(k, v) for k, v in tags.items()])
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "result.json").write_text(json.dumps(result, indent=1, sort_keys=True))
        kernel = repo.show_file(project.root, result["commit"], project.target_rel(result['target']) + "/kernel.py")
        if kernel is not None:
            (d / "kernel.py").write_text(kernel)
        if result.get("parent"):
            (d / "diff.patch").write_text(repo.diff(project.root, result["parent"], result["commit"],
                                                    project.target_rel(result['target'])))
        plan = repo.read_note(project.root, refs.NOTES_PLANS, result["commit"])
        if plan:
            (d / "plan.md").write_text(plan)
        client.log_artifacts(run_id, str(d))
    client.set_terminated(run_id, status="FINISHED" if verdict.get("decision") else "FAILED",
                          end_time=window[1] if window else None)
    _link_trace(client, run_id, result)
    if result.get("kind") == "pick":
        _tag_picked_run(client, project, result)
    if not result.get("kind"):
        supersede(client, exp_id, project.root, result)
    return run_id


TAG_SUPERSEDED = "autogk.superseded_by"


def live(root: Path, commit: str) -> bool:
    """True when some ref (a branch, a kept or archive ref) still reaches the commit."""
    return repo.reachable(root, commit)


def supersede(client, exp_id: str, root: Path, result: dict[str, Any]) -> list[str]:
    """Other runs of the same experiment number whose commit nothing reaches any more (amended, rebased,
    replayed away) are tagged with the commit that replaced them and deleted (MLflow keeps deleted runs
    restorable), so the runs table has one row per experiment. A run whose commit is still reachable is
    another clone's experiment of the same number, and stays."""
    number = f"{result['experiment']:04d}"
    runs = client.search_runs([exp_id], filter_string=f"tags.`autogk.number` = '{number}'", max_results=200)
    gone = []
    for r in runs:
        commit = r.data.tags.get(TAG_COMMIT, "")
        if not commit or commit == result["commit"] or live(root, commit):
            continue
        client.set_tag(r.info.run_id, TAG_SUPERSEDED, result["commit"])
        client.delete_run(r.info.run_id)
        gone.append(commit)
    return gone


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


def _complete(run) -> bool:
    """Not a run cut short: one left RUNNING by a process killed inside `log_result`."""
    return run.info.status not in ("RUNNING", "SCHEDULED")


def is_logged(project, result: dict[str, Any]) -> bool:
    """The result note's commit has a complete run (not one cut short by a kill)."""
    client = _client(project)
    exp = client.get_experiment_by_name(experiment_name(result["target"]))
    if exp is None:
        return False
    run = _find_run(client, exp.experiment_id, result["commit"])
    return run is not None and _complete(run)


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
    client = _client(project)
    out = []
    for target, numbers in sorted(noted.items()):
        exp = client.get_experiment_by_name(experiment_name(target))
        logged: set[int] = set()
        if exp is not None:
            for r in client.search_runs([exp.experiment_id], max_results=5000):
                n = r.data.tags.get("autogk.number", "")
                if n.isdigit() and _complete(r):  # not one cut short
                    logged.add(int(n))
        out += [(target, n) for n in sorted(numbers - logged)]
    return out


def check(project) -> None:
    """Open the store and read from it: raises whatever a locked, damaged or unreachable store raises."""
    _client(project).search_experiments(max_results=1)


def logged_commits(project, target: str) -> dict[str, bool]:
    """commit -> whether its run is complete. A run still RUNNING was cut short (a loop killed inside
    `log_result`, after the run was created): it has the commit's tag but may lack figures and
    artifacts, so sync completes it in place instead of skipping it or adding a second run."""
    client = _client(project)
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
            seen[commit] = seen.get(commit, False) or _complete(r)
        token = page.token
        if not token:
            return seen


def _side_experiment(client, project, target: str, kind: str) -> str:
    """The id of `autogk/<target>/<kind>` (reports, loops): records that are not experiments live beside
    the target's experiment, so its runs table lists experiments only. Created on first use."""
    name = experiment_name(target) + "/" + kind
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    art = project.artifact_root() / target / kind
    art.mkdir(parents=True, exist_ok=True)
    return client.create_experiment(name, artifact_location=art.as_uri(), tags={"autogk.target": target})


def log_report(project, target: str, files: list[Path], summary: dict[str, float]) -> str:
    """Log a report's files as artifacts of one `report` run; returns its id.

    The run lives in an experiment of its own, `autogk/<target>/reports`, so the target's experiment
    lists experiments only (a report among them read as one more experiment with no verdict).
    """
    from mlflow.entities import Metric, RunTag

    client = _client(project)
    exp_id = _side_experiment(client, project, target, "reports")
    runs = client.search_runs([exp_id], filter_string="tags.`autogk.kind` = 'report'", max_results=1)
    if runs:
        run_id = runs[0].info.run_id
    else:
        run_id = client.create_run(exp_id, tags={"autogk.kind": "report", "autogk.target": target},
                                   run_name=f"report: {target}").info.run_id
    client.log_batch(run_id, metrics=[Metric(k, float(v), 0, 0) for k, v in summary.items()],
                     tags=[RunTag("mlflow.note.content", f"autogk report of {target}: see the artifacts")])
    for f in files:
        client.log_artifact(run_id, str(f), artifact_path="report")
    client.set_terminated(run_id, status="FINISHED")
    return run_id


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


def log_loop(project, report: dict[str, Any], started: float, agent: str) -> str:
    """One run per `autogk iterate` in the experiment `autogk/<target>/loops`: the loop's totals and why it stopped."""
    from mlflow.entities import Metric, RunTag

    client = _client(project)
    target = report["target"]
    exp_id = _side_experiment(client, project, target, "loops")
    exps = report.get("experiments", [])
    counts = {"experiments": len(exps), "kept": sum(e.get("decision") == "keep" for e in exps),
              "reverted": sum(e.get("decision") == "revert" for e in exps),
              "repeats": sum(e.get("decision") == "repeat" for e in exps),
              "research_plans": len(report.get("research", []))}
    usage = {k: v for k, v in (report.get("usage") or {}).items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    tags = {"autogk.target": target, "autogk.agent": agent, "autogk.stop_reason": report.get("stop_reason", "")[:500],
            "autogk.experiments": " ".join(str(e.get("number")) for e in exps)[:500]}
    run = client.create_run(exp_id, tags=tags, run_name=f"loop {agent} x{len(exps)}", start_time=int(started * 1000))
    metrics = [Metric(k, float(v), 0, 0) for k, v in {**counts, **usage}.items()]
    metrics.append(Metric("cost_usd", float(report.get("cost_usd", 0.0)), 0, 0))
    client.log_batch(run.info.run_id, metrics=metrics, tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(run.info.run_id, status="FAILED" if report.get("failed") else "FINISHED")
    return run.info.run_id


# ------------------------------------------------------------------------------------------------
# Many results at once (`autogk sync`)
# ------------------------------------------------------------------------------------------------

SYNC_CHUNK = 500   # runs written per database transaction


def _run_files(project, results: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """{commit: {artifact name: text}} for many results in a few git processes (not four per result)."""
    from autogk_git.git import commits
    files: dict[str, dict[str, str]] = {r["commit"]: {} for r in results}
    specs = {f"{r['commit']}:{project.target_rel(r['target'])}/kernel.py": r["commit"] for r in results}
    blobs = repo.cat_blobs(project.root, list(specs))
    for spec, commit in specs.items():
        if spec in blobs:
            files[commit]["kernel.py"] = blobs[spec].decode(errors="replace")
    for target in {r["target"] for r in results}:
        pairs = [r for r in results if r["target"] == target and r.get("parent")]
        if not pairs:
            continue
        # One diff-tree for all pairs. A line "COMMIT PARENT" diffs PARENT -> COMMIT (the ids after the
        # first stand for its parents); with --always each diff, empty or not, follows a line holding
        # COMMIT, in input order.
        out = commits.patches(project.root, [(r["commit"], r["parent"]) for r in pairs], project.target_rel(target))
        k, current = -1, None
        for line in out.splitlines(keepends=True):
            if k + 1 < len(pairs) and line.rstrip("\n") == pairs[k + 1]["commit"]:
                k += 1
                current = pairs[k]["commit"]
                files[current]["diff.patch"] = ""
            elif current is not None:
                files[current]["diff.patch"] += line
    for commit, text in repo.read_notes(project.root, refs.NOTES_PLANS, list(files)).items():
        files[commit]["plan.md"] = text
    return files


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


def log_results(project, results: list[dict[str, Any]], progress=None) -> int:
    """Log many result notes that MLflow does not have yet, as new runs; returns how many.

    With MLflow's SQL store (the default SQLite one) and a local artifact root, runs, tags, params and
    metrics of SYNC_CHUNK results go in one transaction and the artifacts are written as files where
    the artifact store keeps them: per-run client calls (four transactions and four git processes per
    result) made a sync of 10,000 notes take most of an hour. Anything else (a tracking server, a
    remote artifact store) falls back to `log_result` per result.
    """
    if not results:
        return 0
    client = _client(project)
    store = _sql_store(client)
    exp_ids = {}
    for r in results:
        key = (r["target"], r.get("kind"))
        if key not in exp_ids:
            exp_ids[key] = _experiment_for(client, project, r)
    exps = {k: client.get_experiment(i) for k, i in exp_ids.items()}
    local = all(e.artifact_location.startswith("file:") for e in exps.values())
    if store is None or not local:
        for i, r in enumerate(results, 1):
            log_result(project, r, known_new=True)
            if progress:
                progress(i, len(results), r)
        return len(results)
    done = 0
    for start in range(0, len(results), SYNC_CHUNK):
        chunk = results[start:start + SYNC_CHUNK]
        linked = _insert_runs(project, store, exps, chunk, _run_files(project, chunk))
        for run_id, result in linked:  # the few with an agent's trace in this store
            _link_trace(client, run_id, result)
        for result in chunk:
            if result.get("kind") == "pick":
                _tag_picked_run(client, project, result)
        done += len(chunk)
        if progress:
            progress(done, len(results), chunk[-1])
    return done


def _insert_runs(project, store, exps, chunk, files) -> list[tuple[str, dict[str, Any]]]:
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
        run_tags = _tags(result)
        runs.append({"run_uuid": run_id, "name": run_tags["mlflow.runName"], "source_type": "UNKNOWN",
                     "source_name": "", "entry_point_name": "", "user_id": user,
                     "status": "FINISHED" if verdict.get("decision") else "FAILED", "start_time": start,
                     "end_time": end, "deleted_time": None, "source_version": "", "lifecycle_stage": "active",
                     "artifact_uri": art_uri, "experiment_id": int(exp.experiment_id)})
        tags += [{"key": k, "value": v, "run_uuid": run_id} for k, v in run_tags.items()]
        params += [{"key": k, "value": v, "run_uuid": run_id} for k, v in _params(result).items()]
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
