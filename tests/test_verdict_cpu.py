"""Verdicts end to end on CPU (Triton interpreter): every runnable workload checked, harness errors never
pass, correct-but-untimed candidates held instead of merged, and `pack` refusing what was not vouched for."""
from __future__ import annotations

import json

import pytest

from conftest import autogk_in, git, notes_json

KERNEL = "kernels/scale/kernel.py"
FAST = {"AUTOGK_TRACKING_ENABLED": "0"}  # MLflow is tested elsewhere; these tests are about verdicts


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")  # the hooks' benchmarks too
WRONG_AT_333 = '''

_honest_run = run


def run(x, bias, scale, out):
    # Wrong only at n == 333: outside the quick subset (smallest, largest) and the stride subset.
    _honest_run(x, bias, scale + (0.5 if x.numel() == 333 else 0.0), out)
'''


def hand_experiment(project, slug: str, text: str) -> str:
    git(project, "checkout", "-q", "-b", f"autogk/scale/0001-{slug}")
    with open(project / KERNEL, "a") as f:
        f.write(text)
    git(project, "commit", "-qam", slug)  # the post-commit hook benchmarks it (foreground in tests)
    return git(project, "rev-parse", "HEAD").strip()


def test_a_kernel_wrong_only_off_the_subsets_is_reverted_and_show_says_where(project):
    sha = hand_experiment(project, "wrong-at-333", WRONG_AT_333)
    res = notes_json(project, sha)
    v = res["verdict"]
    assert v["decision"] == "revert" and v["outcome"] == "incorrect"
    assert "in full on workload n=333" in v["reason"] and "INCORRECT_NUMERICAL" in v["reason"]
    assert res["stages"]["quick"]["summary"]["candidate"]["correct"]  # the subsets alone would have passed it
    assert {w["axes"]["n"] for w in [json.loads(l)["workload"] for l in
                                     (project / "kernels/scale/workloads.jsonl").read_text().splitlines()]
            if w["uuid"] in res["stages"]["quick"]["workloads"]["candidate"]} == {50, 4096}
    out = autogk_in(project, "show", "1").stdout
    assert "judged on: 5 of 5 workloads checked" in out and "INCORRECT_NUMERICAL" in out
    # An open, incorrect experiment is not packed.
    bad = autogk_in(project, "pack", "autogk/scale/0001-wrong-at-333", "-o", "-", check=False)
    assert bad.returncode == 1 and "incorrect" in bad.stderr and "--force" in bad.stderr


def test_workloads_over_the_cpu_limit_are_named_in_the_verdict_show_and_doctor(project):
    env = {"AUTOGK_BENCH_CPU_MAX_NUMEL": "2500", **FAST}  # x and bias: 2 n elements, so n = 4096 is over
    out = json.loads(autogk_in(project, "iterate", "-n", "1", "--json", env=env).stdout)
    (e,) = out["experiments"]
    assert e["decision"] == "keep"  # the template merges correct untimed candidates
    ph = e["phases"]  # one at a time: where its time went (the parallel loop's are in tests/test_parallel.py)
    assert ph["benchmarks"] == 1 and ph["bench_s"] > 0 and ph["wait_s"] == 0 and min(ph["open_s"], ph["conclude_s"]) > 0
    v = notes_json(project, e["commit"])["verdict"]
    assert "4 of 5 workloads checked" in v["reason"] and "1 over [bench] cpu_max_numel" in v["reason"], v["reason"]
    assert "n=4096" in v["reason"] and not v["coverage"]["complete"]
    shown = autogk_in(project, "show", "1", env=env).stdout
    assert "not checked" in shown and "cpu_max_numel" in shown
    # Not judged on every workload: not the best, and not packed without --force.
    best = json.loads(autogk_in(project, "best", "--json").stdout)[0]
    assert best["experiment"] is None and "none judged on every workload" in best["basis"]
    refused = autogk_in(project, "pack", "-o", "-", check=False)
    assert refused.returncode == 1 and "unconfirmed" in refused.stderr
    doc = autogk_in(project, "doctor", check=False, env={**env, "AUTOGK_BENCH_BACKEND": "interpret"}).stdout
    assert "warning: target scale: 1 of 5 workload(s) cannot run on the interpret backend" in doc


