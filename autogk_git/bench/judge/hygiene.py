"""Process hygiene for the bench judge and the candidate's process. Standard library only: this file
ships beside the worker (as `autogk_hygiene.py`) and the runner imports it from the package.

What it keeps out of a kernel's reach, and why each piece exists:
- secrets: the candidate's environment is scrubbed of ANTHROPIC_*, MODAL_* and any name holding
  KEY, TOKEN, SECRET or PASSWORD (plus a list the job carries); every message that goes into a
  result is redacted again with the parent's secret values (a kernel can read a file, too);
- processes: a kernel may fork, setsid and daemonize. Its process gets its own group, dies with the
  judge (PR_SET_PDEATHSIG), the judge is a subreaper (orphans come back to it instead of init) and
  kills its whole tree at the end; every process started for a job carries a random tag in its
  environment, and the runner kills whatever still carries it once the job is over;
- memory: the judge is made non-dumpable, so a same-user process cannot read or write it through
  /proc/<pid>/mem or reopen its files through /proc/<pid>/fd;
- temp folders: job folders carry their owner's pid; those of dead owners are swept (folders.py).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

SECRET_PREFIXES = ("ANTHROPIC_", "MODAL_", "OPENAI_", "AWS_", "HF_", "GH_", "GITHUB_")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
TAG_VAR = "AUTOGK_JOB_TAG"
REDACTED = "***"
MIN_SECRET_LEN = 6  # shorter values ("1", "true") would redact ordinary text


def is_secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    up = name.upper()
    if up in {e.upper() for e in extra}:
        return True
    return up.startswith(SECRET_PREFIXES) or any(w in up for w in SECRET_WORDS)


def scrub_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """env without any variable whose name looks secret (or is listed in extra)."""
    extra = list(extra)
    return {k: v for k, v in env.items() if not is_secret_name(k, extra)}


PYCACHE_VAR = "PYTHONPYCACHEPREFIX"


def bytecode_cache(env: dict[str, str], role: str) -> dict[str, str]:
    """env, with Python's bytecode cache pointed at autogk's own folder (one per role: "judge",
    "kernels", so a kernel's process never writes what the judge imports) where the installed torch
    has no bytecode of its own: on the H200 machine (a read-only environment) the judge and each
    kernel process compiled ~900 torch modules from source at every start, ~2.5 s each. Left alone
    where a prefix is set by the user or torch's bytecode is there."""
    ours = bytecode_root(env)
    current = env.get(PYCACHE_VAR)
    if current and not current.startswith(str(ours)):
        return env
    if not current and _has_bytecode("torch"):
        return env
    env[PYCACHE_VAR] = str(ours / role)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def drop_job_bytecode(env: Mapping[str, str]) -> None:
    """Remove the bytecode cached for autogk's temp folders (the judge's helpers, each kernel's files)
    under the cache `bytecode_cache` set: they are never imported again."""
    prefix, ours = env.get(PYCACHE_VAR), bytecode_root(env)
    if not prefix or Path(prefix).parent != ours:  # a user's own prefix is theirs to clean
        return
    tmp = Path(tempfile.gettempdir()).resolve().relative_to("/")
    try:
        roles = list(ours.iterdir())
    except OSError:  # never made: the judge was ended (Ctrl-C) before it wrote any bytecode
        return
    for role in roles:
        try:
            stale = [d for d in (role / tmp).iterdir() if d.name.startswith("autogk-")]
        except OSError:
            continue
        for d in stale:
            shutil.rmtree(d, ignore_errors=True)


def bytecode_root(env: Mapping[str, str]) -> Path:
    """autogk's own bytecode cache (bytecode_cache): a folder per role under it."""
    return Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache") / "autogk" / "pycache"


def judge_triton_cache(env: Mapping[str, str]) -> Path:
    """The Triton cache of the judge's own kernels in a kernel's process (the timer's L2 flush): filled
    before the kernel is imported, and outside what its sandbox lets it read or write. In the kernel's
    own cache a kernel could replace the flush's compiled binary with one that flushes nothing, and the
    next job of the same kernel would load it: warm-L2 calls, a window the judge's clock confirms."""
    return _triton_base(env) / "autogk-judge"


def _triton_base(env: Mapping[str, str]) -> Path:
    return Path(env.get("TRITON_CACHE_DIR") or Path(env.get("HOME") or Path.home()) / ".triton" / "cache")


def _has_bytecode(package: str) -> bool:
    import importlib.util
    import sys
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return True  # nothing to speed up
    if spec is None or not spec.origin:
        return True
    origin = Path(spec.origin)
    return (origin.parent / "__pycache__" / f"{origin.stem}.{sys.implementation.cache_tag}.pyc").exists()


def secret_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The values to redact, longest first (so a value containing another is replaced whole)."""
    extra = list(extra)
    vals = {v for k, v in env.items() if is_secret_name(k, extra) and len(v) >= MIN_SECRET_LEN}
    return sorted(vals, key=len, reverse=True)


def redact(obj, values: list[str]):
    """obj (str, list, dict, nested) with every secret value replaced by ***."""
    if not values:
        return obj
    if isinstance(obj, str):
        for v in values:
            if v in obj:
                obj = obj.replace(v, REDACTED)
        return obj
    if isinstance(obj, dict):
        return {k: redact(v, values) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(v, values) for v in obj)
    return obj


# ---------------------------------------------------------------------------------------------
# Linux process controls (no-ops elsewhere)
# ---------------------------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Receive sig when the parent dies (a killed runner must not leave a judge running)."""
    return _prctl(PR_SET_PDEATHSIG, int(sig))


def become_subreaper() -> bool:
    """Orphaned descendants (a kernel's daemon) are re-parented to this process, not to init."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def make_undumpable() -> bool:
    """Other processes of this user can no longer read this one's memory or reopen its files."""
    return _prctl(PR_SET_DUMPABLE, 0)


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, parent pid, group, ...); [] when the
    process is gone. The name is in parentheses and may hold spaces or ')': the fields after the last ')'."""
    try:
        stat = _read_all(f"/proc/{pid}/stat").decode(errors="replace")
    except OSError:
        return []
    return stat[stat.rfind(")") + 2:].split()


def parent_pid(pid: int) -> int | None:
    try:
        return int(stat_fields(pid)[1])
    except (IndexError, ValueError):
        return None


def _proc_table() -> dict[int, int]:
    """pid -> parent pid, for every process visible in /proc."""
    out = {}
    for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
        pp = parent_pid(int(d)) if d.isdigit() else None
        if pp is not None:
            out[int(d)] = pp
    return out


def descendants(pid: int) -> list[int]:
    return [c for c, _ in _table_links(pid)]


def _table_links(pid: int) -> list[tuple[int, int]]:
    """pid's descendants, each with its parent, from one read of every process's stat (_proc_table)."""
    return subtree(_proc_table().items(), pid)


def subtree(links: Iterable[tuple[int, int]], root: int) -> list[tuple[int, int]]:
    """Every (child, parent) link below root among `links` (pairs of child and parent), each pid once: a
    table read file by file can hold a loop where a pid was reused between two reads."""
    children: dict[int, list[int]] = {}
    for c, p in links:
        children.setdefault(p, []).append(c)
    out, seen, todo = [], {root}, [root]
    while todo:
        parent = todo.pop()
        for c in children.get(parent, ()):
            if c not in seen:
                seen.add(c)
                out.append((c, parent))
                todo.append(c)
    return out


def tree(pid: int) -> list[int]:
    """pid's descendants (tree_links, the children alone)."""
    return [c for c, _ in tree_links(pid)]


