"""`autogk bisect` on a real timed backend: a planted slowdown on a trunk, found by benchmarking.

Needs a CUDA GPU, git, torch, triton and click (no MLflow: tracking is switched off). Builds a
project with the `scale` test target and two large workloads, then a trunk of six commits where one
commit changes the kernel's block size from 1024 to 32 (same result, many more programs: slower on
large inputs) among harmless ones (comments, notes, a file outside the target). No commit has a note,
so every judged commit is benchmarked on the `local` backend; the script prints what bisect found
and whether it is the planted commit.

    python benchmarks/bisect_gpu.py [--threshold 20]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "scale"


def sh(cwd: Path, *args: str, env=None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threshold", type=float, default=20.0)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOGK_TRACKING_ENABLED": "false",
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "AUTOGK_BENCH_BACKEND": "local",
           "AUTOGK_BENCH_STRIDE": "1"}
    autogk = [sys.executable, "-m", "autogk_git"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        wl = tmp / "workloads.jsonl"
        lines = []
        for k, n in enumerate((1 << 20, 1 << 24)):
            lines.append(json.dumps({"definition": "scale", "workload": {
                "uuid": f"00000000-0000-4000-8000-00000000010{k}", "axes": {"n": n},
                "inputs": {"x": {"type": "random"}, "bias": {"type": "random"},
                           "scale": {"type": "scalar", "value": 1.5}}}}))
        wl.write_text("\n".join(lines) + "\n")
        root = tmp / "proj"
        # Written by hand rather than `autogk init`: that installs hook shims, which need the
        # installed package, and this script runs from a source tree.
        tdir = root / "kernels" / "scale"
        tdir.mkdir(parents=True)
        (root / ".autogk.toml").write_text('[project]\ntrunk = "main"\n')
        (tdir / "definition.json").write_text((DATA / "definition.json").read_text())
        (tdir / "workloads.jsonl").write_text(wl.read_text())
        (tdir / "kernel.py").write_text((DATA / "kernel.py").read_text())
        sh(root, "git", "init", "-q", "-b", "main", env=env)
        sh(root, "git", "add", "-A", env=env)
        sh(root, "git", "commit", "-qm", "scale target", env=env)
        kernel = root / "kernels/scale/kernel.py"
        fast = (DATA / "kernel.py").read_text().replace("BLOCK = 64  # autogk: tune [32, 64, 128]",
                                                       "BLOCK = 1024  # autogk: tune [32, 1024]")
        kernel.write_text(fast)
        sh(root, "git", "commit", "-qam", "scale: triton kernel, BLOCK 1024", env=env)
        good = sh(root, "git", "rev-parse", "HEAD").strip()
        commits = {}

        def commit(msg: str, path: Path, text: str) -> None:
            path.write_text(text)
            sh(root, "git", "add", str(path), env=env)
            sh(root, "git", "commit", "-qm", msg, env=env)
            commits[sh(root, "git", "rev-parse", "HEAD").strip()] = msg

        commit("comment", kernel, kernel.read_text() + "# a comment\n")
        commit("program notes", root / "kernels/scale/program.md", "# scale\nnotes\n")
        commit("PLANTED: block 32", kernel, kernel.read_text().replace("BLOCK = 1024", "BLOCK = 32"))
        commit("readme", root / "README.md", "hello\n")
        commit("another comment", kernel, kernel.read_text() + "# another\n")
        planted = next(c for c, m in commits.items() if m.startswith("PLANTED"))
        t0 = time.time()
        proc = subprocess.run(autogk + ["bisect", good, "HEAD", "--threshold", str(args.threshold), "--json"],
                              cwd=root, env=env, capture_output=True, text=True)
        wall = time.time() - t0
        print(proc.stderr[-4000:])
        if proc.returncode != 0:
            print(proc.stdout)
            return 1
        out = json.loads(proc.stdout)
        for s in out["steps"]:
            print(f"{s['commit'][:10]} {commits.get(s['commit'], 'GOOD'):<20} {s['verdict']:<5} {s['why'][:120]}")
        print(f"mode {out['mode']}; {out['message']}")
        print(f"benchmarked {out['benchmarked']}, reused {out['reused']}, wall {wall:.0f} s")
        ok = out["first_bad"] == planted
        print(f"planted commit {planted[:10]} found: {ok}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
