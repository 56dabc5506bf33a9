"""What autogk's hooks add to an ordinary (non-experiment) commit.

Makes a temporary autogk project, then times `git commit` of a one-line change, alternating
rounds with the hooks installed and with an empty hooks directory (core.hooksPath), so both
sides see the same machine state. Prints the medians and the difference. Target: < 50 ms extra.

    python benchmarks/hook_overhead.py [--rounds 40] [--only reference-transaction]
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


def sh(cwd: Path, *args: str) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", help="comma-separated hook names: time these of autogk's hooks alone")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "proj"
        env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com", GIT_COMMITTER_NAME="b",
                   GIT_COMMITTER_EMAIL="b@example.com", GIT_CONFIG_NOSYSTEM="1")
        os.environ.update(env)
        sh(Path(d), str(BIN / "autogk"), "init", "proj", "--example", "rmsnorm_h4096", "--no-check")
        hooks = Path(subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=root, capture_output=True,
                                    text=True, check=True).stdout.strip())
        hooks = hooks if hooks.is_absolute() else root / hooks
        if args.only:  # a hooks folder with only the named ones (links to autogk's)
            some = Path(d) / "some-hooks"
            some.mkdir()
            for name in args.only.split(","):
                (some / name).symlink_to(hooks / name)
            hooks = some
        empty = Path(d) / "no-hooks"
        empty.mkdir()
        times: dict[str, list[float]] = {"hooks": [], "none": []}
        for i in range(args.rounds):
            for side in (("hooks", "none") if i % 2 == 0 else ("none", "hooks")):
                sh(root, "git", "config", "core.hooksPath", str(hooks if side == "hooks" else empty))
                (root / "notes.txt").write_text(f"{side} {i}\n")
                sh(root, "git", "add", "notes.txt")
                t0 = time.perf_counter()
                sh(root, "git", "commit", "-q", "-m", f"round {i} {side}")
                times[side].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        res = {"rounds": args.rounds, "hooks": args.only or "all", "median_ms_with_hooks": round(med["hooks"], 2),
               "median_ms_without": round(med["none"], 2), "extra_ms": round(med["hooks"] - med["none"], 2),
               "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
               "git": subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()}
    if args.json:
        print(json.dumps(res))
        return
    print(f"{'':<22}{'median ms':>10}")
    print(f"{'commit, hooks':<22}{res['median_ms_with_hooks']:>10.2f}   ({res['hooks']})")
    print(f"{'commit, no hooks':<22}{res['median_ms_without']:>10.2f}")
    print(f"{'extra':<22}{res['extra_ms']:>10.2f}   (target < 50 ms; {args.rounds} rounds, {res['git']})")


if __name__ == "__main__":
    main()
