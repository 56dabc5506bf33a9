"""What the judge's clock could confirm on real GPU runs, read from the result notes their projects left.

    python benchmarks/clock_resolution.py BUNDLE [BUNDLE ...] [--json OUT]
    python benchmarks/clock_resolution.py --all          # every project bundle under benchmarks/results/

Each timed workload of each experiment has, in its result note, what the judge's own clock saw per round
(`clock`: the parent's figure, the candidate's claim, the candidate as the judge saw it) and its timed calls
per window (`calls_per_round`). A candidate is TAMPERED by the clock only when it saw the candidate slower
than its claim, per call, by more than the limit of `bench/judge/clock.py` (`clock_limit_us`: CLOCK_SLACK
of the parent's time, and never less than CLOCK_WINDOW_US over the window's calls). So the limit, as a
share of the parent's time, is the smallest under-report of its own time a candidate could be caught at:
at or above 1.0 the clock would let even a claim of zero time through, and only the seal (the kernel's
own process) stands between a patched timer and the verdict.

Per target and window size this prints how many workload records there are, the honest gap the clock saw
(seen - claimed: every candidate in these runs was an ordinary kernel), and that limit's share of the
parent. Reads the notes only (no GPU); the limit is the judge's own (bench/judge/clock.py), so torch is imported.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def clock_limit_us(parent: list[float], calls: int, method: str | None) -> float:
    """The per-call gap (seen - claimed) the judge's clock needs before it condemns: clock.clock_limit_us
    itself, on a record's figures (importing the judge's clock loads torch)."""
    from autogk_git.bench.judge import clock
    return clock.clock_limit_us({"witness": {"parent": parent}, "calls": calls, "method": method}, "cuda")


def notes_of(bundle: Path) -> list[dict]:
    """The JSON of every result note in a project bundle."""
    with tempfile.TemporaryDirectory() as d:
        run = lambda *a: subprocess.run(["git", *a], cwd=d, capture_output=True, text=True, check=True).stdout  # noqa: E731
        run("init", "-q")
        run("fetch", "-q", str(bundle), "refs/notes/*:refs/notes/*")
        out = []
        for ref in run("for-each-ref", "--format=%(refname)", "refs/notes/").split():
            if not ref.endswith("/results"):
                continue
            for line in run("notes", "--ref", ref, "list").splitlines():
                text = run("notes", "--ref", ref, "show", line.split()[1])
                start = text.find("\n{")
                if start >= 0:
                    try:
                        out.append(json.loads(text[start + 1:]))
                    except ValueError:
                        pass
        return out


def records(bundle: Path, null: bool = False) -> list[dict]:
    """Every timed workload record with the judge's clock; null: only those with null windows
    (`[bench] clock_null_window`), their `seen` the figure less each process's null window."""
    rows = []
    for note in notes_of(bundle):
        target = note.get("target") or bundle.stem.replace("project_", "")
        wls = ((note.get("stages") or {}).get("ab") or {}).get("workloads") or {}
        for uuid, rec in (wls.get("candidate") or {}).items():
            clock, calls = rec.get("clock"), rec.get("calls_per_round")
            if not clock or not calls or not clock.get("parent"):
                continue
            if null:
                if not clock.get("seen_null"):
                    continue
                clock = {**clock, "seen": clock["seen_null"]}
            parent = statistics.median(clock["parent"])
            gap = statistics.median(s - c for s, c in zip(clock["seen"], clock["claimed"]))
            limit = clock_limit_us(clock["parent"], int(calls), rec.get("method"))
            rows.append({"rounds": {k: clock[k] for k in ("parent", "claimed", "seen")},
                         "bundle": str(bundle.relative_to(REPO) if bundle.is_relative_to(REPO) else bundle),
                         "target": target, "experiment": note.get("experiment"), "workload": uuid,
                         "calls": int(calls), "method": rec.get("method"), "parent_us": round(parent, 3),
                         "gap_us": round(gap, 3), "limit_us": round(limit, 3),
                         "limit_share": round(limit / parent, 4)})
    return rows


