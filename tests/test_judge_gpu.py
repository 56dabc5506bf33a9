"""On a CUDA GPU: the judge reads outputs in the caller's stream order, cross-checks device time with
the caller stream's elapsed time, and clears persisting L2 before timing.

    python -m pytest -q -o addopts= -m gpu tests/test_judge_gpu.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from autogk_git.bench import runner  # noqa: E402
from autogk_git.bench.judge.status import Status  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
DEF = json.loads((DATA / "scale" / "definition.json").read_text())
BIG = {"uuid": "00000000-0000-4000-8000-0000000000b1", "axes": {"n": 1 << 24},
       "inputs": {"x": {"type": "random"}, "bias": {"type": "random"}, "scale": {"type": "scalar", "value": 1.5}}}
SMALL = dict(BIG, uuid="00000000-0000-4000-8000-0000000000b2", axes={"n": 4096})


def src(name: str) -> dict:
    return {"kernel.py": (DATA / "cheats" / f"{name}.py").read_text()}


def run(stage: str, sources: dict, workloads: list, env: dict | None = None, **settings) -> dict:
    s = {"device": "cuda", "trials": 3, "reps": 10, "warmup": 2, "min_rounds": 3, "max_rounds": 3,
         "timer": "cupti", **settings}
    if stage != "quick":
        s["timed"] = True
    job = {"version": 1, "stage": stage, "definition": DEF, "workloads": workloads, "sources": sources,
           "generator": None, "blob_root": ".", "seed": 3, "settings": s}
    env = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, **(env or {})}
    return runner.run_worker(job, env, 300)


def test_outputs_are_read_in_the_callers_stream_order():
    out = run("quick", {"honest": src("torch_honest"), "triton": src("honest"), "side": src("side_stream")},
              [SMALL, BIG])
    for label in ("honest", "triton"):
        assert {r["status"] for r in out["labels"][label].values()} == {Status.PASSED}, out["labels"][label]
    for r in out["labels"]["side"].values():
        assert r["status"] == Status.INCORRECT_NUMERICAL, r
        assert "NaN" in r["message"] or "still held the random values" in r["message"], r  # the judge's fill


def test_work_off_the_callers_stream_while_timed_is_a_stream_order_status():
    # 64M elements (~330 us of device time a call): far above the host time of launching the call,
    # which is what the caller's stream sees of work left on a side stream. At 16M (~85 us) the two
    # were close enough on the H200 that 1 run in 3 passed the cheat (2026-11-30).
    huge = dict(BIG, uuid="00000000-0000-4000-8000-0000000000b3", axes={"n": 1 << 26})
    # Without the stress sets: their correctness calls catch this kernel before it is timed, and the
    # point here is the timed window's own check.
    out = run("stride", {"candidate": src("side_stream_when_timed")}, [huge], stress=False)
    r = out["labels"]["candidate"][huge["uuid"]]
    # Seen either way: as device time the caller's stream did not wait for, or as a kernel that ran
    # after the last timed call, beside the outputs' snapshot copies.
    # Or, with the judge's own copy of the outputs (witness.py), as outputs still unwritten when it
    # copied them after the kernel's end mark.
    assert (r["status"] == Status.STREAM_ORDER and ("another stream" in r["message"]
                                                    or "after the timed window" in r["message"])
            or r["status"] == Status.INCORRECT_NUMERICAL and "timed" in r["message"]), r
    honest = run("stride", {"candidate": src("torch_honest")}, [BIG])
    h = honest["labels"]["candidate"][BIG["uuid"]]
    assert h["status"] == Status.PASSED and h["latency_us"] > 5, h


def test_a_persisting_l2_carve_out_set_while_timed_is_caught():
    out = run("stride", {"candidate": src("pins_l2")}, [SMALL])
    r = out["labels"]["candidate"][SMALL["uuid"]]
    assert r["status"] == Status.L2_PERSISTING and "persisting-L2" in r["message"], r


def test_ab_with_two_kernel_processes_times_both():
    out = run("ab", {"parent": src("honest"), "candidate": src("torch_honest")}, [SMALL, BIG],
              min_rounds=3, max_rounds=6)
    for label in ("parent", "candidate"):
        for r in out["labels"][label].values():
            assert r["status"] == Status.PASSED and r.get("latency_us", 0) > 0, (label, r)
    assert out["ab"]["rounds"] >= 3 and out["attempts"] == 1


def test_a_kernel_that_patches_the_timer_in_its_process_is_tampered():
    # Timings are made in the kernel's process: halving torch.profiler's kernel times, or shrinking
    # the timer's L2 flush, would pass for a speedup. The seal made before the import catches both.
    for name, what in (("scales_profiler_times", "Interval.elapsed_us"), ("shrinks_flush", "_flush_n")):
        out = run("ab", {"parent": src("torch_honest"), "candidate": src(name)}, [BIG])
        r = out["labels"]["candidate"][BIG["uuid"]]
        assert r["status"] == Status.TAMPERED and what in r["message"], (name, r)
        assert out["labels"]["parent"][BIG["uuid"]]["status"] == Status.PASSED


@pytest.mark.parametrize("timer", ["cupti", "events", "cudagraph"])
def test_the_seal_lets_honest_kernels_through_on_every_timer(timer):
    out = run("ab", {"parent": src("honest"), "candidate": src("imports_dynamo")}, [SMALL, BIG], timer=timer)
    # Both labels' records first, the candidate's first: a label that failed while timed leaves the
    # other's record untimed ("not timed: the candidate failed here"), which alone says little.
    for label in ("candidate", "parent"):
        for u, r in out["labels"][label].items():
            print(f"SEAL {timer} {label} {u[-2:]}: {r['status']} latency {r.get('latency_us')} clock "
                  f"{r.get('witness_latency_us')} {r.get('clock')}; {str(r.get('message', ''))[:400]}")
    for label in ("candidate", "parent"):
        for r in out["labels"][label].values():
            assert r["status"] == Status.PASSED and r.get("latency_us", 0) > 0, (timer, label, r)


def test_work_left_past_the_timed_window_fails_on_the_gpu():
    # The timed calls only remember their work; it is done in later calls. The outputs are snapshotted
    # on the caller's stream right after the window, so what the judge reads is the poison.
    out = run("ab", {"parent": src("torch_honest"), "candidate": src("defers_past_window_gpu")}, [BIG])
    r = out["labels"]["candidate"][BIG["uuid"]]
    assert r["status"] in (Status.INCORRECT_NUMERICAL, Status.STREAM_ORDER) and "timed window" in r["message"], r
    assert r.get("ratio_vs_parent") is None
    assert out["labels"]["parent"][BIG["uuid"]]["status"] == Status.PASSED


@pytest.mark.parametrize("timer", ["cupti", "events"])
def test_a_kernel_that_moves_work_between_its_windows_calls_is_not_faster(timer):
    # Six of ten calls do 70 % of their work and the last call the rest: the same window as the parent's,
    # every output right at its end, and 0.7x by the calls' median (the old figure; above the byte floor).
    out = run("ab", {"parent": src("torch_honest"), "candidate": src("bunches_its_calls_gpu")}, [BIG], timer=timer)
    r = out["labels"]["candidate"][BIG["uuid"]]
    print(f"BUNCH {timer}: {r['status']} ratio {r.get('ratio_vs_parent')} latency {r.get('latency_us')} "
          f"samples {r.get('samples_us')}; {str(r.get('message', ''))[:300]}")
    assert r["status"] in (Status.PASSED, Status.TAMPERED), r
    assert r.get("ratio_vs_parent") is None or r["ratio_vs_parent"] > 0.93, r
    assert out["labels"]["parent"][BIG["uuid"]]["status"] == Status.PASSED


def test_a_kernel_that_skips_work_in_a_graphs_later_replays_is_not_faster():
    # Under the cudagraph timer (a person's choice, or CUPTI's fallback, which a kernel can bring about)
    # the same inputs are replayed into the same outputs: from its third execution on, 30 % of the
    # candidate's programs return at once and leave an earlier replay's (right) outputs. With three timed
    # replays and their median it read 0.7x of its honest twin; one timed replay now.
    cheat = src("skips_its_replays_gpu")
    twin = {"kernel.py": cheat["kernel.py"].replace("SKIP = 0.3", "SKIP = 0.0")}
    out = run("ab", {"parent": twin, "candidate": cheat}, [BIG], timer="cudagraph")
    r = out["labels"]["candidate"][BIG["uuid"]]
    print(f"REPLAYS: {r['status']} ratio {r.get('ratio_vs_parent')} latency {r.get('latency_us')}; "
          f"{str(r.get('message', ''))[:300]}")
    assert r["status"] in (Status.PASSED, Status.TAMPERED), r
    assert r.get("ratio_vs_parent") is None or r["ratio_vs_parent"] > 0.93, r
    assert out["labels"]["parent"][BIG["uuid"]]["status"] == Status.PASSED


def test_a_helper_process_of_the_kernels_own_on_the_gpu_is_tampering():
    # The helper holds a context and does nothing: what the judge sees is the context, listed by NVML, of a
    # process descending from the candidate's kernel process (tenants.Watch), whatever it computes.
    # On an H100 (2026-12-06) a kernel process's child could not make a CUDA context at all (cudaErrorOperatingSystem,
    # 304), with the sandbox and without it (AUTOGK_SANDBOX=0): the helper never started, and the watch's
    # positive path is unshown there (its NVML listing and its charge of a plain child were shown on the same machine).
    out = run("ab", {"parent": src("torch_honest"), "candidate": src("helper_process_gpu")}, [SMALL, BIG])
    for u, r in out["labels"]["candidate"].items():
        print(f"HELPER {u[-2:]}: {r['status']}; {str(r.get('message', ''))[:300]}")
        if r["status"] == Status.RUNTIME_ERROR and "the helper process did not start" in r.get("message", ""):
            pytest.xfail(f"a kernel's child cannot make a CUDA context here: {r['message'][-200:]}")
        assert r["status"] == Status.TAMPERED and "a process of its own" in r["message"], r
        assert r.get("ratio_vs_parent") is None


def test_a_name_added_to_the_device_timer_is_tampered():
    out = run("ab", {"parent": src("torch_honest"), "candidate": src("adds_getattribute")}, [BIG])
    r = out["labels"]["candidate"][BIG["uuid"]]
    assert r["status"] == Status.TAMPERED and "Timer:names" in r["message"], r


def test_a_kernel_cannot_lock_the_gpus_clocks():
    # The H200 machine runs the judge as root. A kernel's process that kept root's powers could lock
    # the GPU's clocks through NVML after its own calls and slow its parent's windows, which every
    # timer would count as the parent's. The planted kernel tries (and resets what it set); any power
    # it has shows as INCORRECT_NUMERICAL. Without root here, it has none either way.
    out = run("ab", {"parent": src("torch_honest"), "candidate": src("uses_root_powers")}, [SMALL])
    r = out["labels"]["candidate"][SMALL["uuid"]]
    assert r["status"] == Status.PASSED, r
    if os.geteuid() == 0:
        assert all(s.endswith("; capabilities dropped") for s in out["environment"]["sandbox"]), out["environment"]


def test_a_kernel_cannot_poison_the_judges_flush_in_its_triton_cache(tmp_path):
    # Two jobs of the same candidate, Triton's cache folder under tmp_path. In the first the candidate
    # overwrites the flush binary it finds in its own cache with a no-op lookalike; the second would load
    # it and time every call with its inputs in L2 (24 MB a call here, half the H200's L2). The flush now
    # compiles into the judge's own cache, outside the kernel's sandbox, and a kernel's own cache is
    # made afresh each job: nothing to find, nothing kept.
    mid = dict(BIG, uuid="00000000-0000-4000-8000-0000000000b4", axes={"n": 1 << 21})
    env_cache = {"TRITON_CACHE_DIR": str(tmp_path / "triton")}
    outs = [run("ab", {"parent": src("torch_honest"), "candidate": src("poisons_its_flush_cache")}, [mid],
                env=env_cache) for _ in range(2)]
    for out in outs:
        r = out["labels"]["candidate"][mid["uuid"]]
        assert r["status"] == Status.PASSED and r["ratio_vs_parent"] > 0.9, r
    assert list((tmp_path / "triton" / "autogk-judge").glob("*/_autogk_l2_flush.json"))


def test_a_kernel_cannot_leave_slow_binaries_for_its_turn_as_the_parent(tmp_path):
    # Job 1: the planted kernel, as the candidate, compiles its kernel and then replaces the binary in
    # its Triton cache with a slower one (the same kernel, each program repeating its work 8 times).
    # Job 2: the same source is the parent (kept, now the trunk) and an honest copy of its algorithm the
    # candidate. A parent that loaded job 1's binary would run ~8x slower and the copy would look
    # that much faster. A kernel's cache is now made afresh each job.
    env_cache = {"TRITON_CACHE_DIR": str(tmp_path / "triton")}
    first = run("ab", {"parent": src("honest"), "candidate": src("slows_itself_for_later")}, [SMALL, BIG],
                env=env_cache)
    for r in first["labels"]["candidate"].values():
        assert r["status"] == Status.PASSED, r
    second = run("ab", {"parent": src("slows_itself_for_later"), "candidate": src("honest")}, [SMALL, BIG],
                 env=env_cache)
    for r in second["labels"]["candidate"].values():
        assert r["status"] == Status.PASSED and r["ratio_vs_parent"] > 0.8, r


def test_a_process_outside_the_job_busy_on_the_gpu_is_named_in_the_clocks_failure():
    # Six jobs on one H200 made 60 of 126 honest candidates TAMPERED (2026-12-03): the judge's clock counts
    # whatever runs on the GPU. The status may stay; the message must name who else was there.
    import subprocess
    import sys
    busy = ("import torch, time\n"
            "a = torch.randn(8192, 8192, device='cuda'); end = time.time() + 120\n"
            "while time.time() < end:\n    a @ a; torch.cuda.synchronize()\n")
    stranger = subprocess.Popen([sys.executable, "-c", busy])
    try:
        out = run("ab", {"parent": src("honest"), "candidate": src("honest")}, [SMALL, BIG], min_rounds=3,
                  max_rounds=6)
    finally:
        stranger.kill()
        stranger.wait()
    recs = list(out["labels"]["candidate"].values()) + list(out["labels"]["parent"].values())
    failed = [r for r in recs if r["status"] in (Status.TAMPERED, Status.HARNESS_ERROR)
              and ("judge's own clock" in r["message"] or "busy with another process" in r["message"])]
    if not failed:
        pytest.skip(f"the stranger's work did not reach the judge's clock: {[r['status'] for r in recs]}")
    for r in failed:
        assert f"pid {stranger.pid} (" in r["message"] and "neither the judge nor its kernels" in r["message"], r


SA = Path(__file__).resolve().parent.parent / "autogk_git" / "examples" / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"


def test_a_sparse_attention_wrong_only_on_its_prefill_path_is_caught_by_an_unlisted_shape():
    # The contest set has at most 8 tokens; the starting kernel's own path from 264 tokens on is reached by
    # no listed workload. The target's AXIS_REACH lets the judge's unlisted shapes (one a workload, drawn
    # from its secret seed) go up to 1024 tokens: over the 23 workloads nearly every job runs 264 or more
    # (49 of 50 simulated draws; a second job if the first missed). The honest kernel passes them all.
    from autogk_git.bench.judge import stress
    definition = json.loads((SA / "definition.json").read_text())
    wls = [json.loads(l)["workload"] for l in (SA / "workloads.jsonl").read_text().splitlines()]
    honest = (SA / "kernel.py").read_text()
    anchor = "    if num_tokens == 0:\n        return\n"
    broken = honest.replace(anchor, anchor + "    if num_tokens >= 264:  # planted: a path no listed workload reaches\n"
                                             "        output.zero_()\n        lse.zero_()\n        return\n", 1)
    assert broken != honest
    caught = []
    for attempt in range(2):
        job = {"version": 1, "stage": "quick", "definition": definition, "workloads": wls,
               "generator": (SA / "inputs.py").read_text(), "blob_root": ".", "seed": 7 + attempt,
               "settings": {"device": "cuda", "trials": 1, "listed_axes": stress.listed_axes(definition, wls)},
               "sources": {"honest": {"kernel.py": honest}, "broken": {"kernel.py": broken}}}
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        out = runner.run_worker(job, env, 540)
        bad = {u: r for u, r in out["labels"]["honest"].items() if r["status"] != Status.PASSED}
        assert not bad, bad  # no honest kernel refused on the far shapes
        caught = [r for r in out["labels"]["broken"].values() if r["status"] != Status.PASSED]
        if caught:
            break
    assert caught and all(r["status"] == Status.INCORRECT_NUMERICAL for r in caught), caught
    assert any("num_tokens=" in r["message"] and "past the largest listed, 8" in r["message"] for r in caught), caught


def test_a_flush_figure_measured_beside_other_gpu_work_is_lowered_by_the_judges_quiet_one():
    """A kernel process measures its L2 flush before its kernel is imported, beside the other label's process
    starting on the same GPU; on an H100 (2026-12-06) that figure came out 78.8 us against 32.6 us for every
    flush of the honest window after it (2.4x), and an honest A/A candidate was TAMPERED by the flush floor.
    Here a timer's own figure is set to 2.4x a quiet one, as measured there: the window's honest flushes fall
    under half of it (TAMPERED, as on the old code), and pass against the judge's quiet figure (the
    `quiet_flush_us` a time request carries)."""
    from autogk_git.bench.judge import held, timer
    quiet = timer.DeviceTimer("cupti")
    busy = timer.DeviceTimer("cupti")
    q = quiet.quiet_flush_us()
    busy._flush_us = 2.4 * q
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    calls = [lambda: torch.mul(x, 2.0, out=y)] * 10
    with pytest.raises(held.TimerTampered):
        busy.time_calls(calls)
    t = busy.time_calls(calls, quiet_flush_us=q)
    assert t["us"] > 0, t


def test_a_kernel_that_holds_gpu_memory_does_not_cut_the_calls_a_round():
    # The candidate leaves 6 GiB free at its import. Read after that, the judge's free memory would cut BIG's
    # 10 timed calls a round (2 GiB of sets asked, ~200 MB a set) to about 4 (sampling.calls_within's
    # arithmetic); read before the kernels start, they stay 10. Whether the rounds then fit is the GPU's to
    # say: timed with its 10 calls, or not timed (out of memory: the verdict's coverage is then incomplete,
    # never a keep), never timed on windows the candidate shrank.
    out = run("ab", {"parent": src("honest"), "candidate": src("holds_gpu_memory")}, [BIG],
              timing_mem_bytes=2 << 30, reps=10)
    r = out.get("labels", {}).get("candidate", {}).get(BIG["uuid"])
    assert r is not None, out
    if "calls_per_round" in r:  # timed
        assert r["status"] == Status.PASSED and r["calls_per_round"] == 10 and "calls_asked" not in r, r
    else:  # checked, then not timed (on an H100, 2026-12-07: passed its checks, not timed)
        assert "out of memory" in json.dumps(out).lower(), (r.get("message"), out.get("labels", {}).get("parent"))
