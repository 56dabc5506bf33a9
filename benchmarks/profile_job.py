"""Where one experiment's benchmark spends its time: a bundled target's kernel against itself (the ab
job an `autogk iterate` experiment runs), profiled in the judge and in both kernel processes.

    python benchmarks/profile_job.py --out DIR [--target rmsnorm_h4096 ...] [--runs 2] [--top 30]

Per target, `--runs` comparisons run one after the other (the first pays the Triton compiles, as the
first experiment of a loop does; later ones find them cached, as the loop's later experiments do).
The last one runs with AUTOGK_PROFILE_DIR set, so the judge and each kernel process write a cProfile
file; this prints each run's wall seconds and the judge's phases, then the top functions by
cumulative and by own wall seconds of each profile, and writes everything to DIR/profile_<target>.txt.
Needs torch, triton and a CUDA GPU for the local backend (else the CPU interpreter is used).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def profile_target(target: str, out: Path, runs: int, top: int) -> str:
    from aa_full import project

    from autogk_git.bench.stages import benchmark
    from autogk_git.project import Project
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        from autogk_git.bench.backends import local
        os.environ[local.LOCK_DIR_ENV] = tempfile.mkdtemp(prefix="autogk-prof-locks-")
    root = project(target)
    if not cuda:
        cfg = root / ".autogk.toml"
        cfg.write_text(cfg.read_text().replace('backend = "local"', 'backend = "interpret"'))
    p = Project(root)
    t = p.target(target)
    src = {"kernel.py": (t.dir / "kernel.py").read_text()}
    if cuda:
        backend = local.LocalBackend(p.config)
    else:
        from autogk_git.bench.backends import interpret
        backend = interpret.InterpretBackend(p.config)
    prof_dir = out / f"prof_{target}"
    prof_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"# {target} on {backend.name}"]
    for r in range(runs):
        if r == runs - 1:
            os.environ["AUTOGK_PROFILE_DIR"] = str(prof_dir)
        t0 = time.monotonic()
        res = benchmark(t, backend, src, src, p.config, seed=1000 + r)
        wall = time.monotonic() - t0
        os.environ.pop("AUTOGK_PROFILE_DIR", None)
        ab = (res.get("stages", {}).get("ab") or {}).get("ab") or {}
        stage_s = {k: v.get("elapsed_s") for k, v in res.get("stages", {}).items()}
        lines.append(f"run {r + 1}: wall {wall:.1f} s, correct {res.get('correct')}, stages {json.dumps(stage_s)}, "
                     f"timing_s {ab.get('timing_s')}, rounds {ab.get('rounds')}, phases {json.dumps(ab.get('phases'))}")
        print(lines[-1], flush=True)
        ab_stage = next(iter(res.get("stages", {}).values()), {})  # the job's figures ride on its first part
        lines.append(f"  job side (s): {json.dumps(ab_stage.get('spent_s'))}; kernel processes' starts (s): "
                     + "; ".join(f"{k.get('label')} waited {k.get('wait_s')} {json.dumps(k.get('steps'))}"
                                 for k in ab_stage.get("kernel_starts") or []))
        print(lines[-1], flush=True)
    for f in sorted(prof_dir.glob("*.prof")):
        buf = io.StringIO()
        st = pstats.Stats(str(f), stream=buf)
        st.sort_stats("cumulative").print_stats(top)
        st.sort_stats("tottime").print_stats(top)  # where the time is spent itself, not below
        lines += [f"\n## {f.name}", buf.getvalue()]
    text = "\n".join(lines)
    (out / f"profile_{target}.txt").write_text(text)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", action="append", help="bundled target(s); default rmsnorm_h4096")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for target in a.target or ["rmsnorm_h4096"]:
        text = profile_target(target, out, a.runs, a.top)
        print(text[:4000], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
