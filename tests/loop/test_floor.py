"""How far from the limit: each workload's floor and the kernel's share of it in the result note, `show`,
`log`, MLflow and the agents' view, and a loop that stops once the trunk is within `[search] floor_share`
of every floor. Timed by the model backend (tests/timed_model.py: every floor 4 us, the trunk 10 us)."""
from __future__ import annotations

import json

import pytest

import timed_model
from conftest import autogk_in, notes_json
from timed_model import conclude, hand_experiment, rev


@pytest.fixture
def timed(project, monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")
    return timed_model.timed_project(project, monkeypatch)


def test_the_floor_share_is_in_the_note_show_log_and_the_agents_view(timed, monkeypatch):
    kept = hand_experiment(timed, 1, rev(timed, "main"), 8.0)
    conclude(timed)
    note = notes_json(timed, kept)
    assert note["verdict"]["decision"] == "keep"
    fl = note["floor"]
    assert fl["min_share"] == 0.5 and fl["parent_min_share"] == 0.4, fl
    assert {w["share"] for w in fl["workloads"].values()} == {0.5} and len(fl["workloads"]) == 5
    show = autogk_in(timed, "show", "1").stdout
    assert "limit: 50.0% .. 50.0% of the floor over 5 workload(s)" in show, show
    assert "the parent: 40.0% .. 40.0%" in show
    assert "(floor: 50.0% at worst)" in autogk_in(timed, "log").stdout
    (row,) = json.loads(autogk_in(timed, "log", "--json").stdout)
    assert row["floor_share"] == 0.5
    autogk_in(timed, "report", "--no-mlflow", "--out", str(timed / "out"))
    page = (timed / "out" / "scale.html").read_text() if (timed / "out" / "scale.html").exists() else \
        next((timed / "out").glob("*.html")).read_text()
    assert "share of floor (lowest workload)" in page and "<td>50.0%</td>" in page
    # Every agent's view: the workloads artifact the loop writes (read by the anthropic, command and
    # research agents) and the prompt itself.
    autogk_in(timed, "iterate", "-n", "0", "--agent", "tune", "--max-time", "0.001")
    md = next(timed.glob(".git/autogk/artifacts/scale/workloads.md")).read_text()
    assert "How far from the limit" in md and "| 50.0% |" in md, md
    from autogk_git.agents import prompts
    from autogk_git.record.experiments import results
    from autogk_git.project import Project
    lines = "\n".join(prompts.floor.prompt_lines(results(Project.find(timed), "scale")))
    assert "experiment #1" in lines and "| 4.00 | 8.00 | 50.0% |" in lines, lines


def test_mlflow_gets_the_floor_share(timed, monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "1")
    kept = hand_experiment(timed, 1, rev(timed, "main"), 8.0)
    conclude(timed)
    from autogk_git.project import Project
    from autogk_git.tracking import mlflow_store
    metrics = mlflow_store.metrics_of(notes_json(timed, kept))
    assert metrics["floor_share_min"] == 0.5
    import mlflow
    mlflow.set_tracking_uri(f"sqlite:///{timed}/mlruns/mlflow.db")
    runs = mlflow.search_runs(search_all_experiments=True, filter_string="metrics.floor_share_min > 0.49")
    assert len(runs) == 1, runs
    assert Project.find(timed)


def test_the_loop_stops_once_the_trunk_is_within_the_configured_share_of_every_floor(timed):
    kept = hand_experiment(timed, 1, rev(timed, "main"), 8.0)  # 50 % of every floor once kept
    conclude(timed)
    assert notes_json(timed, kept)["verdict"]["decision"] == "keep"
    far = json.loads(autogk_in(timed, "iterate", "-n", "1", "--agent", "tune", "--json",
                               env={"AUTOGK_SEARCH_FLOOR_SHARE": "0.6"}).stdout)
    assert len(far["experiments"]) == 1 and "floor" not in far["stop_reason"], far["stop_reason"]
    near = autogk_in(timed, "iterate", "-n", "3", "--agent", "tune", "--json",
                     env={"AUTOGK_SEARCH_FLOOR_SHARE": "0.45"})
    report = json.loads(near.stdout)
    assert report["experiments"] == [], report
    assert "within 45% of the floor on every workload" in report["stop_reason"], report["stop_reason"]
    assert "lowest 50.0%" in report["stop_reason"]
    text = autogk_in(timed, "iterate", "-n", "3", "--agent", "tune",
                     env={"AUTOGK_SEARCH_FLOOR_SHARE": "0.45"}).stdout
    assert "stopped: the trunk is within 45% of the floor" in text, text
