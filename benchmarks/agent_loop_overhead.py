"""What the agent layer adds to each loop iteration, as the history grows.

Builds a temporary autogk project (the bundled rmsnorm example), fakes N finished experiments
(commits under archive refs, each with a result note and a plan note, plus a research plan every 25),
then times the bookkeeping the loop does before every experiment: reading the history, finding the
research plans and the pending one, checking the triggers, and the kernels already tried (repeat
detection); also one offline research plan and one workload-inspector artifact. Prints medians.

    python benchmarks/agent_loop_overhead.py [--sizes 10,100,300] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, input=input).stdout


def fake_history(root: Path, target: str, n: int) -> None:
    from autogk_git.agents import research

    kernel = root / "kernels" / target / "kernel.py"
    base = git(root, "rev-parse", "HEAD").strip()
    src = kernel.read_text()
    for i in range(1, n + 1):
        kernel.write_text(src + f"\n# variant {i}\n")
        git(root, "commit", "-qam", f"experiment {i}")
        sha = git(root, "rev-parse", "HEAD").strip()
        git(root, "update-ref", f"refs/autogk/archive/{target}/{i:04d}", sha)
        result = {"schema": 1, "target": target, "experiment": i, "commit": sha, "parent": base,
                  "hypothesis": f"experiment {i}", "correct": i % 3 != 0, "timing": False,
                  "verdict": {"decision": "revert", "reason": "INCORRECT_NUMERICAL" if i % 3 == 0 else "slower"},
                  "tunables": {}, "parent_tunables": {}}
        git(root, "notes", "--ref", "refs/notes/autogk/results", "add", "-f", "-F", "-", sha,
            input="summary\n\n" + json.dumps(result))
        git(root, "notes", "--ref", "refs/notes/autogk/plans", "add", "-f", "-F", "-", sha, input=f"plan {i}\n")
        if i % 25 == 0:
            meta = {"target": target, "after": i, "trigger": "bench", "agent": "offline", "created": str(i)}
            git(root, "notes", "--ref", "refs/notes/autogk/plans", "add", "-f", "-F", "-", base,
                input=research.render({"diagnosis": "d", "strategy": "s", "actions": [], "avoid": []}, meta))
        git(root, "reset", "-q", "--hard", base)


def timed(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,300")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from autogk_git.agents import workload_view as inspect
    from autogk_git.agents import research
    from autogk_git.loop import experiment as ex
    from autogk_git.record import kernels
    from autogk_git.project import Project

    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            os.environ.update(GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com", GIT_COMMITTER_NAME="b",
                              GIT_COMMITTER_EMAIL="b@example.com", GIT_CONFIG_NOSYSTEM="1",
                              AUTOGK_TRACKING_ENABLED="false")
            subprocess.run([str(BIN / "autogk"), "init", "proj", "--example", "rmsnorm_h4096", "--no-check"],
                           cwd=d, check=True, capture_output=True)
            root = Path(d) / "proj"
            project = Project(root)
            target = project.target()
            t0 = time.perf_counter()
            fake_history(root, target.name, n)
            build = time.perf_counter() - t0
            cfg = project.config

            def bookkeeping():
                history = ex.results(project, target.name)
                plans = research.plans(root, target.name)
                research.due(history, cfg, since=plans[-1].after if plans else 0)
                research.pending(root, target.name, history, cfg.research.follow, plans)
                kernels.tried(project.root, target.rel, history)

            row = {"experiments": n,
                   "history_ms": timed(lambda: ex.results(project, target.name), args.rounds),
                   "per_iteration_bookkeeping_ms": timed(bookkeeping, args.rounds),
                   "offline_research_ms": timed(lambda: research.research(project, target, "bench", lambda s: None,
                                                                         mode="offline"), args.rounds),
                   "inspector_ms": timed(lambda: inspect.write_artifact(project, target), args.rounds),
                   "build_s": round(build, 1)}
            rows.append(row)
            print(json.dumps(row))
    print(f"\nmachine: {platform.node()} {platform.machine()}, {os.cpu_count()} cpu, python {platform.python_version()}")
    print("| experiments | history (ms) | bookkeeping per iteration (ms) | offline research plan (ms) | inspector (ms) |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['experiments']} | {r['history_ms']:.0f} | {r['per_iteration_bookkeeping_ms']:.0f} | "
              f"{r['offline_research_ms']:.0f} | {r['inspector_ms']:.0f} |")


if __name__ == "__main__":
    main()
