"""What a project's new MLflow store costs: MLflow's migrations against a copy of the user's empty store.

    python benchmarks/store_build.py [--n 5]

Both in this process, after `import mlflow` (which every logging command pays anyway), in a temporary
HOME so the user's own cache is neither read nor written: `--n` stores built by the migrations
(tracking/store.py `_migrate`, what every new store cost before the empty store), then the empty store
built once and `--n` stores made through `_build_sqlite_store` (each a copy). Prints the median and range
of each, in seconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5, help="stores of each kind")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="autogk-store-build-") as d:
        root = Path(d)
        os.environ["HOME"] = str(root / "home")
        import logging
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        import mlflow  # noqa: F401
        from autogk_git.tracking import store
        migrated = [timed(lambda i=i: store._migrate(root / f"m{i}.db", root / f"a{i}")) for i in range(args.n)]
        first = timed(lambda: store._build_sqlite_store(root / "first.db", root / "first"))
        copied = [timed(lambda i=i: store._build_sqlite_store(root / f"c{i}.db", root / f"c{i}"))
                  for i in range(args.n)]
    for name, xs in (("migrations", migrated), ("copy of the empty store", copied)):
        print(f"{name}: median {statistics.median(xs):.4f} s ({min(xs):.4f}-{max(xs):.4f}) over {len(xs)}")
    print(f"the first store of a user (the empty store built, then copied): {first:.4f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
