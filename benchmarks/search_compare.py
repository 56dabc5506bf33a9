"""`[search] strategy = trunk` against `beam` with the offline tuner, on the same time budget per arm.

One arm = one target and one strategy, in a fresh project of its own (`autogk init --example TARGET`),
running `autogk iterate --agent tune --max-time T` with AUTOGK_SEARCH_STRATEGY set. Both strategies of a
target get the same --max-time and -n; the GPU seconds each arm actually spent (the notes' cost.gpu_s)
are written beside it, so the budgets can be compared as spent, not only as asked.

How to re-run on a CUDA machine (torch and triton; MLflow and GitPython are not needed, the repository
on PYTHONPATH is enough). With k GPUs, k arms run at once, each on its own GPU with its own GPU lock
folder (the two arms of a target start together, so they share the machine's conditions):

    # 4 GPUs: the four arms at once, 150 s each (~15 rmsnorm or ~4 DSA experiments), then ncu on the DSA
    # beam arm's final kernel in the time left
    PYTHONPATH=$PWD timeout 300 python3 benchmarks/search_compare.py --out $OUT/search --wall-limit 290
    # 2 GPUs: a target's two arms at once, rmsnorm first
    PYTHONPATH=$PWD timeout 300 python3 benchmarks/search_compare.py --out $OUT/search --wall-limit 290 \
        --max-time-for rmsnorm_h4096=40 --max-time-for dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64=85

With fewer GPUs than the schedule needs, --max-time is cut by one factor so the worst case fits
--wall-limit (and the script refuses when even the fixed parts, init, grace and read-out, do not fit).

Dry run on a CPU (Triton interpreter: untimed, so no floor is measured and correct candidates merge
with --merge-untimed; a smaller cpu_max_numel keeps the interpreter quick):

    AUTOGK_BENCH_CPU_MAX_NUMEL=20000 PYTHONPATH=$PWD python benchmarks/search_compare.py --backend interpret \
        --max-time 20 --max-time-for dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64=20 -n 2 \
        --out /tmp/search-dry

Per arm it records every experiment (the node it branched from, decision, ratio, the candidate's and
its trunk's share of each workload's floor: floor_us / latency_us, the figures autogk writes in every
result note, record/floor.py), and sums up: experiments, keeps, the best share of the floor the trunk
reached (its worst workload, and the geometric mean over workloads) and at which experiment, the share
at the largest workload (for rmsnorm: the share of the measured copy bandwidth, since its floor is its
bytes over that bandwidth), and the GPU seconds spent. Files under OUT:

    search_compare.json, search_compare.md       the comparison
    <target>__<strategy>/iterate.log             the loop's progress, timed
    <target>__<strategy>/log_tree.txt            `autogk log --tree`
    <target>__<strategy>/git_graph.txt           `git log --graph --oneline` of the trunk and every experiment ref
    <target>__<strategy>/profiles.json           the Nsight Compute profiles in the notes: the loops run with
                                                 [bench] profile = "off" (a profile after every keep would cost an
                                                 arm with more keeps more of its budget); --profile names the arms
                                                 whose final trunk kernel is profiled after all loops
    <target>__<strategy>/project.bundle          the whole project (`git clone` it, then `autogk sync`)
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
import loop_gpu  # noqa: E402  (its process helpers: a time limit per child, the whole tree ended at it)

RMS = "rmsnorm_h4096"
DSA = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
DEFAULT_TIME = {RMS: 150.0, DSA: 150.0}  # seconds per arm, cut to fit --wall-limit with fewer GPUs than arms
# an arm's iterate is ended this long after its --max-time: the experiment running then may finish (an
# rmsnorm experiment takes ~10 s on the H200, a DSA one ~35 s, more with its first compiles)
DEFAULT_GRACE = {RMS: 30.0, DSA: 75.0}
INIT_S = 15.0       # `autogk init` of a bundled example (~6 s), as planned; its own limit is INIT_LIMIT_S
INIT_LIMIT_S = 60.0
AFTER_S = 15.0      # the read-out after the loop (notes, log --tree, git graph, bundle): kept free of iterate


def say(msg: str) -> None:
    print(f"[search_compare {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Arms and their schedule
# ---------------------------------------------------------------------------------------------

def gpu_slots(backend: str, wanted: str) -> list[str | None]:
    """One slot per GPU arms may run on at once ([None] on the CPU: one arm at a time)."""
    if wanted:  # on the CPU too, to try the schedule (CUDA_VISIBLE_DEVICES means nothing to the interpreter)
        return [g.strip() for g in wanted.split(",") if g.strip()]
    if backend == "interpret":
        return [None]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        n = sum(1 for ln in out.splitlines() if ln.startswith("GPU "))
    except (OSError, subprocess.TimeoutExpired):
        n = 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    ids = [g.strip() for g in visible.split(",") if g.strip()] if visible else [str(i) for i in range(n)]
    return ids or [None]


def plan_times(arms: list[tuple[str, str]], times: dict[str, float], slots: int, grace: dict[str, float],
               wall_limit: float) -> tuple[dict[str, float], float]:
    """Each target's --max-time, cut by one factor when the schedule's worst case would pass --wall-limit.

    Arms run in waves of `slots`, in the order given (a target's strategies side by side); a wave lasts
    as long as its longest arm: init + max-time + grace + the read-out."""
    def worst(ts: dict[str, float]) -> float:
        waves = [arms[i:i + slots] for i in range(0, len(arms), slots)]
        return sum(max(INIT_S + ts[t] + grace[t] + AFTER_S for t, _ in w) for w in waves)

    need = worst(times)
    if not wall_limit or need <= wall_limit:
        return times, need
    fixed = worst({t: 0.0 for t in times})
    if fixed >= wall_limit:
        raise SystemExit(f"--wall-limit {wall_limit:g} s leaves no time for the loops (init, grace and read-out "
                         f"alone take {fixed:.0f} s): raise it, lower --grace, or run fewer arms (--targets)")
    k = (wall_limit - fixed) / (need - fixed)
    return {t: max(5.0, round(s * k)) for t, s in times.items()}, wall_limit


# ---------------------------------------------------------------------------------------------
# One arm
# ---------------------------------------------------------------------------------------------

def arm_env(strategy: str, gpu: str | None, lock_dir: Path, width: int) -> dict[str, str]:
    env = loop_gpu.cli_env()
    # No Nsight Compute profile inside the compared loops: it is taken after the first verdict and after every
    # keep, so an arm with more keeps would spend more of its budget on it (one is taken afterwards instead).
    env.update(AUTOGK_SEARCH_STRATEGY=strategy, AUTOGK_SEARCH_WIDTH=str(width), AUTOGK_GPU_LOCK_DIR=str(lock_dir),
               AUTOGK_BENCH_PROFILE="off")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def run_tagged(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, limit_s: float, tag: str
               ) -> tuple[int, str, float]:
    """cmd with its stderr (progress) streamed, tagged by arm, to stdout and log; (rc, stdout, wall_s);
    rc 124 when it passed limit_s (then it and every process below it are ended)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, open(log, "w") as fh:
        fh.write(f"$ {' '.join(cmd)}   (cwd {cwd})\n")
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, bufsize=1)

        def pump() -> None:
            for line in proc.stderr:
                fh.write(f"{time.monotonic() - t0:8.1f}s {line}")
                fh.flush()
                sys.stdout.write(f"  {tag} | {line}")
                sys.stdout.flush()

        th = threading.Thread(target=pump, daemon=True)
        th.start()
        try:
            rc = proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            say(f"{tag}: iterate passed its limit of {limit_s:.0f} s: ending it and its children")
            loop_gpu.end_tree(proc)
            rc = 124
        th.join(timeout=10)
        out.seek(0)
        stdout = out.read()
        fh.write(f"--- rc {rc}, {time.monotonic() - t0:.1f} s\n")
    return rc, stdout, round(time.monotonic() - t0, 1)


