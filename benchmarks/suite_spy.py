"""Where the test suite's Python time goes, by sampling every Python process it starts (py-spy).

    .venv/bin/pip install py-spy                                       # once: not part of setup.sh
    .venv/bin/python benchmarks/suite_spy.py --out /tmp/spy.txt        # the whole suite, as .ci/run runs it
    .venv/bin/python benchmarks/suite_spy.py --out /tmp/spy.txt -- tests/test_loop.py -o addopts=
    .venv/bin/python benchmarks/suite_spy.py --read /tmp/spy.txt --frame "t_quantile ("   # who calls one frame

`suite_cpu.py` counts each process's CPU at its exit; this samples stacks instead (`py-spy record
--subprocesses`, 25 Hz), so it sees processes a signal ends (the judge templates, killed loops) and says
which *code* the time is in: imports (torch, MLflow, Triton), Triton's interpreter running kernels, and the
project's own frames. A sample counts a thread that py-spy did not find idle; waits inside a system call
(a `select`, a pipe's read) are sometimes counted too, so the samples over-count CPU: the blocking leaves are
set aside as "waiting" below, and the rest is the measure. Compare runs with each other, not with
`/proc/stat` seconds.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RATE = 25

# A leaf frame that is a wait, not work (py-spy's idle test misses some of these).
WAITING = re.compile(r"^(_serve \(.*forks\.py|Popen\._execute_child|_PollLikeSelector\.select|select |sleep|"
                     r"Popen\._wait|wait |_wait_for_tstate_lock|Condition\.wait|Event\.wait|socket\.recv|_recv|"
                     r"read \(|Popen\.communicate|recv_fds|accept)")
# The first of these that a sample's stack holds names its kind.
KINDS = [("torch import", "<module> (torch/__init__.py"), ("MLflow import", "<module> (mlflow/__init__.py"),
         ("Triton import", "<module> (triton/__init__.py"),
         ("Triton interpreter (kernel calls)", "GridExecutor.__call__"),
         ("MLflow store open", "SqlAlchemyStore.__init__"), ("MLflow, other", "mlflow/"),
         ("other imports", "_find_and_load"), ("pytest itself and in-process tests", "_pytest/")]


def samples(path: Path):
    """(frames, count) per line of py-spy's raw output (a process's command line may span lines)."""
    buf = ""
    for line in path.read_text(errors="replace").splitlines():
        buf += line
        if re.search(r"[)\"] \d+$", buf):
            stack, n = buf.rsplit(" ", 1)
            yield re.split(r";(?=[^;]* \()|;(?=process )", stack), int(n)
            buf = ""
        else:
            buf += " "


def summary(path: Path, top: int) -> dict:
    kinds, own, total, waiting = collections.Counter(), collections.Counter(), 0, 0
    for frames, n in samples(path):
        total += n
        if WAITING.match(frames[-1]) or frames[-1].startswith("process "):
            waiting += n
            continue
        stack = ";".join(frames)
        kinds[next((k for k, pat in KINDS if pat in stack), "the rest")] += n
        ours = [f for f in frames if "autogk" in f and not f.startswith("process ")]
        if ours and not any(pat in stack for _, pat in KINDS[:7]):
            own[re.sub(r":\d+\)$", ")", ours[-1])] += n
    sec = lambda n: round(n / RATE, 1)  # noqa: E731
    return {"samples": total, "rate_hz": RATE, "waiting_s": sec(waiting),
            "by_kind_s": {k: sec(v) for k, v in kinds.most_common()},
            "innermost_project_frame_s": {k: sec(v) for k, v in own.most_common(top)}}


def callers(path: Path, frame: str, depth: int, top: int) -> dict:
    """The callers (depth frames up) of the first frame containing `frame`, by samples."""
    found = collections.Counter()
    for frames, n in samples(path):
        at = [i for i, f in enumerate(frames) if frame in f]
        if at:
            i = at[0]
            found[" <- ".join(re.sub(r" \(.*", "", f) for f in frames[max(0, i - depth):i + 1][::-1])] += n
    return {k: round(v / RATE, 1) for k, v in found.most_common(top)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="py-spy's raw samples are written here (with --read: read from here)")
    ap.add_argument("--read", type=Path, help="summarise an earlier run's samples instead of running the suite")
    ap.add_argument("--frame", help="with --read: the callers of the frames containing this text")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: the whole suite)")
    a = ap.parse_args()
    path = a.read or a.out
    if path is None:
        ap.error("--out or --read is needed")
    if a.read is None:
        spy = Path(sys.executable).parent / "py-spy"
        if not spy.exists():
            print("py-spy is not installed here: .venv/bin/pip install py-spy", file=sys.stderr)
            return 2
        cmd = [str(spy), "record", "--subprocesses", "--nonblocking", "--format", "raw", "--rate", str(RATE),
               "-o", str(path), "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               *a.pytest_args]
        rc = subprocess.run(cmd, cwd=REPO).returncode
        print(f"pytest under py-spy: exit {rc}", file=sys.stderr)
    import json
    out = callers(path, a.frame, a.depth, a.top) if a.frame else summary(path, a.top)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
