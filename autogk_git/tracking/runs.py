"""Logging runs: one result note's run (made or completed in place, its artifacts, its trace, a pick's
tag on the run it copied, superseded runs), and the side runs of a report and of a loop."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from autogk_git.git import repo
from autogk_git.record import artifacts
from autogk_git.tracking.run_data import TAG_COMMIT, bench_window, metrics_of, run_params, run_tags, trace_of
from autogk_git.tracking.store import experiment_for, experiment_name, open_client, side_experiment


def tag_picked_run(client, project, result: dict[str, Any]) -> None:
    """On the run of the experiment a pick copied: `autogk.picked_onto` = 'branch commit' (each pick)."""
    src = (result.get("picked_from") or {}).get("commit")
    exp = client.get_experiment_by_name(experiment_name(result["target"]))
    run = find_run(client, exp.experiment_id, src) if src and exp is not None else None
    if run is None:
        return
    onto = f"{result.get('branch') or '?'} {result['commit'][:10]}"
    have = [p for p in run.data.tags.get("autogk.picked_onto", "").split(", ") if p]
    if onto not in have:
        client.set_tag(run.info.run_id, "autogk.picked_onto", ", ".join([*have, onto])[:5000])


def find_run(client, exp_id: str, commit: str):
    runs = client.search_runs([exp_id], filter_string=f"tags.`{TAG_COMMIT}` = '{commit}'", max_results=1)
    return runs[0] if runs else None


def link_trace(client, run_id: str, result: dict[str, Any]) -> None:
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


def log_result(project, result: dict[str, Any], known_new: bool = False, files: dict[str, str] | None = None,
               judged_here: bool = True) -> str:
    """Create or update the run for one result note; returns the run id.

    known_new: the caller has just listed the logged commits and this one is not among them, so the
    per-run search is skipped (what makes `autogk sync` of many notes cheaper). files: the artifacts the
    caller already holds ({"kernel.py": text, ...}, record/artifacts.py's names); the others are read
    from git.
    """
    from mlflow.entities import Metric, Param, RunTag

    client = open_client(project)
    exp_id = experiment_for(client, project, result)
    run = None if known_new else find_run(client, exp_id, result["commit"])
    verdict = result.get("verdict", {})
    tags = run_tags(result, judged_here)
    window = bench_window(result)
    if run is None:
        run = client.create_run(exp_id, tags=tags, run_name=tags["mlflow.runName"],
                                start_time=window[0] if window else None)
        run_id = run.info.run_id
        params = [Param(k, v) for k, v in run_params(result).items()]
    else:
        run_id = run.info.run_id
        # A run cut short may lack its params; MLflow refuses to change one, so only the missing go.
        params = [Param(k, v) for k, v in run_params(result).items() if k not in run.data.params]
    ts = 0
    metrics = [Metric(k, v, ts, 0) for k, v in metrics_of(result).items()]
    client.log_batch(run_id, metrics=metrics, params=params, tags=[RunTag(k, v) for k, v in tags.items()])
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "result.json").write_text(json.dumps(result, indent=1, sort_keys=True))
        for name, text in artifacts.run_files(project, result, files).items():
            (d / name).write_text(text)
        client.log_artifacts(run_id, str(d))
    client.set_terminated(run_id, status="FINISHED" if verdict.get("decision") else "FAILED",
                          end_time=window[1] if window else None)
    link_trace(client, run_id, result)
    if result.get("kind") == "pick":
        tag_picked_run(client, project, result)
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


def complete_run(run) -> bool:
    """Not a run cut short: one left RUNNING by a process killed inside `log_result`."""
    return run.info.status not in ("RUNNING", "SCHEDULED")


def is_logged(project, result: dict[str, Any]) -> bool:
    """The result note's commit has a complete run (not one cut short by a kill)."""
    client = open_client(project)
    exp = client.get_experiment_by_name(experiment_name(result["target"]))
    if exp is None:
        return False
    run = find_run(client, exp.experiment_id, result["commit"])
    return run is not None and complete_run(run)


def log_report(project, target: str, files: list[Path], summary: dict[str, float]) -> str:
    """Log a report's files as artifacts of one `report` run; returns its id.

    The run lives in an experiment of its own, `autogk/<target>/reports`, so the target's experiment
    lists experiments only (a report among them read as one more experiment with no verdict).
    """
    from mlflow.entities import Metric, RunTag

    client = open_client(project)
    exp_id = side_experiment(client, project, target, "reports")
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


def log_loop(project, report: dict[str, Any], started: float, agent: str) -> str:
    """One run per `autogk iterate` in the experiment `autogk/<target>/loops`: the loop's totals and why it stopped."""
    from mlflow.entities import Metric, RunTag

    client = open_client(project)
    target = report["target"]
    exp_id = side_experiment(client, project, target, "loops")
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
    # Where the loop's time went (loop/step.py phase_totals): proposing, benchmarks, waiting, concluding.
    metrics += [Metric(f"time_{k}", float(v), 0, 0) for k, v in (report.get("phases") or {}).items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)]
    client.log_batch(run.info.run_id, metrics=metrics, tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(run.info.run_id, status="FAILED" if report.get("failed") else "FINISHED")
    return run.info.run_id
