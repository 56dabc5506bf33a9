"""The local backend's plumbing on CPU: which GPU a job gets, its environment, one job per GPU."""
from __future__ import annotations

import threading
import time

import pytest

from autogk_git import config as config_mod
from autogk_git.bench.backends import get_backend, local
from autogk_git.bench.judge import stats
from autogk_git.errors import ConfigError
from conftest import git


@pytest.fixture(autouse=True)
def locks(tmp_path, monkeypatch):
    monkeypatch.setenv(local.LOCK_DIR_ENV, str(tmp_path / "locks"))


def fake_worker(calls, hold_s=0.3):
    def run_worker(job, env, timeout_s, extra_files=None):
        t0 = time.monotonic()
        time.sleep(hold_s)
        calls.append({"gpu": env["CUDA_VISIBLE_DEVICES"], "interp": env.get("TRITON_INTERPRET"), "job": job,
                      "span": (t0, time.monotonic())})
        return {"labels": {}, "environment": {}, "attempts": 1, "records": []}
    return run_worker


def job():
    return {"stage": "ab", "settings": {"trials": 3}, "sources": {}, "workloads": []}


def test_gpu_setting_and_its_environment_override(monkeypatch):
    assert local.parse_gpus("0, 2") == ["0", "2"]
    with pytest.raises(ConfigError, match="not a CUDA device index"):
        local.parse_gpus("cuda:0")
    monkeypatch.setenv("AUTOGK_BENCH_GPU", "3")
    assert local.LocalBackend(config_mod.parse({"bench": {"gpu": "0,1"}})).gpus == ["3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert local.parse_gpus("") == ["4", "5"]
    assert local.parse_gpus("1") == ["5"]  # indices count within the visible GPUs, as in CUDA
    with pytest.raises(ConfigError, match="shows only 2"):
        local.parse_gpus("2")


def test_the_worker_sees_only_its_gpu_and_timed_settings(monkeypatch):
    calls = []
    monkeypatch.setattr(local.runner, "run_worker", fake_worker(calls, 0.0))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    b = get_backend("local", config_mod.parse({"bench": {"gpu": "1", "min_rounds": 7, "timer": "cudagraph"}}))
    assert b.name == "local" and b.timing is True
    out = b.run(job(), 60)
    (c,) = calls
    assert c["gpu"] == "1" and c["interp"] is None
    s = c["job"]["settings"]
    assert s["timed"] and s["device"] == "cuda" and s["min_rounds"] == 7 and s["timer"] == "cudagraph"
    assert s["trials"] == 3 and out["gpu"] == "1" and out["gpu_s"] >= 0


def test_one_job_per_gpu_two_gpus_run_two_at_once(monkeypatch):
    calls = []
    monkeypatch.setattr(local.runner, "run_worker", fake_worker(calls))
    one = local.LocalBackend(config_mod.parse({"bench": {"gpu": "0"}}))
    threads = [threading.Thread(target=one.run, args=(job(), 60)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = sorted(c["span"] for c in calls)
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:]))  # serialized on GPU 0
    calls.clear()
    two = local.LocalBackend(config_mod.parse({"bench": {"gpu": "0,1"}}))
    threads = [threading.Thread(target=two.run, args=(job(), 60)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c["gpu"] for c in calls) == ["0", "1"]
    (a0, a1), (b0, b1) = sorted(c["span"] for c in calls)
    assert b0 < a1  # overlapping: one per GPU, both GPUs busy


def test_no_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(local, "visible_gpus", lambda: [])
    b = local.LocalBackend(config_mod.parse({"bench": {}}))
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        b.run(job(), 60)


class CpuTimedBackend:
    """The local backend's job shape, run on CPU with the worker's host-clock timer (tests only)."""

    name = "local"
    timing = True

    def eligible(self, definition, workloads):
        return list(workloads), []

    def run(self, job, timeout_s, on_progress=None):
        import os
        from autogk_git.bench import runner
        job = dict(job, settings={**job["settings"], "timed": True, "device": "cpu", "reps": 2, "warmup": 1,
                                  "host_calls": 2, "min_rounds": 2, "max_rounds": 3})
        t0 = time.monotonic()
        out = runner.run_worker(job, dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES=""), timeout_s,
                                on_progress=on_progress)
        out["gpu_s"] = round(time.monotonic() - t0, 3)
        return out


def bench_of_a_change(project, old: str, new: str):
    """Commit one edit of the kernel; (project, target, benchmark of it against its parent on CPU)."""
    from autogk_git.bench.stages import benchmark
    from autogk_git.project import Project
    from autogk_git.record.kernels import sources_at

    kernel = project / "kernels" / "scale" / "kernel.py"
    parent = git(project, "rev-parse", "HEAD").strip()
    kernel.write_text(kernel.read_text().replace(old, new))
    git(project, "commit", "-qam", new)
    cand = git(project, "rev-parse", "HEAD").strip()
    p = Project(project)
    t = p.target("scale")
    lines = []
    res = benchmark(t, CpuTimedBackend(), sources_at(p.root, t, cand), sources_at(p.root, t, parent),
                    p.config, seed=5, progress=lines.append)
    res["progress_lines"] = lines
    return p, t, res