def _read_all(path: str) -> bytes:
    """A /proc file's bytes, to its end, through os.open and os.read: pathlib's own cost was 3/4 of each
    listing of a job's processes (one or more a time request: a stop and continue 6.8-7.7 ms against
    1.8-1.9 ms for a judge of 40 threads and kernel processes of 60, 60 and 5, on the 2-core dev VM:
    benchmarks/stop_cost.py)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


def tree_links(pid: int) -> list[tuple[int, int]]:
    """pid's descendants, each with its parent, walked through /proc/PID/task/TID/children from pid down (a
    few reads for a job's small tree, where `descendants` reads every process's stat); from the whole
    table where the kernel keeps no such files."""
    out, seen, todo = [], {pid}, [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                kids = _read_all(f"/proc/{p}/task/{tid}/children").split()
            except FileNotFoundError:
                if p == pid:
                    return _table_links(pid)
                continue
            except OSError:
                continue
            for k in map(int, kids):
                if k not in seen:  # a pid reused between two reads: each once, and the walk ends
                    seen.add(k)
                    out.append((k, p))
                    todo.append(k)
    return out


def program(pid: int) -> str:
    """The real path of the program the process runs ('' when it cannot be read: gone, or not this user's)."""
    try:
        return os.path.realpath(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def tagged(tag: str) -> list[int]:
    """Processes whose environment carries TAG_VAR=tag (readable ones: this user's, dumpable)."""
    needle = f"{TAG_VAR}={tag}".encode()
    out = []
    me = os.getpid()
    for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not d.isdigit() or int(d) == me:
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            out.append(int(d))
    return out


def kill_pids(pids: Iterable[int], sig: int = signal.SIGKILL) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_pids(pids: Iterable[int], wait_s: float = 1.0) -> list[int]:
    """SIGSTOP each pid, then wait (up to wait_s) until each is stopped or gone: a signal is acted on when
    its process next runs, which on a loaded machine can be milliseconds later. Returns the pids signalled."""
    sent = []
    for p in pids:
        try:
            os.kill(p, signal.SIGSTOP)
            sent.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    left, deadline = list(sent), time.monotonic() + wait_s
    while left and time.monotonic() < deadline:
        left = [p for p in left if not stopped(p)]
        if left:
            time.sleep(0.0005)
    return sent


def stop_all(listing: Callable[[], list[int]], passes: int) -> list[int]:
    """Stop every pid `listing()` gives, listing again (up to `passes` times) until no new one shows: one
    forked between a listing and its parent's stop would run on. Then each not stopped is sent SIGSTOP
    again: a process traced by another one can be continued by its tracer with the stop withheld, until
    the tracer itself is stopped (a later pass, or later in a listing). Returns the pids signalled."""
    paused: list[int] = []
    for _ in range(passes):
        new = [p for p in listing() if p not in paused]
        if not new:
            break
        paused += stop_pids(new)
    stop_pids([p for p in paused if not stopped(p)])
    return paused


def stopped(pid: int) -> bool:
    """Stopped (by a signal, or traced), or gone: a zombie, or no longer in /proc."""
    return stat_fields(pid)[:1] in ([], ["T"], ["t"], ["Z"], ["X"])


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL pid's group and every descendant (found before the first kill, while the tree holds)."""
    below = descendants(pid)
    kill_group(pid)
    kill_pids([pid, *below])


def reap_children() -> None:
    """Collect exited children (orphans re-parented to a subreaper become its zombies otherwise)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
