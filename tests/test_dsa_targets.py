"""The bundled DSA targets: valid generated inputs, judging by meaning, and their starting kernels."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import random
from pathlib import Path

import pytest
import torch

from autogk_git.bench.judge import rules
from autogk_git.bench.job import numel

from conftest import REPO, SHARED, autogk, autogk_in, interpreted

EXAMPLES = REPO / "autogk_git" / "examples"
SA = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
IX = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
CPU_MAX_NUMEL = 1 << 20  # the interpret backend's default [bench] cpu_max_numel


def load(target: str, file: str):
    path = EXAMPLES / target / file
    spec = importlib.util.spec_from_file_location(f"{target}_{path.stem}_{os.getpid()}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def definition(target: str) -> dict:
    return json.loads((EXAMPLES / target / "definition.json").read_text())


def workloads(target: str, file: str = "workloads.jsonl") -> list[dict]:
    return [json.loads(line)["workload"] for line in (EXAMPLES / target / file).read_text().splitlines()]


def axes_of(target: str, wl_axes: dict) -> dict:
    d = definition(target)
    return {**{n: a["value"] for n, a in d["axes"].items() if a.get("type") == "const"}, **wl_axes}


def reference(target: str):
    ns: dict = {}
    exec(definition(target)["reference"], ns)
    return ns["run"]


def test_definitions_are_the_shared_ones_and_long_workloads_span_decode_prefill_and_cpu():
    for target in (SA, IX):
        if SHARED.is_dir():
            shared = SHARED / "definitions" / "dsa_paged" / f"{target}.json"
            assert definition(target) == json.loads(shared.read_text())
        wls = workloads(target, "workloads_long.jsonl")  # the long set (the default is contest-shaped)
        rows = [w["axes"].get("num_tokens", w["axes"].get("batch_size")) for w in wls]
        assert min(rows) == 1 and max(rows) >= 2048
        assert sum(numel(definition(target), w) <= CPU_MAX_NUMEL for w in wls) >= 3
    sa = load(SA, "inputs.py")
    contexts = [c for w in workloads(SA, "workloads_long.jsonl")
                for c in sa.layout(w["axes"]["num_tokens"], w["axes"]["num_pages"])[2]]
    assert min(contexts) < 2048 and max(contexts) > 120_000  # padded rows and ~128K contexts


# --- generators ---------------------------------------------------------------------------------------

def random_sa_axes(rng: random.Random) -> dict:
    if rng.random() < 0.6:  # decode: T sequences sharing P pages
        t = rng.randint(1, 4)
        return {"num_tokens": t, "num_pages": rng.randint(t, 2 * t + 3)}
    p = rng.randint(1, 3)  # prefill: more tokens than pages
    return {"num_tokens": rng.randint(p + 1, p + 8), "num_pages": p}


def test_sparse_attention_generator_makes_only_valid_indices_over_1000_workloads():
    gen = load(SA, "inputs.py")
    rng = random.Random(0)
    for n in range(1000):
        axes = random_sa_axes(rng)
        t, p = axes["num_tokens"], axes["num_pages"]
        idx = gen.sparse_indices(t, p, torch.Generator().manual_seed(n), "cpu").to(torch.int64)
        assert idx.shape == (t, 2048)
        pages, seq_of, ctx = gen.layout(t, p)
        valid = idx != -1
        assert bool(((idx >= 0) & (idx < 64 * p) | ~valid).all()), axes
        assert valid.sum(dim=1).tolist() == [min(2048, c) for c in ctx], axes  # -1 only in short contexts
        assert bool((valid[:, :-1] | ~valid[:, 1:]).all()), axes  # and only after the valid ids
        srt = torch.sort(torch.where(valid, idx, -1 - torch.arange(2048)), dim=1).values
        assert bool((srt[:, 1:] != srt[:, :-1]).all()), axes  # no id twice in a row
        # Sequences never share a page: each page is reached by the rows of one sequence only.
        seq = torch.tensor(seq_of)[:, None].expand_as(idx)[valid]
        page = idx[valid] // 64
        first = torch.full((p,), -1, dtype=torch.int64).scatter_reduce(0, page, seq, "amin", include_self=False)
        assert bool((first[page] == seq).all()), axes
        assert sum(pages) <= p
    x = gen.generate(axes_of(SA, {"num_tokens": 3, "num_pages": 7}), definition(SA), 1, "cpu")
    assert x["sparse_indices"].dtype == torch.int32 and x["sm_scale"] == pytest.approx(192 ** -0.5)


def random_ix_axes(rng: random.Random) -> dict:
    if rng.random() < 0.6:
        b = rng.randint(1, 6)
        m = rng.randint(1, 40)
        return {"batch_size": b, "max_num_pages": m, "num_pages": rng.randint(max(b, m), max(b, m) + 40)}
    m = rng.randint(1, 3)
    return {"batch_size": rng.randint(m + 1, min(64 * m, 40)), "max_num_pages": m, "num_pages": rng.randint(m, m + 3)}


def test_indexer_generator_makes_valid_tables_over_1000_workloads():
    gen = load(IX, "inputs.py")
    d = definition(IX)
    ref = reference(IX)
    rng = random.Random(1)
    for n in range(1000):
        axes = random_ix_axes(rng)
        b, m, p = axes["batch_size"], axes["max_num_pages"], axes["num_pages"]
        sl, table = gen.tables(b, m, p, torch.Generator().manual_seed(n), "cpu")
        assert sl.shape == (b,) and table.shape == (b, m) and sl.dtype == table.dtype == torch.int32
        sl, table = sl.to(torch.int64), table.to(torch.int64)
        assert bool((sl >= 1).all() and (sl <= 64 * m).all()), axes
        assert bool((table >= 0).all() and (table < p).all()), axes
        used = torch.arange(m)[None, :] < ((sl + 63) // 64)[:, None]
        srt = torch.sort(torch.where(used, table, -1 - torch.arange(m)), dim=1).values
        assert bool((srt[:, 1:] != srt[:, :-1]).all()), axes  # no page twice in one row
        # A page belongs to one sequence: rows reaching it agree on their sequence's first page.
        owner = table[:, :1].expand_as(table)[used]
        first = torch.full((p,), -1, dtype=torch.int64).scatter_reduce(0, table[used], owner, "amin",
                                                                      include_self=False)
        assert bool((first[table[used]] == owner).all()), axes
        if n % 100 == 0:  # whole input sets: the reference's ids are reachable, distinct, padded by the rule
            x = gen.generate(axes_of(IX, axes), d, n, "cpu")
            assert bool(torch.isfinite(gen.unpack_k_cache(x["k_index_cache_fp8"])).all())
            (want,) = ref(*[x[k] for k in d["inputs"]])
            rules.topk_set("topk_indices", want, want, lambda rows: gen.row_scores(x, axes, rows))


def test_generators_give_valid_data_for_axes_serving_never_produces():
    sa, ix = load(SA, "inputs.py"), load(IX, "inputs.py")
    for t, p in ((100, 1), (3, 0), (300, 2)):
        idx = sa.sparse_indices(t, p, torch.Generator().manual_seed(0), "cpu").to(torch.int64)
        ctx = sa.layout(t, p)[2]
        assert (idx != -1).sum(dim=1).tolist() == [min(2048, c) for c in ctx] and int(idx.max()) < 64 * max(p, 1)
    d, ref = definition(IX), reference(IX)
    for b, m, p in ((2, 10, 4), (300, 1, 1), (1, 3, 0), (2, 0, 3)):
        axes = axes_of(IX, {"batch_size": b, "max_num_pages": m, "num_pages": p})
        x = ix.generate(axes, d, 0, "cpu")
        assert bool((x["seq_lens"] <= 64 * min(m, p)).all()) and bool((x["block_table"] < max(p, 1)).all())
        (want,) = ref(*[x[k] for k in d["inputs"]])
        rules.topk_set("topk_indices", want, want, lambda rows: ix.row_scores(x, axes, rows))


def test_indexer_cache_packing_is_the_definitions_byte_layout():
    gen = load(IX, "inputs.py")
    ns: dict = {}
    exec(definition(IX)["reference"], ns)
    x = gen.generate(axes_of(IX, {"batch_size": 2, "max_num_pages": 3, "num_pages": 5}), definition(IX), 3, "cpu")
    theirs = ns["dequant_fp8_kv_cache"](x["k_index_cache_fp8"]).reshape(-1, 128)
    assert torch.equal(gen.unpack_k_cache(x["k_index_cache_fp8"]), theirs)
    # realistic: FP8 values use the format's range, scales are per token and differ
    raw = x["k_index_cache_fp8"].reshape(5, 64 * 132).view(torch.uint8)
    fp8 = raw[:, :64 * 128].contiguous().view(torch.float8_e4m3fn).float()
    assert fp8.abs().max() == 448.0
    assert raw[:, 64 * 128:].contiguous().view(torch.float32).unique().numel() == 5 * 64


def raw(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.element_size() == 1 else t


def test_generators_are_deterministic_by_seed():
    for target, axes, varies in ((SA, {"num_tokens": 3, "num_pages": 9}, "sparse_indices"),
                                 (IX, {"batch_size": 3, "max_num_pages": 9, "num_pages": 20}, "block_table")):
        gen, d = load(target, "inputs.py"), definition(target)
        a, b, c = (gen.generate(axes_of(target, axes), d, s, "cpu") for s in (7, 7, 8))
        for name in d["inputs"]:
            if isinstance(a[name], torch.Tensor):
                assert torch.equal(raw(a[name]), raw(b[name])), name
        assert not torch.equal(a[varies], c[varies])


def test_sparse_attention_logits_are_spread_not_uniform():
    x = load(SA, "inputs.py").generate(axes_of(SA, {"num_tokens": 2, "num_pages": 40}), definition(SA), 0, "cpu")
    idx = x["sparse_indices"][0]
    kc = x["ckv_cache"].reshape(-1, 512)[idx[idx >= 0].long()].float()
    logits = (x["q_nope"][0].float() @ kc.T) * x["sm_scale"]
    assert 1.0 < float(logits.std()) < 5.0


# --- judging by meaning, on the real targets ----------------------------------------------------------

@pytest.fixture(scope="module")
def indexer_case():
    gen, d = load(IX, "inputs.py"), definition(IX)
    axes = axes_of(IX, {"batch_size": 3, "max_num_pages": 48, "num_pages": 100})
    x = gen.generate(axes, d, 11, "cpu")
    (want,) = reference(IX)(*[x[k] for k in d["inputs"]])
    return gen, d, axes, x, want


def ix_judge(case, out):
    gen, d, axes, x, want = case
    return rules.judge("topk_indices", "int32", out, want, rules.declared(gen)["topk_indices"], x, axes, gen)


def test_indexer_judge_accepts_any_order_and_rejects_broken_sets(indexer_case):
    gen, d, axes, x, want = indexer_case
    assert int((want == -1).sum()) > 0 and int((want[0] != -1).sum()) == 2048  # one full row, padded rows
    ix_judge(indexer_case, want.flip(1).contiguous())
    ix_judge(indexer_case, want[:, torch.randperm(2048)].contiguous())
    broken = {}
    dup = want.clone()
    dup[0, 5] = dup[0, 6]
    broken["appears more than once"] = dup
    scores = gen.row_scores(x, axes, range(0, 1))[0]
    unreachable = want.clone()
    unreachable[0, 0] = int(torch.nonzero(~torch.isfinite(scores))[0])
    broken["not reachable"] = unreachable
    worst = want.clone()  # swap the best token for the row's worst reachable one
    chosen = set(want[0].tolist())
    finite = torch.nonzero(torch.isfinite(scores)).flatten().tolist()
    low = min((i for i in finite if i not in chosen), key=lambda i: float(scores[i]))
    best = max(range(2048), key=lambda j: float(scores[int(want[0, j])]))
    worst[0, best] = low
    broken["score"] = worst
    broken["expected 2048"] = torch.full_like(want, -1)
    for words, out in broken.items():
        with pytest.raises(rules.Mismatch, match=words):
            ix_judge(indexer_case, out)


def test_indexer_judge_accepts_another_tie_break(indexer_case):
    gen, d, axes, x, want = indexer_case
    # Make the row's best unchosen token tie with its worst chosen one: either is a right answer.
    tied = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in x.items()}
    scores = gen.row_scores(x, axes, range(0, 1))[0]
    chosen = want[0].tolist()
    last = min(chosen, key=lambda i: float(scores[i]))
    outside = max((i for i in torch.nonzero(torch.isfinite(scores)).flatten().tolist() if i not in set(chosen)),
                  key=lambda i: float(scores[i]))
    cache = tied["k_index_cache_fp8"].reshape(-1, 64 * 132)
    for dst, src in ((outside, last),):  # copy key bytes and scale of `last` onto `outside`
        pd, sd = divmod(dst, 64), divmod(src, 64)
        cache[pd[0], pd[1] * 128:(pd[1] + 1) * 128] = cache[sd[0], sd[1] * 128:(sd[1] + 1) * 128]
        cache[pd[0], 8192 + 4 * pd[1]:8192 + 4 * pd[1] + 4] = cache[sd[0], 8192 + 4 * sd[1]:8192 + 4 * sd[1] + 4]
    (ref_tied,) = reference(IX)(*[tied[k] for k in d["inputs"]])
    other = ref_tied.clone()
    row = other[0].tolist()
    pick = outside if last in row else last
    drop = last if last in row else outside
    other[0, row.index(drop)] = pick
    case = (gen, d, axes, tied, ref_tied)
    ix_judge(case, ref_tied)
    ix_judge(case, other)


def test_sparse_attention_judges_output_and_base2_lse():
    gen, d = load(SA, "inputs.py"), definition(SA)
    axes = axes_of(SA, {"num_tokens": 2, "num_pages": 8})
    x = gen.generate(axes, d, 4, "cpu")
    out, lse = reference(SA)(*[x[k] for k in d["inputs"]])
    declared = rules.declared(gen)
    assert set(declared) == {"output", "lse"}

    def check(o, l):
        rules.judge("output", "bfloat16", o, out, declared["output"], x, axes, gen)
        rules.judge("lse", "float32", l, lse, declared["lse"], x, axes, gen)
    check(out.clone(), lse.clone())
    with pytest.raises(rules.Mismatch, match="output lse"):
        check(out.clone(), lse * math.log(2.0))  # natural log instead of base 2
    with pytest.raises(rules.Mismatch, match="output lse"):
        check(out.clone(), lse + 0.01)
    with pytest.raises(rules.Mismatch, match="output output"):
        check(out * 1.1, lse.clone())


# --- the starting kernels, through the CPU interpreter ------------------------------------------------

KERNEL_CHECK = r"""
import importlib.util, json, sys
import torch
sys.path.insert(0, sys.argv[1])
from autogk_git.bench.judge import rules
root, target = sys.argv[2], sys.argv[3]
def load(f):
    spec = importlib.util.spec_from_file_location(f.split(".")[0], f"{root}/{target}/{f}")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
