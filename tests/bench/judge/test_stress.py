"""Stress input sets, the determinism check and unlisted shapes, through a real judge subprocess on CPU.

The N(0,1) draws alone passed a kernel fitted to them (an fp16 sum of squares in an RMSNorm); these
tests plant such kernels and check that a verdict rejects them and names the set that caught them."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from autogk_git.bench import runner
from autogk_git.bench.judge import stress
from conftest import BIN, DATA, REPO, git, notes_json

EXAMPLE = REPO / "autogk_git" / "examples" / "rmsnorm_h4096"
RMS_DEF = json.loads((EXAMPLE / "definition.json").read_text())
RMS_WLS = [json.loads(l)["workload"] for l in (EXAMPLE / "workloads.jsonl").read_text().splitlines()]
SCALE_DEF = json.loads((DATA / "scale" / "definition.json").read_text())
SCALE_WLS = [json.loads(l)["workload"] for l in (DATA / "scale" / "workloads.jsonl").read_text().splitlines()]
SA_DIR = REPO / "autogk_git" / "examples" / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
IX_DIR = REPO / "autogk_git" / "examples" / "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
ENV = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")


def judge(definition: dict, workloads: list[dict], kernels: dict[str, str], generator: str | None = None,
          **settings) -> dict:
    job = {"stage": "quick", "definition": definition, "workloads": workloads, "generator": generator,
           "blob_root": ".", "seed": 5, "settings": {"trials": 2, "device": "cpu", **settings},
           "sources": {label: {"kernel.py": src} for label, src in kernels.items()}}
    return runner.run_worker(job, ENV, 300)["labels"]


def cheat(name: str) -> str:
    return (DATA / "cheats" / f"{name}.py").read_text()


def test_an_rmsnorm_fitted_to_unit_rows_is_incorrect_on_the_stress_sets_and_the_honest_one_passes():
    wls = RMS_WLS[:2]  # batch 1 and 3: one program per row under the interpreter
    got = judge(RMS_DEF, wls, {"honest": (EXAMPLE / "kernel.py").read_text(),
                               "fp16": cheat("fp16_sum_of_squares")},
                listed_axes=stress.listed_axes(RMS_DEF, RMS_WLS))
    for w in wls:
        honest, fitted = got["honest"][w["uuid"]], got["fp16"][w["uuid"]]
        assert honest["status"] == "PASSED", honest
        assert {"repeat", "scaled_rows", "outliers"} <= set(honest["stress"]), honest
        assert honest["deterministic"] is True
        assert fitted["status"] == "INCORRECT_NUMERICAL", fitted
        assert "on stress input set" in fitted["message"] and "after the N(0,1) sets passed" in fitted["message"]
        assert "repeat" in fitted["stress"]  # the record says what ran before the failure
    assert "zero_rows" in got["honest"][wls[1]["uuid"]]["stress"]  # three rows: one of them zero
    # batch 3 and the listed 16: the unlisted shape lies between them
    (shape,) = [s for s in got["honest"][wls[1]["uuid"]]["stress"] if s.startswith("shape:batch_size=")]
    assert 3 < int(shape.split("=")[1]) < 16, shape
    assert "scaled_rows" in got["fp16"][wls[1]["uuid"]]["message"]


def test_an_rmsnorm_that_takes_the_variance_for_the_mean_square_is_incorrect_on_shifted_rows():
    # A red-team plant (2026-12-06): judged PASSED on every set while every set kept N(0,1)'s zero mean.
    wls = RMS_WLS[:2]
    got = judge(RMS_DEF, wls, {"honest": (EXAMPLE / "kernel.py").read_text(),
                               "var": cheat("variance_for_mean_square")},
                listed_axes=stress.listed_axes(RMS_DEF, RMS_WLS))
    for w in wls:
        assert got["honest"][w["uuid"]]["status"] == "PASSED", got["honest"][w["uuid"]]
        assert "shifted_rows" in got["honest"][w["uuid"]]["stress"]
        var = got["var"][w["uuid"]]
        assert var["status"] == "INCORRECT_NUMERICAL" and "shifted_rows" in var["message"], var


def test_an_rmsnorm_that_reads_bf16_as_fp16_is_incorrect_past_fp16s_range():
    """Right on N(0,1), on rows scaled to 10^3 and on outliers of 300 (the sets before past_fp16 pass it:
    on the old sets it was held correct); rows past 65504 become inf in fp16."""
    wls = RMS_WLS[:1]
    got = judge(RMS_DEF, wls, {"honest": (EXAMPLE / "kernel.py").read_text(), "fp16": cheat("loads_bf16_as_fp16")},
                listed_axes=stress.listed_axes(RMS_DEF, RMS_WLS))
    honest, fitted = got["honest"][wls[0]["uuid"]], got["fp16"][wls[0]["uuid"]]
    assert honest["status"] == "PASSED" and "past_fp16" in honest["stress"], honest
    assert fitted["status"] == "INCORRECT_NUMERICAL", fitted
    assert "on stress input set past_fp16" in fitted["message"], fitted["message"]
    assert {"scaled_rows", "outliers"} <= set(fitted["stress"]), fitted  # passed before it


def test_nondeterministic_and_shape_specialised_kernels_are_caught_and_the_honest_one_passes():
    wls = SCALE_WLS[:2]  # n = 100 and 1000; the listed values also hold 50, 333 and 4096
    got = judge(SCALE_DEF, wls, {"honest": cheat("torch_honest"), "noisy": cheat("nondeterministic"),
                                 "listed": cheat("listed_shapes_only"), "knows": cheat("knows_the_judges_shapes")},
                listed_axes=stress.listed_axes(SCALE_DEF, SCALE_WLS))
    # Right on every shape a fixed rule would try: the judge draws the unlisted value from its secret
    # seed (on the old rule both workloads passed; now both pass only when both draws hit one of the
    # six values it knows: about 3/232 x 3/3095)
    knows = [got["knows"][w["uuid"]] for w in wls]
    assert any(k["status"] == "INCORRECT_NUMERICAL" and "on a shape the workloads do not list" in k["message"]
               for k in knows), knows
    for w in wls:
        honest = got["honest"][w["uuid"]]
        assert honest["status"] == "PASSED" and honest["deterministic"] is True, honest
        noisy = got["noisy"][w["uuid"]]
        assert noisy["status"] == "INCORRECT_NUMERICAL", noisy
        assert "not deterministic: called twice on the same inputs" in noisy["message"]
        listed = got["listed"][w["uuid"]]
        assert listed["status"] == "INCORRECT_NUMERICAL", listed
        # its tail never written: NaN where the judge filled the outputs with NaN, else its random fill
        assert "on a shape the workloads do not list" in listed["message"]
        assert "NaN" in listed["message"] or "still held the random values" in listed["message"], listed
    (shape,) = [s for s in got["honest"][wls[0]["uuid"]]["stress"] if s.startswith("shape:n=")]
    assert 100 < int(shape.split("=")[1]) < 333, shape
    assert "between the listed 1000 and 4096" in got["listed"][wls[1]["uuid"]]["message"]


def test_a_kernel_that_computes_only_in_nan_filled_outputs_is_incorrect():
    # A red-team plant (2026-12-06): every checked call's outputs came NaN-filled, so a kernel could
    # tell the judge's calls from a user's and be right only there; it was judged PASSED everywhere.
    # Now three checked calls of four fill them with random values (from the OS: not predictable).
    wls = SCALE_WLS[:2]
    got = judge(SCALE_DEF, wls, {"honest": cheat("torch_honest"), "nan": cheat("computes_only_on_nan")},
                listed_axes=stress.listed_axes(SCALE_DEF, SCALE_WLS))
    for w in wls:
        assert got["honest"][w["uuid"]]["status"] == "PASSED", got["honest"][w["uuid"]]
        assert got["nan"][w["uuid"]]["status"] == "INCORRECT_NUMERICAL", got["nan"][w["uuid"]]


def test_stress_leaves_integer_literal_and_generated_inputs_alone():
    import torch
    definition = {"inputs": {"x": {"shape": ["n", "h"], "dtype": "float16"}, "idx": {"shape": ["n"], "dtype": "int32"},
                             "lit": {"shape": ["n", "h"], "dtype": "float32"}},
                  "axes": {"n": {"type": "var"}, "h": {"type": "const", "value": 8}}}
    wl = {"axes": {"n": 6}, "inputs": {"lit": {"type": "safetensors", "path": "a", "tensor_key": "k"}}}
    base = [torch.randn(6, 8).half(), torch.arange(6, dtype=torch.int32), torch.randn(6, 8)]
    for name in stress.SETS:
        got = stress.stress_set(name, definition, wl, base, 3, None, "cpu")
        if name == "past_fp16":  # nothing past fp16's range fits an fp16 tensor
            assert got is None
            continue
        assert torch.equal(got[1], base[1]) and torch.equal(got[2], base[2])
        assert not torch.equal(got[0], base[0]) and torch.isfinite(got[0]).all()
    x = stress.stress_set("past_fp16", definition, wl, [base[0].to(torch.bfloat16), *base[1:]], 3, None, "cpu")[0]
    assert x.dtype == torch.bfloat16 and torch.isfinite(x).all()
    assert (x.float().abs() > 65504).float().mean() > 0.25, x  # many values past fp16's range
    # not on fp32: an honest kernel's own rounding there fails an fp32 output's tolerance (the H100, 2026-12-06)
    assert stress.stress_set("past_fp16", definition, wl, [base[0].float(), *base[1:]], 3, None, "cpu") is None
    scaled = stress.stress_set("scaled_rows", definition, wl, base, 3, None, "cpu")[0].float()
    rms = scaled.pow(2).mean(-1).sqrt() / base[0].float().pow(2).mean(-1).sqrt()
    assert rms.max() > 100 and rms.min() < 0.01  # the scales span orders of magnitude
    gen = type("Gen", (), {"generate": staticmethod(lambda *a: {})})
    assert stress.stress_set("scaled_rows", definition, wl, base, 3, gen, "cpu") is None  # the generator's own
    gen.STRESS_INPUTS = ("x",)
    assert stress.stress_set("scaled_rows", definition, wl, base, 3, gen, "cpu") is not None  # opted in


def test_a_committed_precision_fitted_kernel_is_reverted_by_its_verdict(tmp_path, monkeypatch):
    """End to end: the fp16 RMSNorm committed as an experiment in a real project on the interpret backend."""
    monkeypatch.setenv("AUTOGK_TRACKING_ENABLED", "0")
    monkeypatch.setenv("AUTOGK_BENCH_CPU_MAX_NUMEL", "20000")  # batch 1 and 3 only: the interpreter is slow
    proj = tmp_path / "proj"
    subprocess.run([str(BIN / "autogk"), "init", str(proj), "--example", "rmsnorm_h4096", "--no-check"],
                   check=True, capture_output=True)
    git(proj, "checkout", "-q", "-b", "autogk/rmsnorm_h4096/0001-fp16-sum-of-squares")
    shutil.copyfile(DATA / "cheats" / "fp16_sum_of_squares.py", proj / "kernels" / "rmsnorm_h4096" / "kernel.py")
    git(proj, "commit", "-qam", "fp16 sum of squares")  # the post-commit hook benchmarks it (foreground)
    res = notes_json(proj, git(proj, "rev-parse", "HEAD").strip())
    v = res["verdict"]
    assert v["decision"] == "revert" and v["outcome"] == "incorrect", v
    assert "INCORRECT_NUMERICAL" in v["reason"], v["reason"]
    recs = [w for s in res["stages"].values() for w in s["workloads"]["candidate"].values()]
    assert recs and all(w["status"] == "INCORRECT_NUMERICAL" and "on stress input set" in w["message"]
                        for w in recs), recs
    assert all("stress" in w for w in recs)  # the note says which stress sets ran


def test_a_targets_own_stress_sets_are_checked_and_named(monkeypatch):
    """inputs.py's stress(axes, definition, seed, device) hook: its sets are judged like the judge's own."""
    import torch

    from autogk_git.bench.judge import checks, inputs

    class Target:
        @staticmethod
        def stress(axes, definition, seed, device):
            return {"huge_bias": {"bias": torch.full((axes["n"],), 1e6)}}

    monkeypatch.setattr(checks, "TARGET", Target)
    wl = SCALE_WLS[0]
    job = {"definition": SCALE_DEF, "workloads": [wl], "settings": {"trials": 1, "device": "cpu"}, "seed": 1}
    made = inputs.Inputs(job, "cpu", None)
    ref = inputs.load_reference(SCALE_DEF)

    def drops_large_bias(x, bias, scale, out):  # right while |bias| is small
        torch.add(x * scale, bias.clamp(-1e5, 1e5), out=out)

    ran: dict = {}
    with pytest.raises(checks.KernelFailure, match="on stress input set huge_bias"):
        checks.check_workload(drops_large_bias, 0, wl, job, made, ref, "cpu", ran=ran)
    assert ran["stress"][:3] == ["repeat", "scaled_rows", "outliers"]
    ran = {}
    checks.check_workload(lambda x, b, s, out: torch.add(x * s, b, out=out), 0, wl, job, made, ref, "cpu", ran=ran)
    assert "huge_bias" in ran["stress"]


def test_dsa_sparse_attention_fitted_to_the_sets_runs_is_incorrect_on_scattered_indices():
    """Every workload line's index runs start at a page boundary: a kernel that reads each page's first n
    slots is exact on all of them (held correct, 23 of 23, before this set). The target's own stress set
    keeps each row's count and scatters its ids over the pool and the row. (The unlisted shape, now also
    run, does not catch it on a 24-page pool: every token there selects its whole context.)"""
    definition = json.loads((SA_DIR / "definition.json").read_text())
    wls = [json.loads(l)["workload"] for l in (SA_DIR / "workloads.jsonl").read_text().splitlines()]
    small = [w for w in wls if w["axes"]["num_pages"] == 24][:1]  # 24-page pools: quick on the CPU
    honest = cheat("attends_page_prefixes").replace(
        "rows = torch.cat([p * page_size + torch.arange(int(n)) for p, n in zip(pages.tolist(), counts.tolist())])",
        "rows = ids")
    # One short at the end of the row (a loop bound of n - 1): its last entry is one of a row's many, whose
    # weight on random queries is under the tolerance; `ends_peaked` puts half the heads' weight on it.
    one_short = honest.replace("        ids = ids[ids >= 0]\n", "        ids = ids[ids >= 0]\n        ids = ids[:-1] if ids.numel() > 1 else ids\n")
    assert one_short != honest
    got = judge(definition, small, {"honest": honest, "prefix": cheat("attends_page_prefixes")},
                generator=(SA_DIR / "inputs.py").read_text(), listed_axes=stress.listed_axes(definition, wls))
    u = small[0]["uuid"]
    assert got["honest"][u]["status"] == "PASSED", got["honest"][u]
    assert any(s.startswith("shape:") for s in got["honest"][u]["stress"]), got["honest"][u]
    assert {"scattered_indices", "ends_peaked"} <= set(got["honest"][u]["stress"]), got["honest"][u]
    assert got["prefix"][u]["status"] == "INCORRECT_NUMERICAL", got["prefix"][u]
    assert "on stress input set scattered_indices (the target's own)" in got["prefix"][u]["message"], got["prefix"][u]
    # One short at the end of its row, on a token of ~1,500 entries (the axes' own rule, 24 pages): on the
    # usual draws the dropped entry weighs what one of many does (it passed 4 of 6 input sets on a full row,
    # 2026-12-06), on `ends_peaked` half the heads' weight is on it.
    import importlib.util

    import torch
    spec = importlib.util.spec_from_file_location("sagen", SA_DIR / "inputs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    ns: dict = {}
    exec(definition["reference"], ns)
    ns_short: dict = {}
    exec(one_short, ns_short)
    axes = {**{n: a["value"] for n, a in definition["axes"].items() if a.get("type") == "const"},
            "num_tokens": 1, "num_pages": 24}
    x = gen.generate(dict(axes), definition, 3, "cpu")
    names = list(definition["inputs"])

    def error(values: dict) -> float:
        args = [values[n] for n in names]
        want, _ = ns["run"](*args)
        out, lse = torch.empty_like(want), torch.empty(want.shape[:2])
        ns_short["run"](*args, out, lse)
        return float((out.float() - want.float()).abs().max())

    assert int((x["sparse_indices"] >= 0).sum()) > 1000
    peaked = gen.stress(axes, definition, 3, "cpu", x)["ends_peaked"]
    assert error({**x, **peaked}) > 0.5 > 0.1 > error(x) / 2, (error(x), error({**x, **peaked}))


def test_dsa_indexer_unlisted_shape_reaches_rows_longer_than_any_listed():
    """The contest set's longest row is 5806 tokens (91 pages): a kernel that stops scoring past 96 pages
    (6144 tokens) is right on all of it. The unlisted shape past the largest max_num_pages drops the
    workload's seq_lens, and the generator's own rule fills the longest row to the table's width."""
    import importlib.util
    import random

    import torch
    definition = json.loads((IX_DIR / "definition.json").read_text())
    wls = [json.loads(l)["workload"] for l in (IX_DIR / "workloads.jsonl").read_text().splitlines()]
    listed = stress.listed_axes(definition, wls)
    i, wl = next((i, w) for i, w in enumerate(wls) if w["axes"]["max_num_pages"] == max(listed["max_num_pages"]))
    spec = importlib.util.spec_from_file_location("ixgen", IX_DIR / "inputs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    pages = []
    for seed in range(40):
        # rotate the moved axis onto max_num_pages: the index picks which var axis moves first
        k = [n for n in listed if n in wl["axes"]].index("max_num_pages")
        got = stress.unlisted_shape(definition, wl, k, listed, gen, random.Random(seed))
        assert got is not None and "layout" not in got[0] and got[1].startswith("max_num_pages="), got
        pages.append(got[0]["axes"]["max_num_pages"])
    assert sum(p > 96 for p in pages) >= 30, pages  # past 6144 tokens most times, never one fixed value
    assert len(set(pages)) > 10, pages
    shape = {**wl, "axes": {**wl["axes"], "max_num_pages": max(pages)}}
    shape.pop("layout", None)
    axes = {**{n: a["value"] for n, a in definition["axes"].items() if a.get("type") == "const"}, **shape["axes"]}
    x = gen.generate(dict(axes), definition, 1, "cpu", workload=shape)
    assert int(x["seq_lens"].max()) > 96 * 64 >= max(max(w["layout"]["seq_lens"]) for w in wls), x["seq_lens"]
    assert x["seq_lens"].dtype == torch.int32


def _target(folder):
    import importlib.util
    definition = json.loads((folder / "definition.json").read_text())
    wls = [json.loads(l)["workload"] for l in (folder / "workloads.jsonl").read_text().splitlines()]
    spec = importlib.util.spec_from_file_location(f"gen_{folder.name}", folder / "inputs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return definition, wls, gen


def test_dsa_sparse_attention_unlisted_shapes_reach_the_prefill_path_on_a_gpu_only():
    """The contest set has at most 8 tokens; the starting kernel (and any kernel shaped like it) takes
    another path from 264 tokens on (`TARGET_PROGRAMS`), which no listed workload reaches: a kernel wrong
    only there passed every check when an unlisted shape reached twice the largest listed value (16
    tokens). The target's `AXIS_REACH` lets the judge's draw go up to 1024 tokens on a GPU: nearly every
    job (one unlisted shape a workload, drawn from the judge's secret seed) runs a shape of 264 or more.
    The interpreter keeps twice the largest (its cap on input elements is small, its time per program)."""
    import random
    definition, wls, gen = _target(SA_DIR)
    listed = stress.listed_axes(definition, wls)
    assert max(listed["num_tokens"]) == 8 and gen.AXIS_REACH["num_tokens"] >= 264
    reached, drawn = 0, set()
    for seed in range(20):
        r = random.Random(seed)
        got = [stress.unlisted_shape(definition, w, i, listed, gen, r) for i, w in enumerate(wls)]
        tokens = [g[0]["axes"]["num_tokens"] for g in got if g and g[1].startswith("num_tokens=")]
        assert tokens and max(tokens) <= 1024, tokens
        reached += any(t >= 264 for t in tokens)
        drawn.update(t for t in tokens if t > 8)
    assert reached >= 16 and len(drawn) > 20, (reached, sorted(drawn))
    cap = 1 << 21  # the interpreter's (backends/interpret.unlisted_cap)
    for seed in range(10):
        r = random.Random(seed)
        got = [stress.unlisted_shape(definition, w, i, listed, gen, r, cap) for i, w in enumerate(wls)]
        assert all(g[0]["axes"]["num_tokens"] <= 16 for g in got if g and g[1].startswith("num_tokens=")), got


def test_a_drawn_unlisted_value_is_odd_so_no_block_size_divides_it():
    """CI, 2026-12-06: the judge drew n = 1792 (28 x 64) and passed `listed_shapes_only`, a kernel right only
    on whole blocks of 64 outside the listed values; on the old draw about one job in 32 did so."""
    import random
    listed = stress.listed_axes(SCALE_DEF, SCALE_WLS)
    drawn = []
    for seed in range(200):
        r = random.Random(seed)
        for i, w in enumerate(SCALE_WLS):
            got = stress.unlisted_shape(SCALE_DEF, w, i, listed, None, r)
            if got is not None:
                drawn.append(got[0]["axes"]["n"])
    assert len(drawn) >= 600 and len(set(drawn)) > 300, (len(drawn), len(set(drawn)))
    assert all(n % 2 == 1 and n not in listed["n"] for n in drawn), sorted(n for n in drawn if n % 2 == 0)
    # A definition whose constraints want n a multiple of 4: an odd multiple of 4, never of 8 (nor of 64)
    fours = {**SCALE_DEF, "constraints": [*SCALE_DEF.get("constraints", []), "n % 4 == 0"]}
    got = [stress.unlisted_shape(fours, w, i, listed, None, random.Random(seed))
           for seed in range(100) for i, w in enumerate(SCALE_WLS)]
    fitted = [g[0]["axes"]["n"] for g in got if g is not None]
    assert len(fitted) >= 300 and all(n % 8 == 4 for n in fitted), sorted(n for n in fitted if n % 8 != 4)


def test_without_a_declared_reach_an_unlisted_shape_goes_at_most_twice_the_largest():
    definition, wls, gen = _target(SA_DIR)
    listed = stress.listed_axes(definition, wls)
    del gen.AXIS_REACH
    import random
    for seed in range(10):
        r = random.Random(seed)
        got = [stress.unlisted_shape(definition, w, i, listed, gen, r) for i, w in enumerate(wls)]
        assert all(g[0]["axes"]["num_tokens"] <= 16 for g in got if g and g[1].startswith("num_tokens=")), got


def test_dsa_indexer_one_short_at_the_end_of_a_row_is_incorrect_on_last_token_tops():
    """An indexer that never scores a row's last token passed most usual input sets (the helper's run,
    2026-12-06: 6 of 8 seeds): the token ranks anywhere. The target's own set puts the row's top score,
    doubled, on its last token: the top-1 of the set, which no tie band excuses."""
    definition = json.loads((IX_DIR / "definition.json").read_text())
    wls = [json.loads(l)["workload"] for l in (IX_DIR / "workloads.jsonl").read_text().splitlines()]
    rows = [{"uuid": "00000000-0000-4000-8000-0000000000f2", "axes": {"batch_size": 2, "max_num_pages": 48,
             "num_pages": 96}, "layout": {"seq_lens": [3000, 500]}}]
    honest = cheat("skips_the_last_token").replace("            ids = ids[:-1]  # the bug\n", "")
    assert honest != cheat("skips_the_last_token")
    got = judge(definition, rows, {"honest": honest, "short": cheat("skips_the_last_token")},
                generator=(IX_DIR / "inputs.py").read_text(), listed_axes=stress.listed_axes(definition, wls))
    u = rows[0]["uuid"]
    assert got["honest"][u]["status"] == "PASSED" and "last_token_tops" in got["honest"][u]["stress"], got["honest"][u]
    assert got["short"][u]["status"] == "INCORRECT_NUMERICAL", got["short"][u]
    # whichever set caught it first: on the set itself the last token is the row's unique top
    import importlib.util
    spec = importlib.util.spec_from_file_location("ixgen2", IX_DIR / "inputs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    axes = {**{n: a["value"] for n, a in definition["axes"].items() if a.get("type") == "const"}, **rows[0]["axes"]}
    x = gen.generate(dict(axes), definition, 4, "cpu", workload=rows[0])
    x = {**x, **gen.stress(axes, definition, 4, "cpu", x)["last_token_tops"]}
    s = gen.row_scores(x, axes, range(0, 1))[0]
    last = int(x["block_table"][0, 2999 // 64]) * 64 + 2999 % 64
    top2 = s.topk(2).indices.tolist()
    assert top2[0] == last and float(s[top2[0]]) > 1.5 * float(s[top2[1]]), (top2, last)


def test_a_kernel_that_folds_the_listed_scalar_into_its_code_is_incorrect_on_other_scalars():
    """Every listed workload passes scale = 1.5; a kernel that ignores its `scale` argument and multiplies
    by 1.5 passed every check (the stress sets changed tensors only). The honest kernel passes the set."""
    got = judge(SCALE_DEF, SCALE_WLS[:1], {"honest": (DATA / "scale" / "kernel.py").read_text(),
                                           "folded": cheat("folds_a_scalar")})
    w = SCALE_WLS[0]["uuid"]
    assert got["honest"][w]["status"] == "PASSED" and stress.SCALARS in got["honest"][w]["stress"], got["honest"][w]
    folded = got["folded"][w]
    assert folded["status"] == "INCORRECT_NUMERICAL", folded
    assert f"on stress input set {stress.SCALARS}" in folded["message"], folded


@pytest.mark.slow(13)  # the sparse-attention target's sets through the judge in the interpreter
def test_dsa_sparse_attention_without_an_empty_row_guard_or_a_running_max_is_incorrect_on_the_targets_sets():
    """Two kernels right on every listed workload and on the earlier stress sets: one divides an empty
    row's zero sum (no workload leaves a token without a valid index: NaN there, where the reference gives
    0 and -inf), one exponentiates the logits without subtracting the running max (right while logits
    are a few units, inf past ~88). The target's `padding_row` and `large_logits` sets catch each."""
    definition = json.loads((SA_DIR / "definition.json").read_text())
    wls = [json.loads(l)["workload"] for l in (SA_DIR / "workloads.jsonl").read_text().splitlines()]
    small = [w for w in wls if w["axes"]["num_pages"] == 24][:1]
    start = (SA_DIR / "kernel.py").read_text()
    swaps = {
        "no_guard": [('    has = total > 0.0\n    lse = tl.where(has, m_safe + tl.log2(tl.where(has, total, 1.0)), float("-inf"))\n'
                      '    lse_safe = tl.where(has, lse, 0.0)\n', '    lse = m_safe + tl.log2(total)\n'),
                     ("w = tl.where(has, tl.exp2(ls - lse_safe), 0.0)", "w = tl.exp2(ls - lse)")],
        "no_max": [('m_i = tl.full([H], float("-inf"), dtype=tl.float32)', "m_i = tl.zeros([H], dtype=tl.float32)"),
                   ("            m_new = tl.maximum(m_i, tl.max(s, axis=1))\n"
                    "            m_safe = tl.where(m_new == float(\"-inf\"), 0.0, m_new)  # no valid entry seen yet\n"
                    "            alpha = tl.exp2(m_i - m_safe)\n"
                    "            p = tl.exp2(s - m_safe[:, None])\n"
                    "            l_i = l_i * alpha + tl.sum(p, axis=1)\n",
                    "            p = tl.exp2(s)\n            l_i = l_i + tl.sum(p, axis=1)\n"),
                   ("acc = acc * alpha[:, None] + tl.dot(p_hi, kc) + tl.dot(p_lo, kc)\n            m_i = m_new",
                    "acc = acc + tl.dot(p_hi, kc) + tl.dot(p_lo, kc)")],
    }
    kernels = {"start": start}
    for name, pairs in swaps.items():
        src = start
        for old, new in pairs:
            assert old in src, (name, old)
            src = src.replace(old, new)
        kernels[name] = src
    got = judge(definition, small, kernels, generator=(SA_DIR / "inputs.py").read_text(),
                listed_axes=stress.listed_axes(definition, wls))
    u = small[0]["uuid"]
    assert got["start"][u]["status"] == "PASSED", got["start"][u]
    assert {"padding_row", "large_logits"} <= set(got["start"][u]["stress"]), got["start"][u]
    for name, caught_by in (("no_guard", "padding_row"), ("no_max", "large_logits")):
        assert got[name][u]["status"] == "INCORRECT_NUMERICAL", got[name][u]
        assert f"on stress input set {caught_by} (the target's own)" in got[name][u]["message"], got[name][u]
