"""autogk's default comparison bands are never looser than FlashInfer-Bench's judge (the contest's).

FlashInfer-Bench's evaluators (its main branch: bench/config.py defaults, bench/utils.py
compute_error_stats, evaluators/dsa_topk_indexer.py) fail an element when |out - ref| > 1e-2 AND
|out - ref| / (|ref| + 1e-8) > 1e-2, with every element required to pass, for every output dtype and,
for the DSA indexer, on the sorted scores of the returned ids. `fib_rejects` below restates that rule;
each test checks that whatever it rejects autogk rejects too, and that honest kernels still pass.
"""
from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch

from autogk_git.bench.judge import rules

from conftest import REPO, interpreted

EXAMPLES = REPO / "autogk_git" / "examples"
SA = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
IX = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
FIB_ATOL = FIB_RTOL = 1e-2


def fib_rejects(out: torch.Tensor, ref: torch.Tensor) -> bool:
    """FlashInfer-Bench's element rule: some finite element is off by more than atol and by more than rtol."""
    x, y = out.to(torch.float32), ref.to(torch.float32)
    finite = torch.isfinite(x) & torch.isfinite(y)
    d = (x - y).abs()
    bad = finite & (d > FIB_ATOL) & (d / (y.abs() + 1e-8) > FIB_RTOL)
    return bool(bad.any())


def autogk_rejects(fn, *args, **kw) -> bool:
    try:
        fn(*args, **kw)
    except rules.Mismatch:
        return True
    return False


def load(target: str, file: str):
    path = EXAMPLES / target / file
    spec = importlib.util.spec_from_file_location(f"strict_{target}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def definition(target: str) -> dict:
    return json.loads((EXAMPLES / target / "definition.json").read_text())


def axes_of(target: str, axes: dict) -> dict:
    return {**{n: a["value"] for n, a in definition(target)["axes"].items() if a.get("type") == "const"}, **axes}


def reference(target: str):
    ns: dict = {}
    exec(definition(target)["reference"], ns)
    return ns["run"]


# --- the elementwise band ------------------------------------------------------------------------------

MAGNITUDES = torch.cat([torch.logspace(-4, 4, 161), -torch.logspace(-4, 4, 161)])


@pytest.mark.parametrize("dtype", sorted(rules.TOLERANCES))
def test_an_error_just_past_flashinfer_benchs_band_is_rejected_for_every_float_dtype(dtype):
    ref = MAGNITUDES.clone()
    band = torch.clamp(FIB_RTOL * ref.abs(), min=FIB_ATOL)
    out = ref + 1.001 * band * torch.sign(ref)
    assert fib_rejects(out[:1], ref[:1]) and fib_rejects(out[-1:], ref[-1:])
    with pytest.raises(rules.Mismatch, match=f"{ref.numel()} of {ref.numel()} elements outside") as e:
        rules.judge("output", dtype, out, ref)
    if dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):  # their own band is the wider: the cap says so
        assert "FlashInfer-Bench" in str(e.value)


def test_a_one_ulp_bf16_difference_passes_at_every_magnitude():
    # An honest bf16 kernel that accumulates in fp32 differs from the reference by rounding: one ulp.
    ref = MAGNITUDES.to(torch.bfloat16)
    up = (ref.view(torch.int16) + 1).view(torch.bfloat16)  # the next bf16 away from zero
    rules.judge("output", "bfloat16", up, ref)
    assert not fib_rejects(up, ref)


def test_a_target_that_names_its_own_tolerance_is_judged_by_it():
    spec = {"rule": "tolerance", "atol": 0.05, "rtol": 0.0}
    rules.judge("y", "bfloat16", torch.tensor([1.04]), torch.tensor([1.0]), spec)
    with pytest.raises(rules.Mismatch, match="FlashInfer-Bench"):
        rules.judge("y", "bfloat16", torch.tensor([1.04]), torch.tensor([1.0]))


# --- sparse attention: a decode kernel with a bf16 accumulator ----------------------------------------

