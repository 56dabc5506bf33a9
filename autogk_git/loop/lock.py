"""One loop per repository: an exclusive lock file that a dead process's successor recovers."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from autogk_git.errors import LockHeld


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RepoLock:
    def __init__(self, state_dir: Path, name: str = "loop.lock") -> None:
        self.path = state_dir / name
        self.recovered: dict | None = None

    def acquire(self) -> "RepoLock":
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    held = json.loads(self.path.read_text() or "{}")
                except (json.JSONDecodeError, FileNotFoundError):
                    held = {}
                same_host = held.get("host") == me["host"]
                if held and same_host and _alive(int(held.get("pid", -1))):
                    raise LockHeld(f"another autogk loop (pid {held['pid']}) is running in this repository",
                                   f"wait for it, or stop it (kill {held['pid']}); a dead one's lock is recovered")
                if held and not same_host:
                    raise LockHeld(f"the repository is locked by host {held['host']} (pid {held.get('pid')})",
                                   f"if that loop is gone, remove {self.path}")
                self.recovered = held
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            return self
        raise LockHeld(f"could not take {self.path}", f"remove {self.path} if no autogk loop is running")

    def release(self) -> None:
        try:
            held = json.loads(self.path.read_text())
            if held.get("pid") == os.getpid():
                self.path.unlink()
        except (FileNotFoundError, json.JSONDecodeError):
            pass

    def __enter__(self) -> "RepoLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
