"""The tuner on the bundled RMSNorm target with whole-workload verdicts, and each verdict per workload.

    python benchmarks/verdict_run.py --out verdict.md [-n 10] [--max-time 170] [--backend local]

Makes a fresh project (`autogk init --example rmsnorm_h4096`), runs `autogk iterate --agent tune`,
then writes a markdown page: one line per experiment (decision, objective ratio and interval, the
worst workload, why) and a table of per-workload candidate/parent ratios, read from the result notes.
Needs a CUDA GPU for `--backend local`; MLflow is switched off (AUTOGK_TRACKING_ENABLED=0).
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

REPO = Path(__file__).resolve().parents[1]


def autogk(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autogk_git", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--max-time", type=float, default=0.0)
    ap.add_argument("--backend", default="local")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "AUTOGK_TRACKING_ENABLED": "0", "AUTOGK_BENCH_HOOK_MODE": "foreground",
           "GIT_AUTHOR_NAME": "autogk bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "autogk bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    root = Path(tempfile.mkdtemp(prefix="autogk-verdict-")) / "proj"
    t0 = time.time()
    out = autogk(root.parent, "init", str(root), "--example", "rmsnorm_h4096", "--no-check", env=env)
    if out.returncode:
        print(out.stdout, out.stderr)
        return 1
    it = ["iterate", "-n", str(args.n), "--agent", "tune", "--backend", args.backend, "--json"]
    if args.max_time:
        it += ["--max-time", str(args.max_time)]
    run = autogk(root, *it, env=env)
    wall = time.time() - t0
    sys.stderr.write(run.stderr[-4000:])
    report = json.loads(run.stdout) if run.stdout.strip().startswith("{") else {"experiments": []}

    sys.path.insert(0, str(REPO))
    from autogk_git.project import Project
    from autogk_git.record.experiments import results
    project = Project(root)
    target = project.target("rmsnorm_h4096")
    axes = {w["uuid"]: w.get("axes", {}) for w in target.workloads}
    res = results(project, target.name)
    best = autogk(root, "best", "--json", env=env).stdout
    lines = [f"# Whole-workload verdicts: the tuner on rmsnorm_h4096 ({args.backend} backend)", "",
             f"`python benchmarks/verdict_run.py -n {args.n} --max-time {args.max_time:g} --backend {args.backend}`; "
             f"{len(res)} experiment(s) in {wall:.0f} s wall (init included); stop: {report.get('stop_reason', '?')}.",
             ""]
    env0 = (res[0].get("environment") if res else {}) or {}
    if env0.get("gpu"):
        lines += [f"Device: {env0.get('gpu', env0.get('device'))}, torch {env0.get('torch')}, triton "
                  f"{env0.get('triton')}, timer {((res[0].get('verdict') or {}).get('figures') or '').split('timer ')[-1].split(',')[0]}.", ""]
    lines += ["| # | change | decision | outcome | objective ratio [interval] | worst workload | wall s |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in res:
        v = r.get("verdict") or {}
        per = v.get("per_workload") or []
        worst = max(per, key=lambda w: w["ratio"]) if per else None
        ws = (f"{worst['ratio']:.3f} (batch {axes.get(worst['uuid'], {}).get('batch_size', '?')})" if worst else "-")
        ratio = (f"{v['ratio']:.4f} [{v.get('ci_low', 0):.4f}, {v.get('ci_high', 0):.4f}]" if "ratio" in v else "-")
        lines.append(f"| {r['experiment']} | {r.get('hypothesis', '')} | {v.get('decision')} | {v.get('outcome')} | "
                     f"{ratio} | {ws} | {(r.get('cost') or {}).get('bench_wall_s', 0):.0f} |")
    lines += ["", "Reasons:", ""]
    for r in res:
        v = r.get("verdict") or {}
        lines.append(f"- #{r['experiment']}: {v.get('reason', '')}")
    uuids = [w["uuid"] for w in target.workloads]
    lines += ["", "Per-workload candidate/parent ratio (median of paired rounds; interval Bonferroni over "
              "workloads and looks):", "",
              "| batch | " + " | ".join(f"#{r['experiment']}" for r in res) + " |",
              "| --- | " + " | ".join("---" for _ in res) + " |"]
    for u in uuids:
        cells = []
        for r in res:
            per = {w["uuid"]: w for w in (r.get("verdict") or {}).get("per_workload") or []}
            lat = (((r.get("stages") or {}).get("ab") or {}).get("workloads") or {}).get("candidate", {}).get(u, {})
            cells.append(f"{per[u]['ratio']:.3f} [{per[u]['ci_low']:.3f}, {per[u]['ci_high']:.3f}] "
                         f"({lat.get('latency_us', 0):.1f} us)" if u in per else "-")
        lines.append(f"| {axes[u].get('batch_size', u[:8])} | " + " | ".join(cells) + " |")
    lines += ["", "`autogk best --json`:", "", "```json", best.strip(), "```", ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