def decode_attention(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, acc_dtype, block=64):
    """Flash-decoding as a kernel computes it (online softmax over blocks of 64 indices), with the output
    accumulator held in acc_dtype between blocks."""
    kc_all = ckv_cache.reshape(-1, ckv_cache.shape[-1]).float()
    kp_all = kpe_cache.reshape(-1, kpe_cache.shape[-1]).float()
    t_n, heads, dim = q_nope.shape
    out = torch.zeros(t_n, heads, dim, dtype=torch.bfloat16)
    for t in range(t_n):
        ids = sparse_indices[t][sparse_indices[t] != -1].long()
        m = torch.full((heads, 1), -math.inf)
        l = torch.zeros(heads, 1)
        acc = torch.zeros(heads, dim, dtype=acc_dtype)
        for s in range(0, ids.numel(), block):
            b = ids[s:s + block]
            logits = (q_nope[t].float() @ kc_all[b].T + q_pe[t].float() @ kp_all[b].T) * sm_scale
            m_new = torch.maximum(m, logits.amax(1, keepdim=True))
            alpha, p = torch.exp(m - m_new), torch.exp(logits - m_new)
            l = l * alpha + p.sum(1, keepdim=True)
            acc = (acc.float() * alpha + p @ kc_all[b]).to(acc_dtype)
            m = m_new
        if ids.numel():
            out[t] = (acc.float() / l).to(torch.bfloat16)
    return out


SA_CASES = [({"num_tokens": 2, "num_pages": 8}, 0), ({"num_tokens": 3, "num_pages": 40}, 1),
            ({"num_tokens": 1, "num_pages": 64}, 2)]


@pytest.mark.parametrize("axes,seed", SA_CASES)
def test_a_bf16_accumulator_decode_kernel_is_rejected_as_flashinfer_bench_rejects_it(axes, seed):
    gen, d = load(SA, "inputs.py"), definition(SA)
    ax = axes_of(SA, axes)
    x = gen.generate(dict(ax), d, seed, "cpu")
    args = [x[n] for n in d["inputs"]]
    want, _ = reference(SA)(*args)
    spec = rules.declared(gen)["output"]

    honest = decode_attention(*args, acc_dtype=torch.float32)
    rules.judge("output", "bfloat16", honest, want, spec, x, ax, gen)
    assert not fib_rejects(honest, want)

    bf16_acc = decode_attention(*args, acc_dtype=torch.bfloat16)
    assert fib_rejects(bf16_acc, want)  # the contest's judge says INCORRECT_NUMERICAL
    with pytest.raises(rules.Mismatch, match="output output: .* elements outside .*FlashInfer-Bench"):
        rules.judge("output", "bfloat16", bf16_acc, want, spec, x, ax, gen)


# --- the top-k indexer: ids picked by noisy scores ----------------------------------------------------

IX_CASES = [({"batch_size": 3, "max_num_pages": 48, "num_pages": 100}, s) for s in range(4)] + \
           [({"batch_size": 1, "max_num_pages": 64, "num_pages": 64}, s) for s in range(4)] + \
           [({"batch_size": 2, "max_num_pages": 48, "num_pages": 96}, s) for s in range(4)]


def noisy_topk_run(axes: dict, seed: int, noise: float, weight_scale: float, **band) -> tuple[bool, bool]:
    """(FlashInfer-Bench rejects, autogk rejects) for a kernel that picks its top-k by scores off by
    noise..1.5*noise relative, either sign; band: topk_set's tolerance arguments, if not its defaults."""
    gen, d = load(IX, "inputs.py"), definition(IX)
    ax = axes_of(IX, axes)
    x = gen.generate(dict(ax), d, seed, "cpu")
    x["weights"] = x["weights"] * weight_scale
    rows = axes["batch_size"]
    s = gen.row_scores(x, ax, range(rows)).float()
    g = torch.Generator().manual_seed(1000 + seed)
    sign = torch.where(torch.rand(s.shape, generator=g) < 0.5, -1.0, 1.0)
    noisy = s * (1 + sign * noise * (1 + 0.5 * torch.rand(s.shape, generator=g)))
    k = d["axes"]["topk"]["value"]
    reach = torch.isfinite(s).sum(1)

    def pick(scores: torch.Tensor) -> torch.Tensor:
        ids = torch.full((rows, k), -1, dtype=torch.int32)
        for r in range(rows):
            n = min(k, int(reach[r]))
            ids[r, :n] = scores[r].topk(n).indices.to(torch.int32)
        return ids

    out, want = pick(noisy), pick(s)

    def sorted_scores(ids: torch.Tensor) -> torch.Tensor:
        got = s.gather(1, ids.clamp(min=0).long()).masked_fill(ids < 0, -math.inf)
        return got.sort(dim=1, descending=True).values

    fib = fib_rejects(sorted_scores(out), sorted_scores(want))
    table = lambda rr: s[rr.start:rr.stop]  # noqa: E731
    return fib, autogk_rejects(rules.topk_set, "topk_indices", out, want, table, **band)