def summary(rows: list[dict]) -> list[str]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["target"], r["calls"])].append(r)
    out = ["| target | calls a window | workload records | parent us (median) | honest gap us a call: median, "
           "95th pct of abs | limit us a call (median) | limit / parent: median, max | records where the "
           "clock cannot see a claim of zero (limit >= parent) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (target, calls), rs in sorted(groups.items()):
        gaps = sorted(abs(r["gap_us"]) for r in rs)
        p95 = gaps[min(len(gaps) - 1, int(0.95 * len(gaps)))]
        shares = [r["limit_share"] for r in rs]
        blind = sum(r["limit_us"] >= r["parent_us"] for r in rs)
        out.append(f"| {target} | {calls} | {len(rs)} | {statistics.median(r['parent_us'] for r in rs):.2f} | "
                   f"{statistics.median(r['gap_us'] for r in rs):+.3f}, {p95:.3f} | "
                   f"{statistics.median(r['limit_us'] for r in rs):.2f} | {statistics.median(shares):.2f}, "
                   f"{max(shares):.2f} | {blind} of {len(rs)} |")
    return out


def condemned(rows: list[dict], share: float, slack_us: float, window_us: float) -> list[dict]:
    """The records clock.clock_failure would condemn with these constants (CLOCK_SLACK["cuda"] = (share,
    slack_us), CLOCK_WINDOW_US["cuda"] = window_us), from each record's rounds. The notes keep no
    per-round windows, so the third kind of evidence (the windows' spread against the parent's) is not
    tried: this counts the t bound and the sign test alone."""
    from autogk_git.bench.judge import clock
    saved = clock.CLOCK_SLACK["cuda"], clock.CLOCK_WINDOW_US["cuda"]
    clock.CLOCK_SLACK["cuda"], clock.CLOCK_WINDOW_US["cuda"] = (share, slack_us), window_us
    try:
        out = []
        for r in rows:
            f = {"witness": {**r["rounds"], "excess": {}}, "calls": r["calls"], "method": r["method"]}
            if clock.clock_failure(f, "cuda") is not None:
                out.append(r)
        return out
    finally:
        clock.CLOCK_SLACK["cuda"], clock.CLOCK_WINDOW_US["cuda"] = saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundles", nargs="*", type=Path)
    ap.add_argument("--all", action="store_true", help="every *.bundle under benchmarks/results/")
    ap.add_argument("--json", type=Path, help="write every record here")
    ap.add_argument("--null", action="store_true",
                    help="only records with null windows, read less each process's null window (seen_null)")
    ap.add_argument("--try", dest="tries", action="append", default=[], metavar="SHARE,US,WINDOW_US",
                    help="count the records the clock would condemn with these constants (needs torch: it runs "
                         "clock.clock_failure); repeat to compare")
    a = ap.parse_args(argv)
    bundles = list(a.bundles) + (sorted((REPO / "benchmarks/results").rglob("*.bundle")) if a.all else [])
    if not bundles:
        ap.error("give a bundle, or --all")
    rows = [r for b in bundles for r in records(b.resolve(), a.null)]
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} timed workload records with the judge's clock, from {len(bundles)} bundle(s)")
    print("\n".join(summary(rows)))
    for t in a.tries:
        share, slack_us, window_us = (float(x) for x in t.split(","))
        bad = condemned(rows, share, slack_us, window_us)
        print(f"with CLOCK_SLACK ({share:g}, {slack_us:g} us) and CLOCK_WINDOW_US {window_us:g}: {len(bad)} of "
              f"{len(rows)} honest records condemned (t bound and sign test; the spread test not tried)")
        for r in bad[:8]:
            print(f"  {r['target'][:24]} #{r['experiment']} {r['workload'][:8]} calls {r['calls']} parent "
                  f"{r['parent_us']} gap {r['gap_us']} limit-share {r['limit_share']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