def test_timed_stages_end_to_end_give_a_paired_verdict_with_its_figures(project):
    from autogk_git.commands.show import workload_table
    from autogk_git.loop.verdict import PairedRatioRule

    p, t, bench = bench_of_a_change(project, "BLOCK = 64", "BLOCK = 128")
    # One job: the candidate screened on the quick workloads, then both kernels checked and timed on all.
    assert bench["correct"] and list(bench["stages"]) == ["ab"]
    ab = bench["stages"]["ab"]["ab"]
    assert 2 <= ab["rounds"] <= 3 and ab["ci_low"] <= ab["ratio"] <= ab["ci_high"]
    assert set(ab["phases"]) >= {"check", "timed", "verify"}
    for label in ("parent", "candidate"):
        ws = bench["stages"]["ab"]["workloads"][label]
        assert len(ws) == len(t.workloads) and {w["status"] for w in ws.values()} == {"PASSED"}
        assert all(w["method"] == "host" for w in ws.values())
    for u, w in bench["stages"]["ab"]["workloads"]["candidate"].items():
        # A workload still too wide to call when the geomean said keep was timed on alone (stats.Rounds).
        wide = u in ab.get("wide_workloads", [])
        assert w["ratio_vs_parent"] > 0 and (len(w["samples_us"]) == ab["rounds"] or wide), (u, ab)
        # From the look where the geomean says keep, up to WIDE_FACTOR x max_rounds (3 here).
        assert not wide or ab["rounds"] < len(w["samples_us"]) <= stats.WIDE_FACTOR * 3, (u, ab)
    assert bench["cost"]["gpu_s"] > 0
    # The user sees the job go by: each check as it ends, each round, then the final statuses.
    lines = bench.pop("progress_lines")
    checked = [i for i, x in enumerate(lines) if " checked on " in x]
    rounds = [i for i, x in enumerate(lines) if ": round " in x and "geomean candidate/parent so far" in x]
    final = [i for i, x in enumerate(lines) if x.startswith("  ab ") and "/" in x.split(":")[0]]
    assert len(checked) == 2 * len(t.workloads) and len(rounds) == ab["rounds"]
    assert len(final) == 2 * len(t.workloads) and max(checked) < min(rounds) and max(rounds) < min(final)
    v = PairedRatioRule().decide(bench, p.config)
    # Host timing on a loaded CPU decides nothing in particular, but the verdict must follow its own
    # interval: keep only when the whole interval clears 1 - min_effect, revert when all of it is above 1.
    # The rule recomputes the interval from the per-round, per-workload ratios over every timed workload.
    lo, hi, min_effect = v["ci_low"], v["ci_high"], p.config.bench.min_effect
    assert lo <= v["ratio"] <= hi and v["n_workloads"] == len(bench["stages"]["ab"]["workloads"]["candidate"])
    if v["decision"] == "keep":
        assert hi < 1 - min_effect
    if lo > 1:
        assert v["decision"] == "revert"
    elif not hi < 1 - min_effect:
        assert v["decision"] == p.config.bench.inconclusive
    assert v["rounds"] == ab["rounds"] and v["gpu_s"] == bench["cost"]["gpu_s"]
    table = "\n".join(workload_table({"stages": bench["stages"], "skipped": []}))
    assert "ab" in table and "-" not in table.splitlines()[-1].split()[-1]  # ratio column filled


def test_a_candidate_wrong_on_a_screen_workload_stops_the_one_job_there(project):
    """No parent call and no timing once the screen (smallest and largest workload) fails; the verdict
    names the workload, and coverage does not count the ones never run as checked."""
    from autogk_git.loop.verdict import PairedRatioRule

    p, t, bench = bench_of_a_change(project, "MASK = True", "MASK = False")  # n=50: nothing written
    n_of = {w["uuid"]: w["axes"]["n"] for w in t.workloads}
    stage = bench["stages"]["ab"]
    assert list(bench["stages"]) == ["ab"] and not bench["correct"]
    cand_st = {n_of[u]: w["status"] for u, w in stage["workloads"]["candidate"].items()}
    # 4096 may fail too: its unlisted-shape check (a size between the listed ones) is masked as well.
    assert cand_st[50] == "INCORRECT_NUMERICAL" and cand_st[4096] in ("PASSED", "INCORRECT_NUMERICAL")
    assert {cand_st[n] for n in (100, 333, 1000)} == {"NOT_RUN"}
    assert {w["status"] for w in stage["workloads"]["parent"].values()} == {"NOT_RUN"}
    assert stage["ab"]["rounds"] == 0 and stage["ab"]["stopped"] == "screen failed"
    assert bench["coverage"]["checked"] == 2
    v = PairedRatioRule().decide(bench, p.config)
    # n=4096 may fail too (its unlisted shape, drawn past 4096, is masked as well): the reason names one of the two.
    assert v["decision"] == "revert" and v["outcome"] == "incorrect", v
    assert "n=50" in v["reason"] or "n=4096" in v["reason"], v