gen, ker = load("inputs.py"), load("kernel.py")
d = json.load(open(f"{root}/{target}/definition.json"))
ns = {}; exec(d["reference"], ns)
consts = {n: a["value"] for n, a in d["axes"].items() if a.get("type") == "const"}
for line in open(f"{root}/{target}/workloads.jsonl"):
    wl = json.loads(line)["workload"]
    total = sum(torch.Size([{**consts, **wl["axes"]}[a] for a in s["shape"]]).numel()
                for s in d["inputs"].values() if s.get("shape"))
    if total > (1 << 20):
        continue
    axes = {**consts, **wl["axes"]}
    x = gen.generate(dict(axes), d, 5, "cpu", workload=wl)
    args = [x[n] for n in d["inputs"]]
    want = ns["run"](*args)
    want = want if isinstance(want, tuple) else (want,)
    outs = [torch.full_like(w, float("nan")) if w.dtype.is_floating_point else torch.full_like(w, 77) for w in want]
    assert ker.run(*args, *outs) is None
    for (name, spec), o, w in zip(d["outputs"].items(), outs, want):
        rules.judge(name, spec["dtype"], o, w, rules.declared(gen).get(name), x, axes, gen)
    print("PASSED", wl["axes"])
if "sparse_indices" in d["inputs"]:  # -1 anywhere, and a row of padding only (0 and -inf)
    axes = {**consts, "num_tokens": 2, "num_pages": 4}
    x = gen.generate(dict(axes), d, 9, "cpu")
    idx = x["sparse_indices"]
    idx[0] = -1
    idx[1] = idx[1][torch.randperm(idx.shape[1], generator=torch.Generator().manual_seed(0))]
    args = [x[n] for n in d["inputs"]]
    want = ns["run"](*args)
    outs = [torch.full_like(w, float("nan")) for w in want]
    ker.run(*args, *outs)
    for (name, spec), o, w in zip(d["outputs"].items(), outs, want):
        rules.judge(name, spec["dtype"], o, w, rules.declared(gen).get(name), x, axes, gen)
    assert bool((outs[0][0] == 0).all()) and bool((outs[1][0] == float("-inf")).all())
    print("PADDING ANYWHERE PASSED")
