"""A job's temp folders: each carries its owner's pid and the pids of the job's processes, so that the
folders of a dead owner (a run killed with -9) are swept, with the shared memory torch made for those
processes, which no one unlinked. Standard library only (the judge's package)."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterable

OWNER_FILE = "owner.pid"
STALE_PREFIXES = ("autogk-job-", "autogk-worker-", "autogk-cand-")


def mark_owner(folder: Path) -> None:
    (folder / OWNER_FILE).write_text(str(os.getpid()))


PIDS_FILE = "job.pids"  # in a job's folder: its judge's and kernels' pids, one a line, as they start


def note_pids(folder: Path, pids: Iterable[int]) -> None:
    """Add pids of the job's processes to its folder's list: a runner killed with -9 cannot unlink their
    shared memory itself, so the sweep that removes its folder does (sweep_stale)."""
    try:
        with open(folder / PIDS_FILE, "a") as f:
            f.write("".join(f"{int(p)}\n" for p in pids))
    except OSError:
        pass


def _alive(pid: int) -> bool:
    """autogk_git.procs.pid_alive, again: this package ships to the GPU machine, standard library only."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


SHM_DIR = Path("/dev/shm")


def drop_shared_memory(pids: Iterable[int], shm: Path = SHM_DIR) -> int:
    """Unlink the shared-memory files torch made for these (ended) processes: with its file_system
    strategy each is /dev/shm/torch_<pid>_<random>_<n>, and a process ended by os._exit or a kill
    (every judge and kernel process) unlinks none. A mapping still open stays valid; only the name
    goes. Files of another user are left. Returns how many were removed."""
    prefixes = tuple(f"torch_{int(p)}_" for p in pids)
    if not prefixes:
        return 0
    try:
        names = [n for n in os.listdir(shm) if n.startswith(prefixes)]
    except OSError:
        return 0
    removed = 0
    for n in names:
        try:
            if (shm / n).stat().st_uid == os.getuid():
                (shm / n).unlink()
                removed += 1
        except OSError:
            pass
    return removed


SHM_DIR_PREFIX, SHM_SOCKET = "torch-shm-dir-", "manager.sock"


def bound_unix_sockets() -> set[str] | None:
    """The paths of the Unix sockets bound now in this network namespace (None: unknown here)."""
    try:
        with open("/proc/net/unix") as f:
            next(f)
            return {parts[7] for parts in map(str.split, f) if len(parts) >= 8}
    except (OSError, StopIteration):
        return None


def dead_shm_managers(root: Path | None = None) -> list[Path]:
    """Remove the folders torch's shared-memory managers left in `root` (TMPDIR): torch-shm-dir-*, each
    holding the socket of one manager that was killed (a judge's, at its job's end) and never tidied up:
    one a job, ~250 a test-suite run, ~9,000 in this machine's /tmp in a day. A folder goes only when its
    socket file exists (bound: not a manager starting now) and no process has it bound any more. Bound is
    read in this process's network namespace (/proc/net/unix): a manager in another namespace that shares
    this TMPDIR would lose its folder (no new client could reach it), a setup autogk does not make."""
    root = Path(root or tempfile.gettempdir())
    try:
        found = [e for e in os.scandir(root) if e.name.startswith(SHM_DIR_PREFIX)]
    except OSError:
        return []
    bound = bound_unix_sockets() if found else None
    removed = []
    for e in found:
        sock = os.path.join(e.path, SHM_SOCKET)
        if bound is None or sock in bound or not os.path.exists(sock):
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        removed.append(Path(e.path))
    return removed


def sweep_stale(root: Path | None = None, min_age_s: float = 60.0) -> list[Path]:
    """Remove autogk temp folders whose owner process is gone (a run killed with -9 leaves them), and the
    folders of dead shared-memory managers (dead_shm_managers)."""
    root = Path(root or tempfile.gettempdir())
    removed = dead_shm_managers(root)
    now = time.time()
    try:
        entries = [Path(e.path) for e in os.scandir(root) if e.name.startswith(STALE_PREFIXES)]
    except OSError:
        return removed
    for d in entries:
        if not d.is_dir():
            continue
        try:
            if now - d.stat().st_mtime < min_age_s:
                continue
            owner = d / OWNER_FILE
            pid = int(owner.read_text()) if owner.exists() else None
        except (OSError, ValueError):
            continue
        if pid is not None and _alive(pid):
            continue
        if pid is None and now - d.stat().st_mtime < 86400:
            continue  # an older autogk's folder, maybe still in use: only a day-old one is surely stale
        try:  # the shared memory of the jobs it ran, which its runner never unlinked: of pids still free
            drop_shared_memory(p for p in map(int, (d / PIDS_FILE).read_text().split()) if not _alive(p))
        except (OSError, ValueError):
            pass
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed
