"""`autogk report`: a PNG and an HTML page of the run per target, also logged to MLflow."""
from __future__ import annotations

import json
from pathlib import Path

import click

from autogk_git.record import ledger
from autogk_git.errors import AutogkError
from autogk_git.project import Project


@click.command("report", help="A PNG and an HTML page of the run's figures, also logged to MLflow.")
@click.option("--target", "-t", help="only this target (default: every target with experiments)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="folder for the files (default: mlruns/reports/ in the project)")
@click.option("--mlflow/--no-mlflow", "to_mlflow", default=True, show_default=True, help="log the files to MLflow")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def report(target, out_dir, to_mlflow, as_json) -> int:
    from autogk_git.review import report as report_mod

    project = Project.find()
    targets = [target] if target else sorted({r.target for r in ledger.rows(project.root)})
    if not targets:
        raise AutogkError("no experiments yet, so nothing to report", "run `autogk iterate` first")
    out_dir = out_dir or project.main_root / "mlruns" / "reports"
    made = []
    for t in targets:
        info = report_mod.build(project, t, out_dir)
        if to_mlflow and project.config.tracking.enabled:
            from autogk_git.tracking.mlflow_store import log_report
            figures = {k: float(v) for k, v in info["summary"].items() if isinstance(v, (int, float))}
            info["mlflow_run"] = log_report(project, t, [Path(info["png"]), Path(info["html"])], figures)
        made.append(info)
        if not as_json:
            click.echo(f"{t}: {info['html']} (figure {info['png']})"
                       + (f"; logged to MLflow (experiment autogk/{t}/reports, run {info['mlflow_run']})"
                          if info.get("mlflow_run") else ""))
    if as_json:
        click.echo(json.dumps(made, indent=1))
    return 0
