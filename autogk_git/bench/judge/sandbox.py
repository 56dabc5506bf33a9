"""What a kernel's process may read, write and signal: a Landlock domain (Linux 5.13+, no privileges
needed) it enters before the kernel is imported, and never leaves.

A kernel runs as the same user as the judge and autogk, so without this it can read what they write:
the job (both labels' sources, the seed), the judge's progress record (which label is timed now, the
other process's pid), the project's git repository (the trunk's kernel: "am I the parent?"), and it
can signal its sibling. Inside the domain it can read the system's and Python's libraries, its own
folder, /dev, /proc and /sys (CUDA needs them), and write only its own folder, its own Triton cache and
/dev; it cannot open a TCP connection, and (Landlock ABI 6+) it cannot signal a process outside its
domain, which its sibling and the judge are. /proc stays readable: another process's command line can
be read there, which names no label (aliases are random).

Where Landlock is missing (an old kernel, a container that filters the syscalls) the process runs
without it and the judge's environment record says so: `sandbox` is "landlock ABI N" or "none: why".

Root's powers go too (`drop_powers`). On the GPU machines the judge runs as root, so a kernel's
process held every capability: through NVML (ctypes on libnvidia-ml) it could lock the GPU's clocks
or power limit low after its own calls, and its parent's window would run on the slower GPU, which
every timer, the judge's clock included, would count as the parent's time. The NVIDIA driver allows
those settings to CAP_SYS_ADMIN only. The process drops every capability (effective, permitted,
inheritable, ambient and the bounding set) and locks root's regaining them on exec (securebits),
after CUDA has started and before the kernel is imported; the record then ends "; capabilities
dropped" (or "; capabilities kept: why"). A process without capabilities (a user's own machine)
has none to drop and the record says nothing more. Not covered: CUDA's own driver handles, opened
before the drop, with the privilege they were opened with (reaching them means raw driver calls in
native code: see the README's threat model).
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys
from pathlib import Path

# Syscall numbers of landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: the same on
# x86_64 and aarch64 (the generic table).
_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_CAP_AMBIENT_RAISE, each with its lock, and the lock
# of SECBIT_KEEP_CAPS (left off): uid 0 gains nothing on exec, and none of it can be undone.
_SECUREBITS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7)
_CAPS = ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb")

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
READ = EXECUTE | READ_FILE | READ_DIR
# Every file-system right of each ABI: a right the ruleset handles is denied unless a rule grants it.
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(k for k in _FS_BY_ABI if k <= abi)]


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none."""
    nums = _SYSCALLS.get(platform.machine())
    if nums is None or not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    v = libc.syscall(nums[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(v))


def kernel_paths(kernel_dir: Path) -> tuple[list[str], list[str]]:
    """(read, read-write) folders of a kernel's process: libraries, its folder, devices, its caches.

    Writable caches are this kernel's own only: its Triton cache (TRITON_CACHE_DIR, a folder of its own
    folder, made afresh each job: kernels.triton_cache) and its TMPDIR. The shared bytecode cache is
    read-only here: a kernel that could write there, or into another kernel's Triton cache, could
    plant a slow compiled copy of its parent's code (the parent's process would load it) and look
    faster than it is. Python skips a bytecode file it cannot write; CUDA's JIT cache is left out. A job
    profiled on purpose (AUTOGK_PROFILE_DIR) lets each process write its profile there too."""
    read = ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/run",
            sys.prefix, sys.base_prefix, sys.exec_prefix]
    read += [p for p in sys.path if p and os.path.isdir(p) and ("site-packages" in p or "dist-packages" in p)]
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        read.append(os.environ["PYTHONPYCACHEPREFIX"])
    write = [str(kernel_dir), "/dev"]
    # AUTOGK_PROFILE_DIR: set only by a person profiling a job (benchmarks/profile_job.py), where the process
    # writes its cProfile file at exit (profiling.py); without it no kernel's profile was ever written
    for var in ("TRITON_CACHE_DIR", "TMPDIR", "AUTOGK_PROFILE_DIR"):
        if os.environ.get(var):
            write.append(os.environ[var])
    return read, write