def init_project(root: Path, target: str, env: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    loop_gpu.git_out(root, "init", "-q", "-b", "main")
    r = loop_gpu.run_quiet([sys.executable, "-m", "autogk_git", "init", str(root), "--example", target, "--no-check",
                            "--here"], root.parent, env, INIT_LIMIT_S)
    if r.returncode:
        raise RuntimeError(f"autogk init --example {target} failed (rc {r.returncode}): {(r.stdout + r.stderr)[-1500:]}")


def last_json(text: str) -> dict[str, Any]:
    """iterate --json's report: the last JSON object printed."""
    text = text.strip()
    at = 0 if text.startswith("{") else text.rfind("\n{") + 1
    try:
        return json.loads(text[at:]) if at >= 0 and text[at:].startswith("{") else {}
    except ValueError:
        return {}


def run_arm(arm: dict[str, Any], args: argparse.Namespace, gpu: str | None, deadline: float) -> None:
    """Init, iterate, read out; every failure is written into the arm and the rest still runs."""
    tag, d = arm["name"], Path(arm["dir"])
    d.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"autogk-search-{arm['strategy']}-")) / "proj"
    env = arm_env(arm["strategy"], gpu, root.parent / "gpu-locks", args.width)
    arm.update(project=str(root), gpu=gpu, errors={})
    t0 = time.monotonic()
    try:
        init_project(root, arm["target"], env)
        cmd = [sys.executable, "-m", "autogk_git", "iterate", "-n", str(args.n), "--target", arm["target"],
               "--agent", "tune", "--backend", args.backend, "--max-time", f"{arm['max_time']:g}", "--json"]
        if args.backend == "interpret":
            cmd.append("--merge-untimed")  # untimed: merge correct candidates so the trunk (and the tree) moves
        limit = max(10.0, min(arm["max_time"] + arm["grace"], deadline - time.monotonic() - AFTER_S))
        say(f"{tag}: iterate -n {args.n} --max-time {arm['max_time']:g} on GPU {gpu} (ended at {limit:.0f} s)")
        rc, stdout, wall = run_tagged(cmd, root, env, d / "iterate.log", limit, tag)
        report = last_json(stdout)
        arm["iterate"] = {"rc": rc, "wall_s": wall, "stop_reason": report.get("stop_reason"),
                          "failed": report.get("failed")}
        if rc not in (0,):
            arm["errors"]["iterate"] = f"autogk iterate ended with rc {rc} (see {d / 'iterate.log'})"
    except Exception as e:  # noqa: BLE001 - written down; the read-out below still runs on what is there
        arm["errors"]["iterate"] = loop_gpu.short_error(e)
    try:
        read_arm(arm, root, d, env)
    except Exception as e:  # noqa: BLE001
        arm["errors"]["read"] = loop_gpu.short_error(e)
    arm["wall_s"] = round(time.monotonic() - t0, 1)


