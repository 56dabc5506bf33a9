"""Cheat: honest work, but at import it looks in its own Triton cache (TRITON_CACHE_DIR, the one folder
its sandbox lets it write) for the judge's L2 flush kernel, compiled there before the kernel was
imported, and replaces its binary with that of a lookalike that flushes nothing. This job's flush is
already loaded; the next job of the same kernel (a retry, `autogk bench --rev`, a re-timing against a
newer trunk) would load the poisoned binary: every timed call then runs with its inputs still in L2,
and the judge's clock, which brackets the flushes too, confirms the shorter window. With the flush
compiled in a cache of the judge's own, there is nothing here to poison."""
import os
import pathlib

import torch
import triton
import triton.language as tl


@triton.jit
def _autogk_l2_flush(ptr, n, BLOCK: tl.constexpr):  # the judge's name and signature, no work
    pass


POISONED = []
if torch.cuda.is_available() and os.environ.get("TRITON_CACHE_DIR"):
    try:
        buf = torch.empty(4096, dtype=torch.int32, device="cuda")
        fake = _autogk_l2_flush.warmup(buf, 4096, BLOCK=4096, grid=(1,))
        for meta in pathlib.Path(os.environ["TRITON_CACHE_DIR"]).glob("*/_autogk_l2_flush.json"):
            cubin = meta.with_suffix(".cubin")
            if cubin.exists() and cubin.read_bytes() != fake.asm["cubin"]:
                cubin.write_bytes(fake.asm["cubin"])
                POISONED.append(str(cubin))
    except Exception:  # noqa: BLE001 - a Triton whose cache looks otherwise: nothing poisoned
        pass


def run(x, bias, scale, out):
    torch.add(x * scale, bias, out=out)
