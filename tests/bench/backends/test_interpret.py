"""The CPU interpreter's budget for the extra correctness calls (backends/interpret.py: light_checks):
workloads over [bench] cpu_extra_checks_max_numel get one N(0,1) set, the job's smallest always the whole
battery, and what ran is said in each record and in the verdict's line."""
from __future__ import annotations

import json
from types import SimpleNamespace

from autogk_git.bench.backends.interpret import InterpretBackend, light_checks
from autogk_git.bench.judge import stress
from autogk_git.config import SCHEMA
from autogk_git.loop.verdict import coverage_line
from conftest import DATA, REPO

EXAMPLE = REPO / "autogk_git" / "examples" / "rmsnorm_h4096"
RMS_DEF = json.loads((EXAMPLE / "definition.json").read_text())
RMS_WLS = [json.loads(l)["workload"] for l in (EXAMPLE / "workloads.jsonl").read_text().splitlines()]
BATCH = {w["uuid"]: w["axes"]["batch_size"] for w in RMS_WLS}


def config(**bench):
    return SimpleNamespace(bench=SimpleNamespace(**{**{k: key.default for k, key in SCHEMA["bench"].items()},
                                                    **bench}))


def job(workloads: list[dict], kernels: dict[str, str]) -> dict:
    return {"stage": "quick", "definition": RMS_DEF, "workloads": workloads, "generator": None, "blob_root": ".",
            "seed": 5, "settings": {"trials": 2, "listed_axes": stress.listed_axes(RMS_DEF, RMS_WLS)},
            "sources": {label: {"kernel.py": src} for label, src in kernels.items()}}


def test_the_default_budget_spares_the_largest_cpu_workloads_of_the_bundled_rmsnorm_and_never_the_smallest():
    runnable = [w for w in RMS_WLS if BATCH[w["uuid"]] <= 250]  # those under the default cpu_max_numel
    assert InterpretBackend(config()).eligible(RMS_DEF, RMS_WLS)[0] == runnable
    light = light_checks({"definition": RMS_DEF, "workloads": runnable},
                         config().bench.cpu_extra_checks_max_numel)
    assert sorted(BATCH[u] for u in light) == [57, 128, 250]
    assert all("cpu_extra_checks_max_numel" in why for why in light.values())
    # A budget below every workload still leaves the smallest its full battery.
    tiny = light_checks({"definition": RMS_DEF, "workloads": runnable[::-1]}, 1)
    assert sorted(BATCH[u] for u in tiny) == [3, 16, 57, 128, 250]


def test_over_the_budget_one_set_is_judged_and_the_smallest_still_catches_a_precision_fitted_kernel():
    wls = RMS_WLS[:2]  # batch 1 and 3
    budget = 3 * 4096  # batch 3 (3 * 4096 + 4096 elements) is over it
    backend = InterpretBackend(config(cpu_extra_checks_max_numel=budget))
    got = backend.run(job(wls, {"honest": (EXAMPLE / "kernel.py").read_text(),
                                "fp16": (DATA / "cheats" / "fp16_sum_of_squares.py").read_text()}), 300)["labels"]
    small, large = wls[0]["uuid"], wls[1]["uuid"]
    assert got["honest"][small]["status"] == "PASSED"
    assert {"repeat", "scaled_rows", "outliers"} <= set(got["honest"][small]["stress"])
    assert "extra_checks" not in got["honest"][small]
    assert got["honest"][large]["status"] == "PASSED"
    assert got["honest"][large]["stress"] == [] and "deterministic" not in got["honest"][large]
    assert got["honest"][large]["extra_checks"].startswith("skipped: over [bench] cpu_extra_checks_max_numel")
    # Fitted to N(0,1): passes the one set it gets over the budget, and fails the smallest's stress sets.
    assert got["fp16"][large]["status"] == "PASSED"
    assert got["fp16"][small]["status"] == "INCORRECT_NUMERICAL"
    assert "on stress input set" in got["fp16"][small]["message"]


def test_the_verdict_line_counts_the_workloads_checked_on_one_set():
    cov = {"total": 11, "runnable": 6, "checked": 6, "unchecked": [], "light": ["a", "b", "c"]}
    assert coverage_line(cov) == ("6 of 11 workloads checked (3 on one input set only, over [bench] "
                                  "cpu_extra_checks_max_numel)")
    assert "one input set" not in coverage_line({**cov, "light": []})
