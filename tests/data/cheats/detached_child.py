"""Cheat: at import, starts a daemon in its own session (double fork + setsid) that outlives its
parent, writes the daemon's pid where AUTOGK_TEST_PIDFILE says, then hangs in run()."""
import os
import time


def _daemon() -> None:
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    path = os.environ.get("AUTOGK_TEST_PIDFILE")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(3600)
    os._exit(0)


_daemon()


def run(x, bias, scale, out):
    time.sleep(3600)
