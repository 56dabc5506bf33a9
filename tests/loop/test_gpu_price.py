"""A price on GPU time: `[bench] usd_per_gpu_hour` prices each experiment's GPU-seconds into its cost, the
run's cost and `--budget-usd`. Timed by the model backend (tests/timed_model.py: 0.01 GPU-s per job)."""
from __future__ import annotations

import json

import timed_model
from conftest import autogk_in, notes_json


def test_gpu_time_is_priced_into_each_experiment_and_the_budget(project, monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")
    timed = timed_model.timed_project(project, monkeypatch)
    env = {"AUTOGK_BENCH_USD_PER_GPU_HOUR": "3600"}  # 1 $ per GPU-second: 0.01 $ per experiment
    out = autogk_in(timed, "iterate", "-n", "6", "--agent", "tune", "--budget-usd", "0.015", "--json", env=env)
    report = json.loads(out.stdout)
    measured = [e for e in report["experiments"] if e["commit"]]
    assert len(measured) == 2, report
    for e in measured:
        assert notes_json(timed, e["commit"])["cost"]["gpu_usd"] == 0.01
    assert report["gpu_usd"] == 0.02 and report["cost_usd"] == 0.02
    assert report["stop_reason"].startswith("budget of $") and "after 2 experiment(s)" in report["stop_reason"]
    text = autogk_in(timed, "iterate", "-n", "1", "--agent", "tune", env=env).stdout
    assert "GPU time: $0.0100 ([bench] usd_per_gpu_hour)" in text, text
