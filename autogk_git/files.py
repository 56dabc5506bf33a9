"""Reading a user's input file (definition, workloads, kernel, `.autogk.toml`) without hanging or filling memory.

A path may name anything: a FIFO (a plain read blocks forever), `/dev/zero` (a plain read grows without end),
a symlink loop, a folder. Each is refused by its type before a byte is read, and a regular file is read only
up to a bound, so a bad path is one clear error naming it.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from autogk_git.errors import AutogkError

# Bounds on what autogk reads as a target's text files: far above any real one (FlashInfer-Bench's largest
# workloads file, DSA's, is under 1 MiB), low enough that a wrong path fails at once.
MAX_TEXT_BYTES = 64 << 20
MAX_CONFIG_BYTES = 1 << 20

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_bytes(path: Path, what: str, limit: int = MAX_TEXT_BYTES, error: type[AutogkError] = AutogkError) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is `error` naming the path.

    A missing file raises FileNotFoundError, so callers keep their own words for that case."""
    try:
        # O_NONBLOCK: opening a FIFO that no writer holds returns at once instead of blocking; the type
        # check below then refuses it before any read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise error(f"{path}: {what} is a folder, not a file", f"pass the path of {what} itself (a regular file)") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise error(f"{path}: {what} is a symlink loop (too many levels of symbolic links)",
                        f"point {path.name} at a real file (ls -l {path})") from None
        if e.errno == errno.ENOENT:
            raise FileNotFoundError(e.errno, e.strerror, str(path)) from None
        raise error(f"cannot read {what} {path}: {e.strerror}", f"check the path and its permissions: ls -l {path}") from None
    try:
        st = os.fstat(fd)
        for test, kind in _KINDS:
            if test(st.st_mode):
                raise error(f"{path}: {what} is {kind}, not a regular file",
                            f"pass the path of {what} itself (a regular file)")
        if st.st_size > limit:
            raise error(f"{path}: {what} is {st.st_size} bytes, over autogk's limit of {limit} bytes for it",
                        f"check that {path} is {what}, as meant")
        chunks, total = [], 0
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:  # not a regular file after all: never wait on it
                raise error(f"{path}: {what} is not a regular file", f"pass the path of {what} itself (a regular file)") from None
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # a file growing while read (or a size stat lied about)
                raise error(f"{path}: {what} is over autogk's limit of {limit} bytes for it",
                            f"check that {path} is {what}, as meant")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}", f"check the path and its permissions: ls -l {path}") from None
    finally:
        os.close(fd)


def is_regular(path: Path) -> bool:
    """True for a regular file (after symlinks); False for anything else, a loop or a missing path included."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def safe_repo_path(path: str) -> bool:
    """A repository path a checkout can hold: relative, with no empty, `.` or `..` part (git's plumbing
    can write trees that hold others)."""
    return not path.startswith("/") and all(part not in ("", ".", "..") for part in path.split("/"))