# ---------------------------------------------------------------------------------------------
# Reading an arm's record
# ---------------------------------------------------------------------------------------------

def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def shares_of(fl: dict[str, Any] | None, key: str) -> dict[str, float]:
    return {u: w[key] for u, w in ((fl or {}).get("workloads") or {}).items() if key in w}


def largest(fl: dict[str, Any] | None, axes: dict[str, dict]) -> str | None:
    """The workload that moves the most bytes (its floor_bytes; else the largest product of its axes)."""
    rows = (fl or {}).get("workloads") or {}
    if not rows:
        return None
    def size(u: str) -> float:
        b = rows[u].get("floor_bytes")
        return float(b) if b else float(math.prod(v for v in (axes.get(u) or {}).values() if isinstance(v, int)) or 0)
    return max(rows, key=size)


def experiment_rows(history: list[dict[str, Any]], trunk_commits: set[str]) -> list[dict[str, Any]]:
    from autogk_git.record import floor
    rows = []
    for r in history:
        v = r.get("verdict") or {}
        fl = r.get("floor") or floor.of(r)
        cand, par = shares_of(fl, "share"), shares_of(fl, "parent_share")
        parent, against = r.get("parent"), r.get("against") or r.get("parent")
        rows.append({
            "experiment": r.get("experiment"), "hypothesis": r.get("hypothesis", ""), "decision": v.get("decision"),
            "ratio": v.get("ratio"), "ci_high": v.get("ci_high"),
            "from": "trunk" if parent in trunk_commits or parent == against else f"node {(parent or '')[:10]}",
            "parent": parent, "against": against,
            "share_min": min(cand.values()) if cand else None, "share_geomean": geomean(list(cand.values())),
            "trunk_share_min": min(par.values()) if par else None, "trunk_share_geomean": geomean(list(par.values())),
            "shares": cand, "trunk_shares": par, "gpu_s": (r.get("cost") or {}).get("gpu_s"),
            "bench_wall_s": (r.get("cost") or {}).get("bench_wall_s"), "reason": (v.get("reason") or "")[:300]})
    return rows


