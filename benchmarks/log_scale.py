"""Scale: `autogk log`, `best` and `show` over 10,000 experiments; `autogk sync`'s cost per note.

Builds a project whose history holds N experiments (default 10,000) with git fast-import in a few
seconds: one commit per experiment on the trunk's tip of its time, a kept ref and a --no-ff trunk merge
for every fifth (the rest archived), and a result note for each that looks like a timed backend's
(stride and ab stages, per-workload latency, per-round samples). Then it times the real CLI in fresh
processes, counts the git processes `autogk log` starts (a counting shim on PATH), and times
`autogk sync --no-fetch` into a fresh MLflow store at two sample sizes to fit fixed + per-note cost,
extrapolated to N. Notes here are synthetic: the figures are about reading history, not about kernels.

    python benchmarks/log_scale.py [--n 10000] [--workloads 8] [--rounds 20] [--sync-samples 50,150]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autogk_git.record import summaries as summaries_mod  # noqa: E402 - the summary the loop writes
AUTOGK = [sys.executable, "-m", "autogk_git"]
DEFINITION = json.loads((ROOT / "tests" / "data" / "scale" / "definition.json").read_text())
KERNEL = (ROOT / "tests" / "data" / "scale" / "kernel.py").read_text()
WORKLOADS = (ROOT / "tests" / "data" / "scale" / "workloads.jsonl").read_text()
TARGET = "scale"


def note_for(i: int, sha_mark: str, parent_mark: str, keep: bool, uuids: list[str], rounds: int,
             created: str, rng: random.Random) -> str:
    base = {u: 5.0 + 3.0 * k for k, u in enumerate(uuids)}
    ratio = rng.uniform(0.93, 0.995) if keep else rng.uniform(0.99, 1.08)
    def wl(label, scale):
        return {u: {"status": "PASSED", "max_abs_err": 0.0, "max_rel_err": 0.0,
                    "latency_us": round(base[u] * scale, 4),
                    "samples_us": [round(base[u] * scale * rng.uniform(0.97, 1.03), 4) for _ in range(rounds)]}
                for u in uuids}
    cand = wl("candidate", ratio)
    for u in uuids:
        cand[u]["ratio_vs_parent"] = round(ratio * rng.uniform(0.99, 1.01), 5)
    env = {"gpu": "NVIDIA H200", "driver": "570.00", "torch": "2.11.0", "triton": "3.6.0", "timer": "cudagraph"}
    result = {
        "schema": 1, "target": TARGET, "experiment": i, "commit": sha_mark, "parent": parent_mark,
        "branch": f"autogk/{TARGET}/{i:04d}-tune", "hypothesis": f"tune: BLOCK -> {i}", "agent": "tune",
        "tunables": {"BLOCK": i, "MASK": True}, "parent_tunables": {"BLOCK": i - 1, "MASK": True},
        "backend": "local", "timing": True, "timing_note": None, "environment": env, "skipped": [],
        "checked_workloads": uuids, "correct": True, "created": created,
        "stages": {"stride": {"workloads": {"candidate": wl("candidate", ratio)}, "environment": env},
                   "ab": {"workloads": {"candidate": cand, "parent": wl("parent", 1.0)}, "environment": env,
                          "rounds": rounds}},
        "verdict": {"decision": "keep" if keep else "revert", "rule": "paired-ratio",
                    "geomean_ratio": round(ratio, 5), "ci_low": round(ratio - 0.01, 5), "ci_high": round(ratio + 0.01, 5),
                    "reason": "synthetic", "figures": f"ratio {ratio:.3f} [{ratio - 0.01:.3f}, {ratio + 0.01:.3f}]",
                    "coverage": {"total": len(uuids), "runnable": len(uuids), "checked": len(uuids), "unchecked": [],
                                 "timed": len(uuids), "untimed": [], "complete": True}},
        "cost": {"bench_wall_s": 12.0, "gpu_s": 9.5},
    }
    line = f"autogk {TARGET} #{i:04d}: {'KEEP' if keep else 'REVERT'} - synthetic [{result['verdict']['figures']}]"
    return line + "\n\n" + json.dumps(result, indent=1, sort_keys=True) + "\n"


def build(root: Path, n: int, n_workloads: int, rounds: int, seed: int = 0, summaries: bool = True) -> dict:
    """A project with n experiments, built by one `git fast-import` (commits, refs, merges, notes).

    With `summaries`, each result note gets the compact summary note the loop writes beside it
    (record/summaries.py, made by its own `digest`); without, the history looks like one written
    before summaries existed, which readers handle by reading the full notes."""
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    uuids = [f"00000000-0000-4000-8000-{k:012d}" for k in range(n_workloads)]
    config = '[project]\ntrunk = "main"\n[tracking]\nuri = ""\n'
    t0 = 1_700_000_000
    now = time.time()
    out: list[bytes] = []

    def data(b: bytes) -> None:
        out.append(b"data %d\n" % len(b) + b + b"\n")

    def who(t: int) -> bytes:
        return b"author T <t@example.com> %d +0000\ncommitter T <t@example.com> %d +0000\n" % (t, t)

    out.append(b"commit refs/heads/main\nmark :1\n" + who(t0))
    data(b"base project")
    for path, text in ((".autogk.toml", config), (f"kernels/{TARGET}/definition.json", json.dumps(DEFINITION)),
                       (f"kernels/{TARGET}/workloads.jsonl", WORKLOADS), (f"kernels/{TARGET}/kernel.py", KERNEL)):
        out.append(f"M 100644 inline {path}\n".encode())
        data(text.encode())
    main_mark, mark = ":1", 2
    notes: list[tuple[str, str]] = []
    kept = 0
    for i in range(1, n + 1):
        keep = i % 5 == 0
        t = t0 + i * 60
        exp_mark = f":{mark}"
        mark += 1
        ref = f"refs/autogk/{'kept' if keep else 'archive'}/{TARGET}/{i:04d}"
        out.append(f"commit {ref}\nmark {exp_mark}\n".encode() + who(t))
        data(f"tune: BLOCK -> {i}\n\nAutogk-Experiment: {i}\nAutogk-Target: {TARGET}\nAutogk-Agent: tune".encode())
        out.append(f"from {main_mark}\nM 100644 inline kernels/{TARGET}/kernel.py\n".encode())
        data(KERNEL.replace("BLOCK = 64", f"BLOCK = {i}").encode())
        created = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now - (n - i) * 60))
        notes.append((exp_mark, note_for(i, "@" + exp_mark, "@" + main_mark, keep, uuids, rounds, created, rng)))
        if keep:
            kept += 1
            merge_mark = f":{mark}"
            mark += 1
            out.append(f"commit refs/heads/main\nmark {merge_mark}\n".encode() + who(t + 1))
            data(f"autogk: keep {TARGET} #{i:04d}: tune: BLOCK -> {i}\n\nAutogk-Verdict: keep".encode())
            out.append(f"from {main_mark}\nmerge {exp_mark}\nM 100644 inline kernels/{TARGET}/kernel.py\n".encode())
            data(KERNEL.replace("BLOCK = 64", f"BLOCK = {i}").encode())
            main_mark = merge_mark
    # Notes name commits by sha, known only after import: a second fast-import writes them.
    marks = root / ".git" / "marks"
    stream = b"".join(out) + b"done\n"
    subprocess.run(["git", "fast-import", "--quiet", "--done", f"--export-marks={marks}"], cwd=root,
                   input=stream, check=True)
    sha = dict(line.split() for line in marks.read_text().splitlines())
    nout = [b"commit refs/notes/autogk/results\n" + who(t0 + n * 60 + 10)]
    nb = b"notes"
    nout.append(b"data %d\n" % len(nb) + nb + b"\n")
    size = 0
    sout = [b"commit refs/notes/autogk/summaries\n" + who(t0 + n * 60 + 11), b"data %d\n" % len(nb) + nb + b"\n"]
    for exp_mark, text in notes:
        parent_mark = json.loads(text[text.index("{"):])["parent"][1:]
        text = text.replace(f'"@{exp_mark}"', f'"{sha[exp_mark]}"').replace(f'"@{parent_mark}"', f'"{sha[parent_mark]}"')
        b = text.encode()
        size += len(b)
        nout.append(f"N inline {sha[exp_mark]}\n".encode() + b"data %d\n" % len(b) + b + b"\n")
        if summaries:  # what record/summaries.write_result writes beside the note
            blob = hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest()
            summ = json.dumps({"v": summaries_mod.VERSION, "commit": sha[exp_mark], "note": blob,
                               "digest": summaries_mod.digest(json.loads(text[text.index("{"):]))},
                              separators=(",", ":")).encode() + b"\n"
            sout.append(f"N inline {sha[exp_mark]}\n".encode() + b"data %d\n" % len(summ) + summ + b"\n")
    if summaries:
        nout += sout
    subprocess.run(["git", "fast-import", "--quiet", "--done"], cwd=root, input=b"".join(nout) + b"done\n", check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=root, check=True)
    return {"experiments": n, "kept": kept, "note_bytes_mean": size // max(1, n), "workloads": n_workloads,
            "rounds": rounds}


def timed(cmd: list[str], cwd: Path, env: dict, reps: int, cold: bool = False) -> dict:
    walls = []
    cache = cwd / ".git" / "autogk" / "history-cache.json"
    for _ in range(reps):
        if cold:
            cache.unlink(missing_ok=True)
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - t)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return {"median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
            "max_s": round(max(walls), 3), "reps": reps, "stdout_lines": proc.stdout.count("\n")}


def count_git(cmd: list[str], cwd: Path, env: dict, tmp: Path) -> int:
    """Git processes one command starts: a shim first on PATH logs each call, then runs the real git."""
    shim = tmp / "shim"
    shim.mkdir(exist_ok=True)
    real = shutil.which("git")
    log = tmp / "git-calls.log"
    log.write_text("")
    (shim / "git").write_text(f'#!/bin/sh\necho "$1" >> {log}\nexec {real} "$@"\n')
    (shim / "git").chmod(0o755)
    subprocess.run(cmd, cwd=cwd, env={**env, "PATH": f"{shim}{os.pathsep}{env['PATH']}"}, capture_output=True,
                   check=True)
    return len(log.read_text().splitlines())


def time_sync(root: Path, env: dict) -> tuple[int, float, float]:
    """(notes logged, wall seconds of `sync` into a fresh store, wall seconds of a second sync that finds
    nothing new)."""
    t = time.perf_counter()
    proc = subprocess.run(AUTOGK + ["sync", "--no-fetch", "--json"], cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    logged = json.loads(proc.stdout.strip().splitlines()[-1])["logged"]
    t = time.perf_counter()
    subprocess.run(AUTOGK + ["sync", "--no-fetch", "--json"], cwd=root, env=env, capture_output=True, check=True)
    return logged, wall, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--workloads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sync-samples", default="50,150", help="sizes of the sync samples (comma-separated)")
    ap.add_argument("--sync-full", action="store_true", help="also time `autogk sync` over all N notes (measured)")
    ap.add_argument("--no-summaries", action="store_true",
                    help="build the history as written before result summaries existed (the slow read path)")
    ap.add_argument("--json", dest="json_out", help="also write the figures to this file")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
           "GIT_CONFIG_NOSYSTEM": "1"}
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": {
        "platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
        "git": subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}}
    with tempfile.TemporaryDirectory(prefix="autogk-scale-") as tmp:
        tmp = Path(tmp)
        root = tmp / "proj"
        t = time.perf_counter()
        res["history"] = build(root, args.n, args.workloads, args.rounds, summaries=not args.no_summaries)
        res["history"]["build_s"] = round(time.perf_counter() - t, 2)
        print(f"built {args.n} experiments in {res['history']['build_s']} s "
              f"(mean note {res['history']['note_bytes_mean']} bytes)", flush=True)
        mid = args.n // 2
        res["commands"] = {"log (cold: no summary cache)": timed(AUTOGK + ["log"], root, env, 2, cold=True)}
        print(f"autogk log, cold cache: median {res['commands']['log (cold: no summary cache)']['median_s']:.3f} s",
              flush=True)
        cmds = {"log": ["log"], "log --json": ["log", "--json"],
                "log --verdict keep --since 1d": ["log", "--verdict", "keep", "--since", "1d"],
                "best": ["best"], f"show {mid}": ["show", str(mid)], "--help": ["--help"]}
        for name, argv in cmds.items():
            res["commands"][name] = timed(AUTOGK + argv, root, env, args.reps)
            print(f"autogk {name:<32} median {res['commands'][name]['median_s']:.3f} s "
                  f"(min {res['commands'][name]['min_s']:.3f}, {args.reps} runs)", flush=True)
        res["git_processes"] = {"log": count_git(AUTOGK + ["log"], root, env, tmp),
                                "best": count_git(AUTOGK + ["best"], root, env, tmp)}
        print(f"git processes: {res['git_processes']}", flush=True)
        if args.sync_full:
            logged, wall, again = time_sync(root, env)
            res["sync_full"] = {"notes": args.n, "logged": logged, "wall_s": round(wall, 1),
                                "resync_s": round(again, 1)}
            print(f"sync of all {args.n} notes into a fresh store: {wall:.1f} s (measured); "
                  f"again: {res['sync_full']['resync_s']} s", flush=True)
        samples = [int(s) for s in args.sync_samples.split(",") if s]
        res["sync"] = []
        for k in samples:
            sroot = tmp / f"sync{k}"
            build(sroot, k, args.workloads, args.rounds, seed=k)
            logged, wall, again = time_sync(sroot, env)
            res["sync"].append({"notes": k, "logged": logged, "wall_s": round(wall, 2), "resync_s": round(again, 2)})
            print(f"sync of {k} notes into a fresh store: {wall:.1f} s; again (nothing new): {again:.1f} s", flush=True)
        if len(res["sync"]) >= 2 and not args.sync_full:  # a fit only where the full sync was not measured
            (a, b) = res["sync"][0], res["sync"][-1]
            per = (b["wall_s"] - a["wall_s"]) / (b["notes"] - a["notes"])
            fixed = a["wall_s"] - per * a["notes"]
            res["sync_fit"] = {"per_note_s": round(per, 4), "fixed_s": round(fixed, 2),
                               "extrapolated_s_for_n": round(fixed + per * args.n, 1), "n": args.n}
            print(f"sync fit: {fixed:.1f} s + {per * 1000:.0f} ms/note -> about {fixed + per * args.n:.0f} s "
                  f"({(fixed + per * args.n) / 60:.1f} min) for {args.n} notes (linear extrapolation)", flush=True)
    res["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
