"""Where one busy sparse-attention program's microseconds go: %globaltimer at each stage, per program.

Reads the flagship trunk's kernel file (attempt 20's layout: `_attend_block`, one program per (token,
block) with a one-trip loop), writes a copy whose attention kernel stores the GPU's global timer (ns) at
its start, after its block's ids (n_mine known), after the gathered rows' first dot (the row max), after
the second dot (the accumulator) and after its stores, then calls it after the judge's kind of flush on
rows of VALID valid ids. Beside it, the same launch's CUPTI duration. Prints, per case, the medians over
the calls of: each busy program's stage deltas, the first program start to the last program end, and
the idle programs' own life.

    python benchmarks/sa_stages.py KERNEL.py [--reps 30] [--out FILE.json]

Needs torch, triton and a CUDA GPU.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dsa_bench import WriteFlush, _profiled_kernels  # noqa: E402
from sa_fixed_cost import inputs  # noqa: E402

NOW = '''
@triton.jit
def _now(dep):
    """The global timer (ns), read after `dep` is ready."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, is_pure=False,
                                     pack=1)

'''
EDITS = [
    ("def _attend_block(", "def _attend_block_timed(dbg_ptr, "),
    ("    tok = tl.program_id(0)  # fastest", "    t_start = _now(0.0)\n    tok = tl.program_id(0)  # fastest"),
    ("    if n_mine > 0:  # an idle", "    t_ids = _now(n_mine.to(tl.float32))\n    if n_mine > 0:  # an idle"),
    ("        for k in range(0, n_mine):", "        t_gather = t_ids\n        t_pv = t_ids\n        for k in range(0, n_mine):"),
    ("            m_new = tl.maximum(m_i, tl.max(s, axis=1))\n",
     "            m_new = tl.maximum(m_i, tl.max(s, axis=1))\n            t_gather = tl.max(_now(m_new), axis=0)\n"),
    ("            m_i = m_new\n", "            m_i = m_new\n            t_pv = tl.max(_now(tl.sum(acc, axis=1)), axis=0)\n"),
    ("            tl.store(part_lse_ptr + part * H + offs_h, lse)\n",
     "            tl.store(part_lse_ptr + part * H + offs_h, lse)\n        t_end = _now(0.0)\n"
     "        slot = dbg_ptr + (tok64 * NB + blk) * 6\n"
     "        tl.store(slot + 0, t_start)\n        tl.store(slot + 1, t_ids)\n        tl.store(slot + 2, t_gather)\n"
     "        tl.store(slot + 3, t_pv)\n        tl.store(slot + 4, t_end)\n"
     "        tl.store(slot + 5, t_end - t_end + 1)\n"  # a busy program (the busy count gone since attempt 24)
     "    else:\n        t_end = _now(0.0)\n        slot = dbg_ptr + (tok64 * NB + blk) * 6\n"
     "        tl.store(slot + 0, t_start)\n        tl.store(slot + 1, t_ids)\n        tl.store(slot + 4, t_end)\n"),
]


def timed_module(kernel: Path, where: Path):
    src = kernel.read_text()
    start, end = src.index("@triton.jit\ndef _attend_block"), src.index("@triton.jit\ndef _merge_blocks")
    body = src[start:end]
    acc = "acc" if "            acc = acc" in body else "acc0"  # attempt 22 keeps its accumulator in quarters
    for old, new in EDITS:
        new = new.replace("tl.sum(acc, axis=1)", f"tl.sum({acc}, axis=1)")
        if body.count(old) != 1:
            raise SystemExit(f"{kernel}: the attention kernel does not have this line once: {old.strip()!r}")
        body = body.replace(old, new)
    path = where / "sa_timed_kernel.py"
    path.write_text(src[:start] + NOW + body + src[end:])
    spec = importlib.util.spec_from_file_location("sa_timed_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def launch(mod, args, dbg):
    qn, qp, ckv, kpe, idx, sm_scale, out, lse = args
    t, heads, dc = qn.shape
    few = t <= mod.FEW_TOKENS
    bn = mod.FEW_BLOCK_N if few else mod.BLOCK_N
    warps = getattr(mod, "FEW_NUM_WARPS", mod.NUM_WARPS) if few else mod.NUM_WARPS  # attempt 23 on
    blocks = idx.shape[1] // bn
    part_o = torch.empty((t, blocks, heads, dc), dtype=torch.float32, device="cuda")
    part_lse = torch.empty((t, blocks, heads), dtype=torch.float32, device="cuda")
    mod._attend_block_timed[(t, blocks)](
        dbg, qn, qp, ckv, kpe, idx, out, lse, part_o, part_lse, float(sm_scale) * mod.LOG2E, ckv.numel() // dc,
        TOPK=idx.shape[1], H=heads, DC=dc, DP=qp.shape[-1], BLOCK_N=bn, DOT_DTYPE=mod._DOT_DTYPE,
        num_warps=warps, num_stages=mod.NUM_STAGES)
    return blocks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out")
    a = ap.parse_args()
    mod = timed_module(Path(a.kernel), Path(tempfile.mkdtemp()))
    flush = WriteFlush()
    flush_names = {n for n, _, _ in _profiled_kernels(flush)}
    rows = []
    for tokens, valid in ((1, 0), (1, 32), (1, 64), (8, 64), (8, 1024)):
        args = inputs(tokens, valid)
        dbg = torch.zeros((tokens * 64, 6), dtype=torch.int64, device="cuda")
        launch(mod, args, dbg)
        torch.cuda.synchronize()
        busy, spans, idle_life, cupti = [], [], [], []
        for _ in range(a.reps):
            dbg.zero_()

            def work() -> None:
                flush()
                launch(mod, args, dbg)
                flush()
            ks = [d for n, _, d in sorted(_profiled_kernels(work), key=lambda k: k[1]) if n not in flush_names]
            cupti.append(sum(ks))
            d = dbg.cpu().tolist()
            used = [r for r in d if r[0]]
            t0 = min(r[0] for r in used)
            spans.append((max(r[4] for r in used) - t0) / 1e3)
            for r in used:
                if r[5]:  # a busy program: its stages, from its own start
                    busy.append([(r[i] - r[0]) / 1e3 for i in (1, 2, 3, 4)] + [(r[0] - t0) / 1e3])
                else:
                    idle_life.append((r[4] - r[0]) / 1e3)
        med = (lambda xs: round(statistics.median(xs), 3) if xs else None)
        row = {"tokens": tokens, "valid": valid, "cupti_us": med(cupti), "span_us": med(spans),
               "idle_program_us": med(idle_life), "busy_programs_a_call": len(busy) // a.reps,
               "busy_us": {k: med([b[i] for b in busy]) for i, k in
                           enumerate(("ids", "gather_dot", "pv_dot", "end", "start_after_first"))},
               "busy_end_max_us": max((b[3] for b in busy), default=None)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
