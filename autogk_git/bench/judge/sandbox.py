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

    Writable caches are this kernel's own only: its Triton cache (TRITON_CACHE_DIR, one folder per
    kernel source, set by the judge: kernels.RemoteKernel) and its TMPDIR. The shared bytecode cache is
    read-only here: a kernel that could write there, or into another kernel's Triton cache, could
    plant a slow compiled copy of its parent's code (the parent's process would load it) and look
    faster than it is. Python skips a bytecode file it cannot write; CUDA's JIT cache is left out."""
    read = ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/run",
            sys.prefix, sys.base_prefix, sys.exec_prefix]
    read += [p for p in sys.path if p and os.path.isdir(p) and ("site-packages" in p or "dist-packages" in p)]
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        read.append(os.environ["PYTHONPYCACHEPREFIX"])
    write = [str(kernel_dir), "/dev"]
    for var in ("TRITON_CACHE_DIR", "TMPDIR"):
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