def test_untimed_candidates_are_held_not_merged_until_asked(project):
    trunk = git(project, "rev-parse", "main").strip()
    hold = {"AUTOGK_BENCH_UNTIMED": "hold", **FAST}
    out = json.loads(autogk_in(project, "iterate", "-n", "2", "--json", env=hold).stdout)
    exps = out["experiments"]
    # The tuner's second one-step move from the unchanged trunk (MASK off) leaves the tail unwritten.
    assert [e["decision"] for e in exps] == ["untimed", "revert"], exps
    assert git(project, "rev-parse", "main").strip() == trunk  # no drift on correctness alone
    held = git(project, "for-each-ref", "--format=%(refname)", "refs/autogk/").split()
    assert held == ["refs/autogk/archive/scale/0002", "refs/autogk/untimed/scale/0001"]
    # Held configurations count as tried (no repeat), not as better (each starts from the unchanged trunk).
    tun = [notes_json(project, e["commit"]) for e in exps]
    assert tun[0]["parent"] == tun[1]["parent"] == trunk and tun[0]["tunables"] != tun[1]["tunables"]
    rows = json.loads(autogk_in(project, "log", "--json").stdout)
    assert [(r["state"], r["decision"]) for r in rows] == [("held", "untimed"), ("archived", "revert")]
    shown = autogk_in(project, "show", "1").stdout
    assert "held: refs/autogk/untimed/scale/0001" in shown and "autogk bench --rev" in shown
    refused = autogk_in(project, "pack", "refs/autogk/untimed/scale/0001", "-o", "-", check=False)
    assert refused.returncode == 1 and "held untimed" in refused.stderr
    # Nothing kept: the trunk's starting kernel was never judged; --force packs it and says so.
    refused = autogk_in(project, "pack", "-o", "-", check=False)
    assert refused.returncode == 1 and "no autogk result judged" in refused.stderr
    forced = json.loads(autogk_in(project, "pack", "--force", "-o", "-").stdout)
    assert "UNCONFIRMED" in forced["description"]
    # --merge-untimed merges, on correctness alone, and says so.
    out = json.loads(autogk_in(project, "iterate", "-n", "1", "--merge-untimed", "--json", env=hold).stdout)
    (e,) = out["experiments"]
    assert e["decision"] == "keep" and "[bench] untimed = merge" in e["reason"]
    assert git(project, "rev-parse", "main").strip() != trunk
    sol = json.loads(autogk_in(project, "pack", "-o", "-").stdout)  # judged on all 5: packed
    assert "correct on 5 of 5 workloads" in sol["description"] and "destination passing" in sol["description"]


def test_a_harness_error_is_reverted_not_kept(project):
    d = project / "kernels/scale/definition.json"
    definition = json.loads(d.read_text())
    # Broken only above the smallest workload (n=100), where the target's own check at `iterate` runs it:
    # the judge meets it while benchmarking, a harness error.
    definition["reference"] = ("import torch\n\n\ndef run(x, bias, scale):\n    if x.numel() > 100:\n"
                               "        raise RuntimeError('reference broke')\n    return x * scale + bias\n")
    d.write_text(json.dumps(definition, indent=2))
    git(project, "commit", "-qam", "a broken reference")
    out = json.loads(autogk_in(project, "iterate", "-n", "1", "--json", env=FAST).stdout)
    (e,) = out["experiments"]
    assert e["decision"] == "revert" and e["reason"].startswith("harness error: HARNESS_ERROR"), e
    assert "reference broke" in e["reason"]
    refused = autogk_in(project, "pack", "refs/autogk/archive/scale/0001", "-o", "-", check=False)
    assert refused.returncode == 1 and "reverted (archived)" in refused.stderr