def best_reached(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The trunk's best share of the floor: the start (as its first timing measured it) or a keep (as its own
    experiment measured it), with the experiment that reached it (0: the start).

    Ranked by the geometric mean of the shares over the workloads: with each workload's floor fixed, that is
    the inverse of the geomean latency, the loop's default objective. (The worst workload's share is written
    too; on rmsnorm it is a launch-bound batch of 1, far below its floor whatever the kernel does.)"""
    start = next((r for r in rows if r["trunk_share_geomean"] is not None), None)
    points = [(0, start["trunk_share_min"], start["trunk_share_geomean"], start["trunk_shares"])] if start else []
    points += [(r["experiment"], r["share_min"], r["share_geomean"], r["shares"]) for r in rows
               if r["decision"] == "keep" and r["share_geomean"] is not None]
    if not points:
        return {"share_geomean": None, "at": None, "note": "no floor measured (an untimed backend)"}
    n, s, g, per = max(points, key=lambda p: p[2])
    return {"at": n, "share_min": s, "share_geomean": g, "start_share_min": points[0][1] if start else None,
            "start_share_geomean": points[0][2] if start else None, "shares": per}


def read_arm(arm: dict[str, Any], root: Path, d: Path, env: dict[str, str]) -> None:
    from autogk_git.git import repo
    from autogk_git.project import Project
    from autogk_git.record import floor
    from autogk_git.record.experiments import results

    project = Project(root)
    target = project.target(arm["target"])
    axes = {w["uuid"]: dict(w.get("axes") or {}) for w in target.workloads}
    history = results(project, arm["target"])
    trunk_commits = set(loop_gpu.git_out(root, "rev-list", "--first-parent", project.trunk).split())
    rows = experiment_rows(history, trunk_commits)
    best = best_reached(rows)
    big = largest(next((f for r in reversed(history) if (f := r.get("floor") or floor.of(r))), None), axes)
    for r in rows:
        r["share_largest"], r["trunk_share_largest"] = r["shares"].get(big), r["trunk_shares"].get(big)
    arm["experiments"] = rows
    arm["summary"] = {
        "experiments": len(rows), "keeps": sum(r["decision"] == "keep" for r in rows),
        "from_a_node": sum(r["from"] != "trunk" for r in rows),
        "decisions": {k: sum(r["decision"] == k for r in rows) for k in sorted({r["decision"] for r in rows} - {None})},
        "gpu_s": round(sum(r["gpu_s"] or 0 for r in rows), 1),
        "bench_wall_s": round(sum(r["bench_wall_s"] or 0 for r in rows), 1), "best": best,
        "trunk_tip": repo.rev(project.root, project.trunk)}
    if big:
        final = best.get("shares") or {}
        arm["summary"]["largest_workload"] = {"uuid": big, "axes": axes.get(big), "share": final.get(big)}
    tr = floor.trunk_shares(history)  # the trunk's kernel as the newest experiment measured it
    if tr:
        arm["summary"]["last_measured"] = {"experiment": tr["experiment"], "share_min": tr["min_share"],
                                           "share_geomean": geomean(list(tr["shares"].values())),
                                           "bandwidth_gbs": tr.get("bandwidth_gbs"),
                                           "share_largest": tr["shares"].get(big) if big else None}
    profiles = [dict(r["profile"], experiment=r.get("experiment")) for r in history if isinstance(r.get("profile"), dict)]
    (d / "profiles.json").write_text(json.dumps(profiles, indent=1))
    arm["profiles"] = len(profiles)
    tree = loop_gpu.run_quiet([sys.executable, "-m", "autogk_git", "log", "--tree", "--target", arm["target"]],
                              root, env, 60)
    (d / "log_tree.txt").write_text(tree.stdout + (f"\n(stderr)\n{tree.stderr}" if tree.returncode else ""))
    refs = [project.trunk] + loop_gpu.git_out(root, "for-each-ref", "--format=%(refname)", "refs/autogk/").split()
    graph = loop_gpu.git_out(root, "log", "--graph", "--format=%h %D %s", "--decorate-refs=refs/autogk/*",
                             "--decorate-refs=refs/heads/*", *refs)
    (d / "git_graph.txt").write_text(graph + "\n")
    loop_gpu.git_out(root, "bundle", "create", str(d / "project.bundle"), "--all")


def profile_after(arm: dict[str, Any], deadline: float) -> None:
    """Nsight Compute on the arm's final trunk kernel, after its loop (outside its budget), through the loop's
    own step (loop/profile.after_verdict on its last result; the note gets the profile, as in a loop)."""
    import shutil
    if not shutil.which("ncu"):
        arm["profile_after"] = "skipped: ncu not found"
        return
    left = deadline - time.monotonic() - 10
    if left < 30:
        arm["profile_after"] = f"skipped: {max(0, left):.0f} s left before --wall-limit"
        return
    env = dict(arm_env(arm["strategy"], arm.get("gpu"), Path(arm["project"]).parent / "gpu-locks", 1),
               AUTOGK_BENCH_PROFILE="ncu")
    r = loop_gpu.run_quiet([sys.executable, str(Path(__file__).resolve()), "--profile-project", arm["project"],
                            "--out", arm["dir"], "--targets", arm["target"]], REPO, env, min(240.0, left))
    arm["profile_after"] = f"rc {r.returncode}: {(r.stdout + r.stderr).strip()[-600:]}"
    try:
        d = Path(arm["dir"])
        from autogk_git.project import Project
        from autogk_git.record.experiments import results
        history = results(Project(Path(arm["project"])), arm["target"])
        profiles = [dict(x["profile"], experiment=x.get("experiment")) for x in history if isinstance(x.get("profile"), dict)]
        (d / "profiles.json").write_text(json.dumps(profiles, indent=1))
        arm["profiles"] = len(profiles)
    except Exception as e:  # noqa: BLE001
        arm["profile_after"] += f"; reading it back failed: {loop_gpu.short_error(e)}"


def profile_child(root: Path, target: str) -> int:
    """In a child process: the profile of the trunk's kernel, written into the last result's note."""
    from autogk_git.loop import profile
    from autogk_git.project import Project
    from autogk_git.record import summaries
    from autogk_git.record.experiments import results
    project = Project(root)
    history = results(project, target)
    if not history:
        print("no experiment to attach a profile to")
        return 1
    last = history[-1]
    if not profile.after_verdict(project, target, last, say):
        print(f"no profile taken (backend {last.get('backend')}, or this trunk kernel has one)")
        return 1
    summaries.write_result(project.root, last)
    from autogk_git.bench import ncu
    print("\n".join(ncu.view_lines([last], project.config)))
    return 0


# ---------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------

def pct(x: float | None) -> str:
    """A share as a percentage, three figures (DSA's shares of a copy-speed floor can be below 1 %)."""
    return "-" if x is None else f"{100 * x:.3g}%"


def last_cell(lm: dict[str, Any] | None) -> str:
    if not lm:
        return "-"
    bw = f"{lm['bandwidth_gbs']:.0f}" if lm.get("bandwidth_gbs") else "-"
    return f"#{lm['experiment']}: {pct(lm['share_geomean'])}, {pct(lm.get('share_largest'))}, {bw}"


def markdown(res: dict[str, Any]) -> str:
    lines = [f"# Search strategies on the same budget ({res['backend']}, {res['started']})", "",
             f"`{res['command']}`", "",
             "Each arm: a fresh `autogk init --example` project, the offline tuner (`--agent tune`), "
             "`[search] strategy` as named, the same `--max-time` and `-n` for both strategies of a target. "
             "Share = floor_us / latency_us per workload (1.0: as fast as a copy of its floor bytes over the copy "
             "bandwidth measured that day), its geometric mean over the timed workloads (the inverse of the geomean "
             "latency, the default objective, up to the fixed floors); best = the trunk's best by it (the start, or a "
             "keep as its own experiment measured it). For rmsnorm the largest workload's share is its share of the "
             "measured copy bandwidth.", "",
             "| target | strategy | max-time s | experiments | keeps | from a node | GPU s | best share (geomean) | "
             "reached at | start share (geomean) | best: worst workload's share | best: largest workload's share | "
             "last measured: share (geomean), largest, copy GB/s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |"]
    for a in res["arms"]:
        s = a.get("summary") or {}
        b = s.get("best") or {}
        big = s.get("largest_workload") or {}
        at = "-" if b.get("at") is None else ("the start" if b["at"] == 0 else f"#{b['at']}")
        ax = ", ".join(f"{k}={v}" for k, v in (big.get("axes") or {}).items())
        lines.append(f"| {a['target']} | {a['strategy']} | {a['max_time']:g} | {s.get('experiments', '-')} | "
                     f"{s.get('keeps', '-')} | {s.get('from_a_node', '-')} | {s.get('gpu_s', '-')} | "
                     f"{pct(b.get('share_geomean'))} | {at} | {pct(b.get('start_share_geomean'))} | "
                     f"{pct(b.get('share_min'))} | {pct(big.get('share'))}{f' ({ax})' if ax else ''} | "
                     f"{last_cell(s.get('last_measured'))} |")
    for a in res["arms"]:
        lines += ["", f"## {a['name']}", ""]
        it = a.get("iterate") or {}
        lines.append(f"iterate: rc {it.get('rc')}, {it.get('wall_s')} s, stop: {it.get('stop_reason')}; "
                     f"GPU {a.get('gpu')}; profiles in the notes: {a.get('profiles', 0)}")
        if a.get("profile_after"):
            lines += ["", "ncu after the loop:", "```", a["profile_after"], "```"]
        for k, e in (a.get("errors") or {}).items():
            lines += ["", f"**{k} failed:**", "```", e[-1500:], "```"]
        lines += ["", "| # | from | change | decision | ratio | share (geomean) | largest workload's share | "
                  "trunk's share (geomean), as timed beside it | GPU s |",
                  "| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in a.get("experiments") or []:
            ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
            lines.append(f"| {r['experiment']} | {r['from']} | {r['hypothesis'][:60]} | {r['decision']} | {ratio} | "
                         f"{pct(r['share_geomean'])} | {pct(r.get('share_largest'))} | "
                         f"{pct(r['trunk_share_geomean'])} | {r['gpu_s'] or '-'} |")
        tree = Path(a["dir"]) / "log_tree.txt"
        if tree.exists():
            lines += ["", "`autogk log --tree`:", "", "```", tree.read_text().rstrip()[-4000:], "```"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the results")
    ap.add_argument("--targets", default=f"{RMS},{DSA}", help="bundled example targets, comma-separated")
    ap.add_argument("--strategies", default="trunk,beam", help="[search] strategy values, comma-separated")
    ap.add_argument("--backend", default="local", choices=["local", "interpret"])
    ap.add_argument("-n", type=int, default=50, help="most experiments per arm (the time budget usually ends it)")
    ap.add_argument("--max-time", type=float, default=0.0,
                    help=f"iterate's --max-time per arm, every target (default: {RMS} {DEFAULT_TIME[RMS]:g} s, "
                         f"{DSA} {DEFAULT_TIME[DSA]:g} s)")
    ap.add_argument("--max-time-for", action="append", default=[], metavar="TARGET=S",
                    help="a target's own --max-time (repeatable)")
    ap.add_argument("--grace", type=float, default=0.0,
                    help="an arm's iterate is ended this long after its --max-time, so the experiment running then "
                         f"may finish (default: {RMS} {DEFAULT_GRACE[RMS]:g} s, {DSA} {DEFAULT_GRACE[DSA]:g} s)")
    ap.add_argument("--wall-limit", type=float, default=0.0,
                    help="the whole run's limit (s): --max-time is cut to fit the schedule's worst case")
    ap.add_argument("--width", type=int, default=3, help="[search] width for beam")
    ap.add_argument("--gpus", default="", help="GPU indices arms run on, one arm per GPU at a time (default: all)")
    ap.add_argument("--profile", default=f"{DSA}__beam", metavar="ARM[,ARM]",
                    help="arms whose final trunk kernel is profiled with ncu after all loops, in the time "
                         "--wall-limit leaves (none: '')")
    ap.add_argument("--profile-project", type=Path, help=argparse.SUPPRESS)  # the child of profile_after
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.profile_project:
        return profile_child(args.profile_project, args.targets)
    t0 = time.monotonic()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    times = {t: args.max_time or DEFAULT_TIME.get(t, 60.0) for t in targets}
    for spec in args.max_time_for:
        name, _, sec = spec.partition("=")
        if name not in times:
            raise SystemExit(f"--max-time-for {spec}: {name} is not in --targets ({', '.join(targets)})")
        times[name] = float(sec)
    pairs = [(t, s) for t in targets for s in strategies]
    slots = gpu_slots(args.backend, args.gpus)
    grace = {t: args.grace or DEFAULT_GRACE.get(t, 45.0) for t in targets}
    times, worst = plan_times(pairs, times, len(slots), grace, args.wall_limit)
    deadline = t0 + args.wall_limit - 5 if args.wall_limit else math.inf
    arms = [{"name": f"{t}__{s}", "target": t, "strategy": s, "max_time": times[t], "grace": grace[t], "dir": str(out / f"{t}__{s}")}
            for t, s in pairs]
    res: dict[str, Any] = {"command": "python benchmarks/search_compare.py " + " ".join(sys.argv[1:] if argv is None
                                                                                         else argv),
                           "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "backend": args.backend, "gpus": slots, "max_time": times, "grace": grace, "worst_case_s": worst,
                           "n": args.n, "width": args.width, "arms": arms}
    say(f"{len(arms)} arms on {len(slots)} slot(s) {slots}; --max-time per target {times}; worst case {worst:.0f} s")

    def write() -> None:
        res["wall_s"] = round(time.monotonic() - t0, 1)
        (out / "search_compare.json").write_text(json.dumps(res, indent=1, default=str))
        (out / "search_compare.md").write_text(markdown(res))

    work: queue.Queue = queue.Queue()
    for a in arms:
        work.put(a)
    lock = threading.Lock()

    def worker(gpu: str | None) -> None:
        while True:
            try:
                a = work.get_nowait()
            except queue.Empty:
                return
            run_arm(a, args, gpu, deadline)
            with lock:
                write()

    threads = [threading.Thread(target=worker, args=(g,)) for g in slots]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wanted = {x.strip() for x in args.profile.split(",") if x.strip()}
    for a in arms:
        if a["name"] in wanted and a.get("project") and args.backend == "local":
            say(f"{a['name']}: profiling its final trunk kernel with ncu (outside the compared budget)")
            profile_after(a, deadline if args.wall_limit else time.monotonic() + 300)
            write()
    write()
    print((out / "search_compare.md").read_text(), flush=True)
    bad = [a["name"] for a in arms if a.get("errors")]
    say(f"wrote {out / 'search_compare.md'} and .json in {res['wall_s']:.0f} s; arms with errors: {', '.join(bad) or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