"""


@pytest.mark.parametrize("target", [SA, IX])
def test_starting_kernel_passes_every_cpu_workload_in_the_interpreter(target):
    out = interpreted(KERNEL_CHECK, REPO, EXAMPLES, target, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    cpu = [w for w in workloads(target) if numel(definition(target), w) <= CPU_MAX_NUMEL]
    assert out.stdout.count("PASSED") - out.stdout.count("PADDING ANYWHERE") == len(cpu) >= 3
    assert ("PADDING ANYWHERE PASSED" in out.stdout) == (target == SA)


# --- init and the worker ------------------------------------------------------------------------------

@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent")
@pytest.mark.parametrize("target", [SA, IX])
def test_init_definition_recognises_a_bundled_dsa_definition(tmp_path, target):
    out = autogk(tmp_path, "init", "proj", "--definition", str(SHARED / "definitions" / "dsa_paged" / f"{target}.json"),
                 "--no-check", "--json")
    info = json.loads(out.stdout)
    assert info["needs_data"] == [] and f"kernels/{target}/inputs.py" in info["files"]
    tdir = tmp_path / "proj" / "kernels" / target
    for f in ("inputs.py", "kernel.py", "workloads.jsonl", "program.md"):
        assert (tdir / f).read_text() == (EXAMPLES / target / f).read_text()
    assert "bundled target" in out.stderr


def test_init_refuses_a_sampling_definition(tmp_path):
    d = {"name": "top_k_sampling_from_probs_v129280", "op_type": "sampling", "axes": {"b": {"type": "var"}},
         "inputs": {"probs": {"shape": ["b"], "dtype": "float32"}},
         "outputs": {"samples": {"shape": ["b"], "dtype": "int64"}},
         "reference": "def run(probs):\n    return probs\n"}
    (tmp_path / "s.json").write_text(json.dumps(d))
    out = autogk(tmp_path, "init", "proj", "--definition", str(tmp_path / "s.json"), check=False)
    assert out.returncode == 1 and "sampling" in out.stderr and "out of scope" in out.stderr
    assert "Traceback" not in out.stderr


def blob_workload(path: str) -> dict:
    return {"definition": SA, "workload": {
        "uuid": "b10b", "axes": {"num_tokens": 1, "num_pages": 4},
        "inputs": {"q_nope": {"type": "random"}, "q_pe": {"type": "random"}, "ckv_cache": {"type": "random"},
                   "kpe_cache": {"type": "random"},
                   "sparse_indices": {"type": "safetensors", "path": path, "tensor_key": "sparse_indices"},
                   "sm_scale": {"type": "scalar", "value": 0.125}}}}


def test_init_reads_blob_workloads_and_names_a_missing_blob(tmp_path):
    from safetensors.torch import save_file
    rel = f"blob/workloads/dsa_paged/{SA}/{SA}_b10b.safetensors"
    (tmp_path / "data").mkdir()
    wfile = tmp_path / "data" / "w.jsonl"
    wfile.write_text(json.dumps(blob_workload(rel)) + "\n")
    (tmp_path / "ds" / rel).parent.mkdir(parents=True)
    out = autogk_in(tmp_path, "init", "proj", "--definition", str(EXAMPLES / SA / "definition.json"),
                    "--workloads", str(wfile), "--blobs", str(tmp_path / "ds"), "--no-check", check=False)
    assert out.returncode == 1 and rel in out.stderr and "--blobs" in out.stderr
    indices = torch.full((1, 2048), -1, dtype=torch.int32)
    indices[0, :3] = torch.tensor([5, 130, 7])
    save_file({"sparse_indices": indices}, str(tmp_path / "ds" / rel))
    autogk_in(tmp_path, "init", "proj", "--definition", str(EXAMPLES / SA / "definition.json"),
              "--workloads", str(wfile), "--blobs", str(tmp_path / "ds"), "--no-check")
    tdir = tmp_path / "proj" / "kernels" / SA
    assert (tdir / "blobs" / Path(rel).name).is_file() and (tdir / "inputs.py").is_file()

    # The workload's own data wins over the generator, which fills the rest.
    from autogk_git.bench.judge import inputs as jinputs
    job = {"definition": definition(SA), "blob_root": str(tdir)}
    wl = json.loads((tdir / "workloads.jsonl").read_text().splitlines()[0])["workload"]
    vals = dict(zip(definition(SA)["inputs"], jinputs.Inputs(job, "cpu", load(SA, "inputs.py")).make(wl, 3)))
    assert torch.equal(vals["sparse_indices"], indices) and vals["sm_scale"] == 0.125
    assert vals["ckv_cache"].shape == (4, 64, 512)
