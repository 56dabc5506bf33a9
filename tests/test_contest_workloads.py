"""The bundled DSA targets' contest-shaped workload sets, the long sets beside them, the page-size-1
variant, and floors computed from the inputs by the targets' own formulas."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from autogk_git.bench.job import numel
from autogk_git.bench.judge import inputs as jinputs

from conftest import REPO, SHARED, autogk, autogk_in

EXAMPLES = REPO / "autogk_git" / "examples"
SA = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
PS1 = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1"
IX = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
VARIANT = EXAMPLES / SA / "variants" / PS1
CPU_MAX_NUMEL = 1 << 20  # the interpret backend's default [bench] cpu_max_numel


def load_gen(target: str):
    path = EXAMPLES / target / "inputs.py"
    spec = importlib.util.spec_from_file_location(f"contest_{target}_{os.getpid()}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def definition(folder: Path) -> dict:
    return json.loads((folder / "definition.json").read_text())


def lines(path: Path) -> list[dict]:
    return [json.loads(s) for s in path.read_text().splitlines() if s.strip()]


def workloads(path: Path) -> list[dict]:
    return [x["workload"] for x in lines(path)]


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo = math.floor(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


def make(folder: Path, target: str, wl: dict, seed: int) -> dict:
    """One input set as the judge makes it (its Inputs class: the generator gets the workload)."""
    d = definition(folder)
    vals = jinputs.Inputs({"definition": d}, "cpu", load_gen(target)).make(wl, seed, on_device=False)
    return dict(zip(d["inputs"], vals))


# --- the sets against the contest's distributions ---------------------------------------------------

def test_sparse_attention_default_set_is_contest_shaped():
    wls = workloads(EXAMPLES / SA / "workloads.jsonl")
    assert len(wls) == 23
    tokens = [w["axes"]["num_tokens"] for w in wls]
    assert set(tokens) == {1, 2, 6, 7, 8} and statistics.median(tokens) == 6
    runs = [r for w in wls for r in w["layout"]["runs"]]
    assert [len(w["layout"]["runs"]) for w in wls] == tokens  # one list of runs per token
    valid = [sum(r) for r in runs]
    assert 30 <= statistics.median(valid) <= 36  # contest: 33 of 2048
    assert 1089 * 0.95 <= percentile(valid, 90) <= 1089 * 1.05  # contest: 1089
    padded = sum(2048 - v > 1024 for v in valid) / len(valid)
    assert 0.85 <= padded <= 0.91  # contest: 88 % of tokens have over 1024 slots of -1
    # Contiguous runs: a context over one page is several runs, each but the last whole pages.
    assert all(all(n % 64 == 0 for n in r[:-1]) and 1 <= len(r) <= -(-sum(r) // 64) for r in runs)
    assert any(len(r) > 1 for r in runs)
    pools = [w["axes"]["num_pages"] for w in wls]
    assert pools.count(8462) == 20  # the contest's pool; three fit the CPU interpreter instead
    small = [w for w in wls if w["axes"]["num_pages"] != 8462]
    assert all(numel(definition(EXAMPLES / SA), w) <= CPU_MAX_NUMEL for w in small)


def test_indexer_default_set_is_contest_shaped():
    wls = workloads(EXAMPLES / IX / "workloads.jsonl")
    assert 24 <= len(wls) <= 32
    batch = [w["axes"]["batch_size"] for w in wls]
    pages = [w["axes"]["max_num_pages"] for w in wls]
    assert min(batch) == 1 and max(batch) == 31 and statistics.median(batch) == 14
    assert min(pages) == 1 and max(pages) == 91 and statistics.median(pages) == 32
    seq = [s for w in wls for s in w["layout"]["seq_lens"]]
    assert [len(w["layout"]["seq_lens"]) for w in wls] == batch
    assert all(w["axes"]["max_num_pages"] == -(-max(w["layout"]["seq_lens"]) // 64) for w in wls)
    assert max(seq) == 5806 and 80 <= statistics.median(seq) <= 110  # contest: median 94
    assert 0.96 <= sum(s < 2048 for s in seq) / len(seq) <= 0.98  # contest: 96.9 %
    all_short = sum(all(s < 2048 for s in w["layout"]["seq_lens"]) for w in wls) / len(wls)
    assert abs(all_short - 69 / 128) < 0.03
    pools = [w["axes"]["num_pages"] for w in wls]
    assert pools.count(11923) == len(wls) - 3
    small = [w for w in wls if w["axes"]["num_pages"] != 11923]
    assert all(numel(definition(EXAMPLES / IX), w) <= CPU_MAX_NUMEL for w in small)


def test_the_script_writes_the_committed_sets_from_its_seed(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "dsa_contest_workloads.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl"))
    assert written == sorted(Path(p) for p in (f"{SA}/workloads.jsonl", f"{IX}/workloads.jsonl",
                                               f"{SA}/variants/{PS1}/workloads.jsonl",
                                               f"{SA}/variants/{PS1}/workloads_long.jsonl"))
    for rel in written:
        assert (tmp_path / rel).read_bytes() == (EXAMPLES / rel).read_bytes(), rel


def test_the_ps1_sets_are_the_ps64_sets_in_tokens():
    for name in ("workloads.jsonl", "workloads_long.jsonl"):
        a, b = lines(EXAMPLES / SA / name), lines(VARIANT / name)
        assert len(a) == len(b) and all(x["definition"] == PS1 for x in b)
        for x, y in zip(a, b):
            ax = x["workload"]["axes"]
            assert y["workload"]["axes"] == {**ax, "num_pages": 64 * ax["num_pages"]}
            assert y["workload"].get("layout") == x["workload"].get("layout")
    if SHARED.is_dir():  # the variant's definition is FlashInfer-Bench's own
        shared = json.loads((SHARED / "definitions" / "dsa_paged" / f"{PS1}.json").read_text())
        assert definition(VARIANT) == shared


# --- the generator: the layout a workload line carries, the same work every trial ------------------

def runs_in(row: torch.Tensor) -> list[int]:
    """Lengths of the runs of consecutive ids in a row, -1 dropped."""
    ids = row[row >= 0].tolist()
    out = []
    for a, b in zip([None] + ids, ids):
        if a is not None and b == a + 1:
            out[-1] += 1
        else:
            out.append(1)
    return out


def test_sparse_attention_generator_lays_out_the_lines_runs_at_both_page_sizes():
    wls64 = workloads(EXAMPLES / SA / "workloads.jsonl")
    wls1 = workloads(VARIANT / "workloads.jsonl")
    for w64, w1 in list(zip(wls64, wls1))[:3]:  # the CPU-sized ones
        runs = w64["layout"]["runs"]
        a, b = make(EXAMPLES / SA, SA, w64, 1), make(EXAMPLES / SA, SA, w64, 2)
        for x in (a, b):
            idx = x["sparse_indices"]
            assert idx.shape == (len(runs), 2048) and idx.dtype == torch.int32
            for t, row in enumerate(idx):
                n = sum(runs[t])
                assert bool((row[:n] >= 0).all()) and bool((row[n:] == -1).all())
                # each listed run is a run of consecutive ids, starting a 64-token block
                starts = [sum(runs[t][:k]) for k in range(len(runs[t]))]
                assert all(int(row[s]) % 64 == 0 for s in starts)
                got = runs_in(row)
                assert sum(got) == n and len(got) <= len(runs[t])
            valid = idx[idx >= 0]
            assert valid.unique().numel() == valid.numel()  # no id twice, in any row
            assert int(valid.max()) < w64["axes"]["num_pages"] * 64
        assert not torch.equal(a["sparse_indices"], b["sparse_indices"])  # where: the seed's
        g = load_gen(SA)
        assert g.floor(a, w64["axes"], definition(EXAMPLES / SA)) == g.floor(b, w64["axes"], definition(EXAMPLES / SA))
        # page size 1: the same pool in tokens, the same ids from the same seed
        p1 = make(VARIANT, SA, w1, 1)
        assert p1["ckv_cache"].shape == (64 * w64["axes"]["num_pages"], 1, 512)
        assert torch.equal(p1["sparse_indices"], a["sparse_indices"])


def test_indexer_generator_uses_the_lines_seq_lens():
    for wl in workloads(EXAMPLES / IX / "workloads.jsonl")[:3]:
        x = make(EXAMPLES / IX, IX, wl, 4)
        assert x["seq_lens"].tolist() == wl["layout"]["seq_lens"]
        table, sl = x["block_table"].to(torch.int64), x["seq_lens"].to(torch.int64)
        used = torch.arange(table.shape[1])[None, :] < ((sl + 63) // 64)[:, None]
        assert table[used].unique().numel() == int(used.sum())  # sequences never share a page
    wl = dict(workloads(EXAMPLES / IX / "workloads.jsonl")[0])
    wl["layout"] = {"seq_lens": [5000] * wl["axes"]["batch_size"]}  # more than max_num_pages holds
    with pytest.raises(jinputs.HarnessFailure, match="max_num_pages"):
        maker = jinputs.Inputs({"definition": definition(EXAMPLES / IX)}, "cpu", load_gen(IX))
        jinputs.make_inputs(maker, wl, 0, False)


# --- init: the default sets, the named long set, the ps1 variant with no user code ---------------

@pytest.mark.parametrize("target", [SA, IX])
def test_init_example_gives_the_contest_set_and_long_is_selectable(tmp_path, target):
    autogk_in(tmp_path, "init", "demo", "--example", target, "--no-check")
    got = tmp_path / "demo" / "kernels" / target / "workloads.jsonl"
    assert got.read_text() == (EXAMPLES / target / "workloads.jsonl").read_text()
    assert all("layout" in w for w in workloads(got))
    autogk_in(tmp_path, "init", "demo-long", "--example", target, "--workload-set", "long", "--no-check")
    got = tmp_path / "demo-long" / "kernels" / target / "workloads.jsonl"
    assert got.read_text() == (EXAMPLES / target / "workloads_long.jsonl").read_text()


def test_an_unknown_workload_set_is_refused_with_the_sets_there_are(tmp_path):
    out = autogk_in(tmp_path, "init", "demo", "--example", SA, "--workload-set", "longest", "--no-check", check=False)
    assert out.returncode == 1 and "no workload set 'longest'" in out.stderr
    assert "default, long" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "demo").exists()
    out = autogk_in(tmp_path, "init", "demo", "--example", "rmsnorm_h4096", "--workload-set", "long", "--no-check",
                 check=False)
    assert out.returncode == 1 and "its sets: default" in out.stderr


def test_several_workload_sets_are_one_set_judged_together(tmp_path):
    # A change of the long calls only (the flagship's attempt 25) is judged on both sets at once, so the guard
    # holds the contest-shaped workloads and the long ones alike: the sets in the order named, as one.
    from autogk_git import scaffold
    src = scaffold.prepare(None, None, SA, None, lambda *_: None, None, "default,long")
    uuids = [line["workload"]["uuid"] for line in src.workloads[0]]
    want = [w["uuid"] for f in ("workloads.jsonl", "workloads_long.jsonl") for w in workloads(EXAMPLES / SA / f)]
    assert uuids == want and len(set(uuids)) == len(uuids) == 37
    # a uuid in two files is refused, the message naming where it was first (the other file, its real line)
    copy = tmp_path / "copy.jsonl"
    copy.write_text("\n" + (EXAMPLES / SA / "workloads.jsonl").read_text())
    with pytest.raises(Exception) as e:
        scaffold.read_workload_files([EXAMPLES / SA / "workloads.jsonl", copy], src.definition)
    assert f"{copy}:2: uuid {want[0]} is used twice (first at {EXAMPLES / SA / 'workloads.jsonl'}:1)" in str(e.value)
    for sets, why in (("default,default", "a set is named twice"), ("default,longest", "no workload set 'longest'")):
        out = autogk_in(tmp_path, "init", "demo", "--example", SA, "--workload-set", sets, "--no-check", check=False)
        assert out.returncode == 1 and why in out.stderr and "joined by commas" in out.stderr, out.stderr
        assert not (tmp_path / "demo").exists()


def test_init_definition_ps1_needs_no_user_code_and_its_first_check_passes(tmp_path):
    # The interpreter's limit admits the smallest workload alone, to keep the check short; the
    # other CPU-sized ones are the same shapes at two tokens.
    # The user's own copy of FlashInfer-Bench's definition (the shared dataset's where there is one).
    shared = SHARED / "definitions" / "dsa_paged" / f"{PS1}.json"
    mine = tmp_path / f"{PS1}.json"
    mine.write_text((shared if shared.is_file() else VARIANT / "definition.json").read_text())
    out = autogk(tmp_path, "init", "demo", "--definition", str(mine), "--json",
                 env={"AUTOGK_BENCH_CPU_MAX_NUMEL": "900000"}, timeout=900)
    info = json.loads(out.stdout)
    assert info["needs_data"] == []
    tdir = tmp_path / "demo" / "kernels" / PS1
    assert (tdir / "inputs.py").read_text() == (EXAMPLES / SA / "inputs.py").read_text()
    assert (tdir / "workloads.jsonl").read_text() == (VARIANT / "workloads.jsonl").read_text()
    assert "variant of the bundled target" in out.stderr
    base = info["baseline"]
    assert len(base["checked_workloads"]) == 1 and "correct on 1 workload(s)" in out.stderr
    assert base["correct"] is True
    assert base["stages"]["quick"]["workloads"]["candidate"][base["checked_workloads"][0]]["status"] == "PASSED"


# --- floors from the inputs ------------------------------------------------------------------------

def test_sparse_attention_floor_counts_the_rows_its_indices_touch():
    d = definition(EXAMPLES / SA)
    wl = next(w for w in workloads(EXAMPLES / SA / "workloads.jsonl")
              if w["axes"]["num_tokens"] == 1 and numel(d, w) <= CPU_MAX_NUMEL)
    axes = jinputs.resolve_axes(d, wl)
    maker = jinputs.Inputs({"definition": d}, "cpu", load_gen(SA))
    fl = jinputs.floor_of(d, axes, maker.gen_module, lambda: maker.make(wl, 3, on_device=False))
    n = sum(wl["layout"]["runs"][0])
    assert fl["bytes"] == n * 1152 + 16 * 576 * 2 + 2048 * 4 + 16 * (512 * 2 + 4)
    assert fl["flops"] == n * 2 * 16 * 1088
    assert fl["rule"].startswith("inputs.py floor: distinct selected KV rows")
    generic, rule = jinputs.floor_bytes(d, axes)
    assert rule == "outputs + integer inputs (gathering definition)" and generic < fl["bytes"] / 10


def test_indexer_floor_reads_keys_only_for_rows_over_2048():
    d, g = definition(EXAMPLES / IX), load_gen(IX)
    wl = {"uuid": "x", "axes": {"batch_size": 3, "max_num_pages": 40, "num_pages": 100},
          "layout": {"seq_lens": [100, 2048, 2500]}}
    axes = jinputs.resolve_axes(d, wl)
    x = g.generate(dict(axes), d, 0, "cpu", workload=wl)
    fl = g.floor(x, axes, d)
    table_entries = 2 + 32 + 40
    # only the 2500-token row reads its tokens' keys and scales, its query and weights, and is scored
    assert fl["bytes"] == 2500 * 132 + (64 * 128 + 64 * 4) + 3 * 4 + table_entries * 4 + 3 * 2048 * 4
    assert fl["flops"] == 2500 * 64 * 128 * 2
    wl["layout"] = {"seq_lens": [100, 2048, 40]}
    x = g.generate(dict(axes), d, 0, "cpu", workload=wl)
    assert g.floor(x, axes, d)["flops"] == 0  # no row needs scoring: every token is selected
    # rows of one sequence (the long set's prefill) share their pages: each token counts once
    wl = {"uuid": "p", "axes": {"batch_size": 300, "max_num_pages": 40, "num_pages": 40}}  # the axes' rule
    axes = jinputs.resolve_axes(d, wl)
    x = g.generate(dict(axes), d, 0, "cpu", workload=wl)
    sl = x["seq_lens"].tolist()
    assert sl == list(range(2261, 2561)) and int(x["block_table"].unique().numel()) == 40
    entries = sum(-(-n // 64) for n in sl)
    fl = g.floor(x, axes, d)
    assert fl["bytes"] == 2560 * 132 + 300 * (64 * 128 + 64 * 4) + 300 * 4 + entries * 4 + 300 * 2048 * 4
    assert fl["flops"] == sum(sl) * 64 * 128 * 2


def test_the_judges_floor_record_uses_the_targets_formula():
    d = definition(EXAMPLES / SA)
    wl = next(w for w in workloads(EXAMPLES / SA / "workloads.jsonl") if numel(d, w) <= CPU_MAX_NUMEL)
    job = {"definition": d, "seed": 7}
    maker = jinputs.Inputs(job, "cpu", load_gen(SA))
    rec = jinputs.floor_record(job, maker, 0, wl, 4e12)
    valid = sum(sum(r) for r in wl["layout"]["runs"])
    t = wl["axes"]["num_tokens"]
    want = valid * 1152 + t * (16 * 576 * 2 + 2048 * 4 + 16 * (512 * 2 + 4))
    assert rec == {"floor_us": pytest.approx(want / 4e12 * 1e6), "floor_rule": rec["floor_rule"], "floor_bytes": want,
                   "floor_flops": valid * 2 * 16 * 1088}
    assert rec["floor_rule"].startswith("inputs.py floor:")
    plain = jinputs.floor_record(job, jinputs.Inputs(job, "cpu", None), 0, wl, 4e12)  # no generator: generic
    assert plain["floor_rule"] == "outputs + integer inputs (gathering definition)" and plain["floor_flops"] is None


def test_floor_falls_back_to_the_generic_rule_and_says_so():
    d = definition(EXAMPLES / SA)
    axes = jinputs.resolve_axes(d, {"axes": {"num_tokens": 1, "num_pages": 2}})
    generic, rule = jinputs.floor_bytes(d, axes)
    assert jinputs.floor_of(d, axes, None, None) == {"bytes": generic, "flops": None, "rule": rule}
    assert jinputs.floor_of(d, axes, types.SimpleNamespace(), lambda: []) == {"bytes": generic, "flops": None,
                                                                               "rule": rule}

    def broken(inputs, axes, definition):
        raise KeyError("no such input")
    fl = jinputs.floor_of(d, axes, types.SimpleNamespace(floor=broken), lambda: [None] * 6)
    assert fl["bytes"] == generic and fl["rule"].startswith(rule) and "inputs.py floor failed" in fl["rule"]


def test_run_indices_places_each_run_as_its_docstring_says():
    """The one-scatter `run_indices` against the rule written out run by run (the loop it replaced): row t
    holds its runs of consecutive ids in order from column 0, then -1; each run starts at a block boundary
    the seed drew, never sharing a block with another. Same seed, same ids: nothing a workload's note or a
    fast reference's proof depends on moves."""
    import random
    gen_mod = load_gen(SA)

    def spelled_out(runs, blocks, seed):
        gen = torch.Generator().manual_seed(seed)
        t = len(runs)
        out = torch.full((t, gen_mod.TOPK), -1, dtype=torch.int32)
        flat = [(row, n) for row, lengths in enumerate(runs) for n in lengths]
        if not flat:
            return out
        sizes = torch.tensor([-(-n // gen_mod.PAGE) for _, n in flat], dtype=torch.int64)
        free = blocks - int(sizes.sum())
        order = torch.randperm(len(flat), generator=gen)
        gaps = torch.sort(torch.randint(0, free + 1, (len(flat),), generator=gen)).values
        starts = torch.empty(len(flat), dtype=torch.int64)
        starts[order] = gaps + torch.cumsum(sizes[order], 0) - sizes[order]
        fill = [0] * t
        for (row, n), b in zip(flat, starts.tolist()):
            out[row, fill[row]:fill[row] + n] = torch.arange(b * gen_mod.PAGE, b * gen_mod.PAGE + n, dtype=torch.int32)
            fill[row] += n
        return out

    rng = random.Random(7)
    cases = [([[]], 4), ([[1]], 1), ([[64, 65], [], [2048]], 40)]
    for _ in range(60):
        runs = []
        for _ in range(rng.randint(1, 8)):
            row, left = [], 2048
            for _ in range(rng.randint(0, 6)):
                n = rng.randint(1, min(left, rng.choice([3, 70, 700, 2048])))
                row.append(n)
                left -= n
                if left == 0:
                    break
            runs.append(row)
        cases.append((runs, sum(-(-n // 64) for r in runs for n in r) + rng.randint(0, 200)))
    for runs, blocks in cases:
        for seed in (0, 11):
            got = gen_mod.run_indices(runs, blocks, torch.Generator().manual_seed(seed), "cpu")
            assert torch.equal(got, spelled_out(runs, blocks, seed)), (runs, blocks, seed)