def restrict(read: list[str], write: list[str]) -> str:
    """Enter a Landlock domain allowing only these folders (and no TCP, no signals out); returns
    "landlock ABI N", or "none: why" when the domain could not be made (then nothing is restricted)."""
    version = abi()
    if version < 1:
        return "none: this kernel has no Landlock"
    libc = ctypes.CDLL(None, use_errno=True)
    create, add_rule, restrict_self = _SYSCALLS[platform.machine()]
    fs = _fs_rights(version)
    attr = _RulesetAttr(fs, (_NET_BIND_TCP | _NET_CONNECT_TCP) if version >= 4 else 0,
                        (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if version >= 6 else 0)
    size = 8 if version < 4 else (16 if version < 6 else 24)
    rs = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if rs < 0:
        return f"none: landlock_create_ruleset failed (errno {ctypes.get_errno()})"
    try:
        for folders, rights in ((read, READ & fs), (write, fs)):
            for folder in folders:
                try:
                    if rights == fs:  # a cache folder that does not exist yet could not be made later
                        Path(folder).mkdir(parents=True, exist_ok=True)
                    fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue  # a folder this machine does not have
                try:
                    rule = _PathBeneath(rights, fd)
                    if libc.syscall(add_rule, ctypes.c_int(rs), ctypes.c_int(_RULE_PATH_BENEATH),
                                    ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                        return f"none: landlock_add_rule({folder}) failed (errno {ctypes.get_errno()})"
                finally:
                    os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) != 0:
            return f"none: PR_SET_NO_NEW_PRIVS failed (errno {ctypes.get_errno()})"
        if libc.syscall(restrict_self, ctypes.c_int(rs), ctypes.c_uint32(0)) < 0:
            return f"none: landlock_restrict_self failed (errno {ctypes.get_errno()})"
    finally:
        os.close(rs)
    return f"landlock ABI {version}"


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def capabilities() -> dict[str, int]:
    """This process's capability sets as /proc/self/status gives them (empty where it does not)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: int(v, 16) for k, _, v in (line.partition(":\t") for line in lines) if k in _CAPS}


def drop_powers() -> str:
    """Drop every capability this process holds, for good: "" when it held none (nothing to say),
    "; capabilities dropped" when none is left in any set (the bounding set too, so root's exec regains
    none), or "; capabilities kept: SETS (why)" when the kernel refused a step. Each step is tried
    whatever the one before did: a container without CAP_SETPCAP still empties the other sets."""
    held = capabilities()
    if not any(held.values()):
        return ""
    libc = ctypes.CDLL(None, use_errno=True)

    def prctl(*args: int) -> bool:
        return libc.prctl(*(ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:5])) == 0

    failed = []
    if not prctl(_PR_SET_SECUREBITS, _SECUREBITS):
        failed.append(f"PR_SET_SECUREBITS errno {ctypes.get_errno()}")
    prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)  # a kernel before 4.3 has no ambient set
    for cap in range(held.get("CapBnd", 0).bit_length()):
        if held["CapBnd"] >> cap & 1 and not prctl(_PR_CAPBSET_DROP, cap):
            failed.append(f"PR_CAPBSET_DROP errno {ctypes.get_errno()}")
            break
    data = (_CapData * 2)()  # two 32-bit halves, every set empty
    if libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data) != 0:  # _LINUX_CAPABILITY_VERSION_3
        failed.append(f"capset errno {ctypes.get_errno()}")
    left = sorted(k for k, v in capabilities().items() if v)
    return f"; capabilities kept: {', '.join(left)} ({'; '.join(failed) or 'still held'})" if left \
        else "; capabilities dropped"