@pytest.mark.parametrize("weight_scale", [1.0, 90.0])  # the generator's folded weights; FIB's N(0,1) weights
def test_top_k_picked_by_2_to_3_percent_score_noise_is_rejected_wherever_flashinfer_bench_rejects_it(weight_scale):
    runs = [noisy_topk_run(a, s, 0.02, weight_scale) for a, s in IX_CASES]
    fib = [r[0] for r in runs]
    ours = [r[1] for r in runs]
    assert all(o for f, o in zip(fib, ours) if f), runs  # never looser than the contest
    if weight_scale > 1:  # scores as large as FlashInfer-Bench's random inputs make them: most runs fail there
        assert sum(fib) >= 8 and sum(ours) >= 8, runs


def test_the_band_before_the_cap_let_half_of_that_noise_through():
    # What the test above guards against: the earlier band (2 % of the score + 0.1 % of the row's max).
    runs = [noisy_topk_run(a, s, 0.02, 90.0, rtol=2e-2, atol=1e-3, contest=False) for a, s in IX_CASES]
    assert sum(1 for fib, before in runs if fib and not before) >= 3, runs


def test_top_k_picked_by_fp8_sized_score_noise_passes():
    # The H200's FP8 dot moved scores near rank 2048 by up to 0.6 %: a kernel that noisy is honest.
    for weight_scale in (1.0, 90.0):
        for a, s in IX_CASES:
            fib, ours = noisy_topk_run(a, s, 0.002, weight_scale)
            assert not fib and not ours, (a, s, weight_scale)


# --- the bundled starting kernels, through the CPU interpreter -----------------------------------------

HONEST = r"""
import importlib.util, json, sys
import torch
sys.path.insert(0, sys.argv[1])
from autogk_git.bench.judge import rules
root = sys.argv[2]
def load(target, f):
    spec = importlib.util.spec_from_file_location(f"{target}_{f.split('.')[0]}", f"{root}/{target}/{f}")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
def fib_rejects(o, r):
    x, y = o.float(), r.float(); d = (x - y).abs(); fin = torch.isfinite(x) & torch.isfinite(y)
    return bool((fin & (d > 1e-2) & (d / (y.abs() + 1e-8) > 1e-2)).any())
for target, axes in json.loads(sys.argv[3]):
    d = json.load(open(f"{root}/{target}/definition.json"))
    ns = {}; exec(d["reference"], ns)
    ax = {**{n: a["value"] for n, a in d["axes"].items() if a.get("type") == "const"}, **axes}
    try:
        gen = load(target, "inputs.py")
        x = gen.generate(dict(ax), d, 3, "cpu")
    except FileNotFoundError:
        gen, g = None, torch.Generator().manual_seed(3)
        x = {n: torch.randn([ax[a] for a in s["shape"]], generator=g).to(getattr(torch, s["dtype"]))
             for n, s in d["inputs"].items()}
    args = [x[n] for n in d["inputs"]]
    want = ns["run"](*args)
    want = want if isinstance(want, tuple) else (want,)
    outs = [torch.full_like(w, float("nan")) if w.dtype.is_floating_point else torch.full_like(w, 77) for w in want]
    load(target, "kernel.py").run(*args, *outs)
    for (name, spec), o, w in zip(d["outputs"].items(), outs, want):
        rule = rules.declared(gen).get(name) if gen else None
        rules.judge(name, spec["dtype"], o, w, rule, x, ax, gen)
        if o.dtype.is_floating_point:
            assert not fib_rejects(o, w), (target, name)
    print("HONEST PASSED", target)
"""


def test_the_bundled_starting_kernels_pass_the_capped_bands_in_the_interpreter():
    cases = [["rmsnorm_h4096", {"batch_size": 16}], [SA, {"num_tokens": 2, "num_pages": 8}],
             [IX, {"batch_size": 3, "max_num_pages": 48, "num_pages": 100}]]
    out = interpreted(HONEST, REPO, EXAMPLES, json.dumps(cases))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("HONEST PASSED") == 3
