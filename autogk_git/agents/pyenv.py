"""The Python environment the judge runs in, compared around a command agent that has no OS sandbox.

The judge imports torch and triton (and the standard library) from the interpreter autogk runs in, and
every figure it makes rests on them: a patched `torch.cuda.Event.elapsed_time`, a `sitecustomize.py`
or `.pth` file in site-packages (run by every interpreter at start), or bytecode planted where the
judge reads its own, and the judge measures what the patch says. Inside bwrap the agent cannot write
there (only its worktree is writable). Without bwrap the undo after the run (agents/confine.py) covers
the repository and the `[agent] watch` paths, not this: over 100,000 files, too many to copy and put
back. So they are compared by what a write cannot hide (size, modification and change times, inode,
mode; a process can set a file's modification time but not its change time), and a difference stops
the loop: the environment is not put back, and nothing benchmarked with it after the change can be
trusted. Reinstalling is the fix.
"""
from __future__ import annotations

import os
import site
import sys
import sysconfig
from pathlib import Path

from autogk_git.agents.confine import outermost

Stat = tuple[int, int, int, int, int]


def judge_roots() -> list[Path]:
    """What the judge's interpreter reads code from: the standard library, every site-packages folder
    (the user's too, where a new `sitecustomize.py` would run first), autogk's own bytecode cache for
    the judge (bench/judge/hygiene.bytecode_cache), and the Triton cache of the judge's own GPU kernels
    (bench/judge/hygiene.judge_triton_cache: the timer's L2 flush is loaded from there, compiled once;
    a binary planted there that flushes nothing would be loaded by every later job), and autogk's own
    package folder."""
    from autogk_git.bench.judge import hygiene
    import autogk_git
    # autogk's own package too: an editable install (a checkout of autogk) lies outside site-packages, and
    # the loop and the judge of every later experiment are its files.
    roots = [sysconfig.get_paths()["stdlib"], *site.getsitepackages(), site.getusersitepackages(),
             hygiene.bytecode_root(os.environ) / "judge", hygiene.judge_triton_cache(os.environ),
             Path(autogk_git.__file__).parent]
    return outermost([Path(os.path.abspath(r)) for r in roots])


def fingerprint(roots: list[Path]) -> dict[str, Stat]:
    """{path: (size, mtime_ns, ctime_ns, inode, mode)} of every file, folder and link under the roots
    (links not followed). A root that does not exist yet has no entries: one made later shows up."""
    out: dict[str, Stat] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in (dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)):
                try:
                    st = os.lstat(name)
                except OSError:
                    continue
                out[name] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
    return out


def changes(before: dict[str, Stat], after: dict[str, Stat]) -> list[str]:
    """The paths made, removed or changed, sorted, each with what happened."""
    out = []
    for p in sorted(before.keys() | after.keys()):
        old, new = before.get(p), after.get(p)
        if old == new:
            continue
        out.append(f"{p}: " + ("made" if old is None else "removed" if new is None else "changed"))
    return out


def stop_line(changed: list[str]) -> str:
    """The loop's stop message for a changed environment."""
    from autogk_git.bench.judge import hygiene
    shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more" if len(changed) > 5 else "")
    return (f"the Python environment the judge runs in ({sys.prefix}) changed while the agent ran, without an OS "
            f"sandbox: {shown}. It is not put back; reinstall it (bash scripts/setup.sh, or pip install "
            f"--force-reinstall the package), remove any file the agent made there, and remove the judge's "
            f"Triton cache ({hygiene.judge_triton_cache(os.environ)}; it is compiled again)")
