"""`autogk report` read at a glance: what was checked (untimed) or the objective (timed), each
experiment labelled with its change, the best marked, revert reasons, and MLflow kept apart."""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import REPO, autogk_in
from review_support import copy_project, iterate_report, iterated_template

sys.path.insert(0, str(REPO / "benchmarks"))
import log_scale  # noqa: E402  (builds a synthetic timed history with one git fast-import)


@pytest.fixture
def iterated(template_project, tmp_path_factory, tmp_path):
    return copy_project(iterated_template(template_project, tmp_path_factory), tmp_path / "proj")


def test_untimed_report_says_what_was_checked_and_why_each_verdict(iterated, tmp_path):
    exps = iterate_report(iterated)["experiments"]
    autogk_in(iterated, "sync")  # the copy has no MLflow store: rebuild it from the notes
    out = json.loads(autogk_in(iterated, "report", "--json").stdout)[0]
    s = out["summary"]
    assert s["timed"] is False
    assert s["workloads"] == 5 and s["workloads_checked"] + s["workloads_never_checked"] == 5
    assert s["workloads_checked"] >= 1
    best = json.loads(autogk_in(iterated, "best", "--json").stdout)
    best = best[0] if isinstance(best, list) else best
    kept = [e for e in exps if e["decision"] == "keep"]
    if kept:
        assert s["best_experiment"] == best["experiment"]["number"]
    # Every experiment is labelled on the figure with what it changed.
    assert set(s["labelled"]) == {str(e["number"]) for e in exps}
    page = Path(out["html"]).read_text()
    assert "what was checked" in page and f"{s['workloads_checked']} of 5 workload(s)" in page
    assert "why (verdict reason)" in page
    reverted = [e for e in exps if e["decision"] == "revert"]
    assert reverted, "the iterated history has a revert whose reason the page must show"
    for e in reverted:  # the reason a revert happened is on the page, not an empty cell
        reason = json.loads(autogk_in(iterated, "log", "--json").stdout)
        why = next(r["reason"] for r in reason if r["number"] == e["number"])
        assert why and why[:40].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in page
    if kept:
        assert page.count("★ best") == 1
    # The report is a run of its own experiment, never one more row among the experiments.
    with sqlite3.connect(iterated / "mlruns" / "mlflow.db") as con:
        where = dict(con.execute("select r.run_uuid, e.name from runs r join experiments e "
                                 "on r.experiment_id = e.experiment_id").fetchall())
    assert where[out["mlflow_run"]] == "autogk/scale/reports"
    assert sum(name == "autogk/scale" for name in where.values()) == len(exps)


def test_timed_report_draws_the_objective_and_marks_the_best(tmp_path):
    root = tmp_path / "p"
    log_scale.build(root, 12, 3, 2)
    out = json.loads(autogk_in(root, "report", "--no-mlflow", "--out", str(tmp_path / "r"), "--json").stdout)[0]
    s = out["summary"]
    rows = json.loads(autogk_in(root, "log", "--json").stdout)
    kept = [r for r in rows if r["decision"] == "keep"]
    assert s["timed"] is True and kept
    best = min(kept, key=lambda r: r["latency_us"])
    assert s["best_experiment"] == best["number"]
    assert s["best_latency_us"] == pytest.approx(best["latency_us"])
    assert s["best_vs_first"] == pytest.approx(best["latency_us"] / rows[0]["latency_us"])
    assert len(s["labelled"]) == 12
    page = Path(out["html"]).read_text()
    assert "No latency was measured" not in page and page.count("★ best") == 1
    assert Path(out["png"]).read_bytes()[:4] == b"\x89PNG"
