"""How much faster is a target's fast reference (reference.py) than its definition's? Any device.

    python benchmarks/reference_speed.py [--targets NAME,...] [--device cuda|cpu] [--reps N]
                                         [--max-numel N] [--out FILE]

For each bundled target with a reference.py (default: all of them) and each of its workloads: the inputs
the judge would draw (the target's generator), then the definition's reference and the fast reference
each called --reps times after one warm-up call, timed end to end (synchronized on a GPU: what the judge
waits for), median seconds per call; and whether the two outputs agree under the target's compare rules
(as bench/refproof.py proves them). Workloads above --max-numel input elements are skipped (default: the
interpret backend's cpu_max_numel on the CPU, none on a GPU). Prints a table and the totals; --out writes
JSON.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from autogk_git import config  # noqa: E402
from autogk_git.bench.job import numel  # noqa: E402
from autogk_git.bench.judge import rules  # noqa: E402
from autogk_git.bench.judge.inputs import Inputs, as_tuple, load_reference, resolve_axes  # noqa: E402

EXAMPLES = REPO / "autogk_git" / "examples"


def timed(fn, args: list, reps: int, device: str) -> tuple[tuple, float]:
    def once():
        with torch.no_grad():
            out = as_tuple(fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
        if device == "cuda":
            torch.cuda.synchronize()
        return out
    out = once()  # warm-up (and the outputs compared)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def agree(definition: dict, wl: dict, args: list, got: tuple, want: tuple, gen) -> str:
    named, axes, compare = dict(zip(definition["inputs"], args)), resolve_axes(definition, wl), rules.declared(gen)
    for (name, spec), g, r in zip(definition["outputs"].items(), got, want):
        if g.dtype != r.dtype or g.shape != r.shape:
            return f"{name}: {g.dtype} {list(g.shape)} vs {r.dtype} {list(r.shape)}"
        try:
            rules.judge(name, spec["dtype"], g, r, compare.get(name), named, axes, gen)
        except (rules.Mismatch, rules.BadReference) as e:
            return str(e)[:120]
    exact = all(torch.equal(g, r) for g, r in zip(got, want))
    return "exact" if exact else "within rules"


def bench_target(name: str, device: str, reps: int, max_numel: int) -> list[dict]:
    folder = EXAMPLES / name
    definition = json.loads((folder / "definition.json").read_text())
    wls = [json.loads(line)["workload"] for line in (folder / "workloads.jsonl").read_text().splitlines() if line.strip()]
    gen = None
    if (folder / "inputs.py").exists():
        gen = types.ModuleType("autogk_inputs")
        exec(compile((folder / "inputs.py").read_text(), "inputs.py", "exec"), gen.__dict__)
    slow = load_reference(definition)
    fast = load_reference(definition, {"file": "reference.py", "source": (folder / "reference.py").read_text()})
    maker = Inputs({"definition": definition, "blob_root": str(folder)}, device, gen)
    rows = []
    for wl in wls:
        n = numel(definition, wl)
        row = {"target": name, "workload": wl["uuid"][:8], "axes": wl.get("axes", {}), "numel": n}
        if max_numel and n > max_numel:
            rows.append({**row, "skipped": f"{n} input elements > {max_numel}"})
            continue
        args = maker.make(wl, 1234)
        want, t_slow = timed(slow, args, reps, device)
        got, t_fast = timed(fast, args, reps, device)
        rows.append({**row, "definition_s": t_slow, "fast_s": t_fast, "speedup": t_slow / t_fast,
                     "agree": agree(definition, wl, args, got, want, gen)})
        print(line(rows[-1]), flush=True)
        del args, want, got
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def line(r: dict) -> str:
    axes = ",".join(f"{k}={v}" for k, v in r["axes"].items())
    if "skipped" in r:
        return f"{r['target'][:24]:24} {r['workload']} {axes:42} skipped: {r['skipped']}"
    return (f"{r['target'][:24]:24} {r['workload']} {axes:42} definition {r['definition_s'] * 1e3:10.2f} ms  "
            f"fast {r['fast_s'] * 1e3:9.2f} ms  x{r['speedup']:7.1f}  {r['agree']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(sorted(p.parent.name for p in EXAMPLES.glob("*/reference.py"))))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-numel", type=int, default=None)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    limit = a.max_numel if a.max_numel is not None else (config.parse({}).bench.cpu_max_numel if a.device == "cpu" else 0)
    print(f"device {a.device} ({torch.cuda.get_device_name() if a.device == 'cuda' else 'cpu'}), torch "
          f"{torch.__version__}, {a.reps} timed call(s) each after one warm-up, limit {limit or 'none'}")
    rows = []
    for name in a.targets.split(","):
        rows += bench_target(name, a.device, a.reps, limit)
        mine = [r for r in rows if r["target"] == name]
        done = [r for r in mine if "skipped" not in r]
        if done:
            s, f = sum(r["definition_s"] for r in done), sum(r["fast_s"] for r in done)
            print(f"{name}: {len(done)} workload(s) timed, {len(mine) - len(done)} skipped; one call on each: "
                  f"definition {s:.3f} s, fast {f:.3f} s (x{s / f:.1f})")
    if a.out:
        a.out.write_text(json.dumps({"device": a.device, "torch": torch.__version__, "rows": rows}, indent=1))
    return 0 if all(r.get("agree", "exact") in ("exact", "within rules") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
