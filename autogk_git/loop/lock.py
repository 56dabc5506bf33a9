"""One loop per repository: a lock file held with `flock` for as long as the loop runs.

Taking it is one atomic step: `flock(LOCK_EX | LOCK_NB)` on the file itself, which the kernel grants
to one process only and releases when that process dies, however it dies. So a dead loop's lock is
never stale on this host, and there is no read-then-delete window in which two successors could
both decide the old holder is gone and both take it (the race the former `O_EXCL` + unlink code had).
The file also records who holds it (pid, host, since) for the message a second loop prints, and so a
loop on another machine sharing the repository (flock does not reach across NFS hosts) is refused.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from autogk_git.errors import LockHeld


class RepoLock:
    def __init__(self, state_dir: Path, name: str = "loop.lock") -> None:
        self.path = state_dir / name
        self.recovered: dict | None = None   # the record a dead holder left, when there was one
        self._fd: int | None = None

    def _read(self, fd: int) -> dict:
        try:
            data = os.pread(fd, 4096, 0)
            held = json.loads(data or b"{}")
            return held if isinstance(held, dict) else {}
        except (OSError, ValueError):
            return {}

    def acquire(self) -> "RepoLock":
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(50):  # only a release racing with us (it unlinks the file) makes us go round
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                held = self._read(fd)
                os.close(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                pid = held.get("pid")
                raise LockHeld(f"another autogk loop{f' (pid {pid})' if pid else ''} is running in this repository",
                               f"wait for it, or stop it (kill {pid or 'PID'}); a dead one's lock is recovered")
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                st = None
            if st is None or st.st_ino != os.fstat(fd).st_ino:
                os.close(fd)  # we locked a file its holder unlinked on release: take the new one
                continue
            held = self._read(fd)
            if held and held.get("host") not in (None, me["host"]):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                raise LockHeld(f"the repository is locked by host {held['host']} (pid {held.get('pid')})",
                               f"if that loop is gone, remove {self.path}")
            self.recovered = held or None  # a record left by a holder that died (its flock is gone)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
            self._fd = fd
            return self
        raise LockHeld(f"could not take {self.path}", f"remove {self.path} if no autogk loop is running")

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink()  # while still holding it: a waiter then finds its file gone and retries
        except FileNotFoundError:
            pass
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> "RepoLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
