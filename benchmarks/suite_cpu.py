"""Where the test suite's CPU goes: runs pytest with every Python process it starts logging its own CPU.

    .venv/bin/python benchmarks/suite_cpu.py                 # the whole suite, as .ci/run runs it
    .venv/bin/python benchmarks/suite_cpu.py --out benchmarks/results/suite_cpu.json -- tests/test_judge.py -o addopts=
    .venv/bin/python benchmarks/suite_cpu.py --per-test --out /tmp/per_test.json   # one test at a time

A `sitecustomize` on PYTHONPATH makes each Python process (judge, kernel processes, `autogk` commands,
hooks, reference checks, pytest's workers) append one line at exit: its argv, its CPU seconds, the test
that was running (pytest's PYTEST_CURRENT_TEST, inherited) and whether it imported torch, triton or
mlflow. What it cannot see: processes ended by a signal (a kernel process the judge kills at the end of
a job runs no exit handler) and non-Python processes (git, the SLURM daemons); the children's CPU that
the kernel reports for pytest (waited children only) is printed beside it, and the gap is theirs.

Every run also samples the machine's busy CPU (`/proc/stat`) once a second and reports it by 20-s stretch
(`busy_by_20s`: start second, share of all cores busy): where the run leaves cores idle, more workers or
another order could help; where it does not, only less CPU can.

`--per-test` runs the tests one at a time (no xdist) and charges each test the whole machine's busy CPU
(`/proc/stat`) from its setup to its teardown: every process it caused is counted, forked kernel
processes, git and daemons included, so on an otherwise idle machine this is the test's full cost.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_command_one import busy_cpu_s  # noqa: E402 - the one reader of the machine's busy seconds

SITE = '''
import atexit, json, os, resource, sys
_AUTOGK_EXEC_PID = os.getpid()  # a forked child inherits this and the exit handler, not this line's run
def _autogk_cpu_log():
    try:
        r = resource.getrusage(resource.RUSAGE_SELF)
        rec = {"argv": sys.argv[:4], "cpu": r.ru_utime + r.ru_stime, "forked": os.getpid() != _AUTOGK_EXEC_PID,
               "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
               "torch": "torch" in sys.modules, "triton": "triton" in sys.modules, "mlflow": "mlflow" in sys.modules}
        with open(LOG, "a") as f:
            f.write(json.dumps(rec) + "\\n")
    except Exception:
        pass
atexit.register(_autogk_cpu_log)
'''


def kind(argv: list[str]) -> str:
    """What a logged process was, from its argv."""
    joined = " ".join(argv)
    if argv and argv[0].endswith("autogk"):
        return "autogk " + (argv[1] if len(argv) > 1 else "")
    if "hook.py" in joined:
        return "git hook"
    if "autogk_judge.process" in joined:
        return "judge job (and its forked kernel processes)"
    if "refcheck" in joined or "refproof" in joined:
        return "reference check"
    if argv[:1] == ["-c"] and len(argv) == 1:
        return "pytest worker"
    if argv and argv[0].endswith("pytest/__main__.py"):
        return "pytest"
    return "other: " + joined[:70]


PER_TEST = '''
import json, os, time
def _busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait, in seconds
_t, _t0 = {}, time.monotonic()
def pytest_runtest_logstart(nodeid, location):
    _t[nodeid] = (_busy(), time.monotonic())
def pytest_runtest_logfinish(nodeid, location):
    b, w = _t.pop(nodeid)
    with open(LOG_PER_TEST, "a") as f:
        f.write(json.dumps({"test": nodeid, "cpu": round(_busy() - b, 2), "wall": round(time.monotonic() - w, 2),
                            "start": round(w - _t0, 1)}) + "\\n")
'''


def per_test_summary(rows: list[dict]) -> dict:
    by_file: dict[str, list] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = by_file[r["test"].split("::")[0]]
        f[0] += r["cpu"]
        f[1] += r["wall"]
        f[2] += 1
    return {"machine_cpu_s": round(sum(r["cpu"] for r in rows), 1),
            "by_file": {k: {"cpu": round(c, 1), "wall": round(w, 1), "tests": n}
                        for k, (c, w, n) in sorted(by_file.items(), key=lambda kv: -kv[1][0])},
            "tests": sorted(rows, key=lambda r: -r["cpu"])}


def summarize(recs: list[dict]) -> dict:
    by_file: dict[str, float] = collections.defaultdict(float)
    by_kind: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    for r in recs:
        by_file[r["test"].split("::")[0] or "(no test: pytest's own processes)"] += r["cpu"]
        k = by_kind[kind(r["argv"])]
        k[0] += 1
        k[1] += r["cpu"]
    return {"processes": len(recs), "cpu_s": round(sum(r["cpu"] for r in recs), 1),
            "imported": {m: [sum(1 for r in recs if r[m]), round(sum(r["cpu"] for r in recs if r[m]), 1)]
                         for m in ("torch", "triton", "mlflow")},
            # a started (not forked) process that has torch paid for its import (~1.2 CPU-s each)
            "started_with_torch": sum(1 for r in recs if r["torch"] and not r.get("forked")),
            "forked": [sum(1 for r in recs if r.get("forked")), round(sum(r["cpu"] for r in recs if r.get("forked")), 1)],
            "by_file": {f: round(c, 1) for f, c in sorted(by_file.items(), key=lambda fc: -fc[1])},
            "by_kind": {k: [n, round(c, 1)] for k, (n, c) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])}}


def busy_by_stretch(samples: list[tuple[float, float]], stretch_s: float = 20.0) -> list[list[float]]:
    """[start second, share of all cores busy] for each stretch of the (wall, busy CPU-s) samples."""
    out, cores = [], os.cpu_count() or 1
    i = 0
    while i < len(samples) - 1:
        j = i
        while j < len(samples) - 1 and samples[j + 1][0] - samples[i][0] <= stretch_s:
            j += 1
        j = max(j, i + 1)
        (w0, b0), (w1, b1) = samples[i], samples[j]
        out.append([round(w0, 1), round((b1 - b0) / max(w1 - w0, 1e-9) / cores, 3)])
        i = j
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pytest_args", nargs="*", help="what pytest runs (default: the whole suite)")
    ap.add_argument("--out", type=Path, help="write the summary as JSON here too")
    ap.add_argument("--per-test", action="store_true",
                    help="one test at a time, each charged the machine's busy CPU over its run")
    ap.add_argument("--records", action="store_true", help="add every process's own line to the JSON")
    ap.add_argument("--timeline", action="store_true",
                    help="as the suite runs (xdist on): each test's start and wall; its CPU then includes the "
                         "other workers' at the same time")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="autogk-suite-cpu-") as tmp:
        log = Path(tmp) / "log.jsonl"
        per_test_log = Path(tmp) / "per_test.jsonl"
        (Path(tmp) / "sitecustomize.py").write_text(f"LOG = {str(log)!r}\n" + SITE)
        (Path(tmp) / "autogk_per_test.py").write_text(f"LOG_PER_TEST = {str(per_test_log)!r}\n" + PER_TEST)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")]))}
        extra = (["-o", "addopts=", "-p", "no:xdist", "-p", "autogk_per_test"] if args.per_test else
                 ["-p", "autogk_per_test"] if args.timeline else [])
        t0 = time.monotonic()
        samples, done = [(0.0, busy_cpu_s())], threading.Event()

        def sample() -> None:
            while not done.wait(1.0):
                samples.append((time.monotonic() - t0, busy_cpu_s()))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
                               *args.pytest_args], cwd=REPO, env=env)
        wall = time.monotonic() - t0
        done.set()
        sampler.join()
        samples.append((wall, busy_cpu_s()))
        recs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        per_test = ([json.loads(line) for line in per_test_log.read_text().splitlines()]
                    if per_test_log.exists() else [])
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = {"wall_s": round(wall, 1), "pytest_rc": proc.returncode, "cores": os.cpu_count(),
               "waited_children_cpu_s": round(children.ru_utime + children.ru_stime, 1), **summarize(recs)}
    summary["busy_by_20s"] = busy_by_stretch(samples)
    if args.per_test:
        summary["per_test"] = per_test_summary(per_test)
    if args.records:
        summary["records"] = recs
    if args.timeline:
        summary["timeline"] = sorted(per_test, key=lambda r: r["start"] + r["wall"])
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
