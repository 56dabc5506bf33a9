"""The command line that starts one of the judge's modules as its own process, from wherever the
package lives (`autogk_git.bench.judge` in a checkout, `autogk_judge` where it was shipped)."""
from __future__ import annotations

import sys
from pathlib import Path

# sys.path[0] is set to the package's parent, replacing the "" that `-c` puts there: the process's
# working folder may be a kernel's, and none of its files may stand in for torch or for the judge.
_BOOT = ("import importlib, sys; sys.path[0] = sys.argv[1]; "
         "m = importlib.import_module(sys.argv[2]); sys.exit(m.entry(sys.argv[3:]))")


def command(module: str, args: list[str], package: str | None = None, root: Path | None = None) -> list[str]:
    """argv that runs `<package>.<module>.entry(args)` in a fresh interpreter."""
    package = package or __package__
    if root is None:  # this package's own parent folder
        root = Path(__file__).resolve().parents[len(package.split("."))]
    return [sys.executable, "-c", _BOOT, str(root), f"{package}.{module}", *args]
