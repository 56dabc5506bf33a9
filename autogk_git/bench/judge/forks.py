"""Processes forked from a copy that has imported torch, not started afresh: each job's judge from the
runner's judge template (`Template`, below), and each kernel process from the judge's starter.

A fresh interpreter that imports torch costs seconds of CPU (5-10 s on this project's 2-core machine on
2026-12-02, `/usr/bin/time python -c "import torch"`), and a job started three: the judge and one process per kernel label. So the judge, as
soon as it has imported torch and before it reads its key and its job from stdin, forks a starter: a
copy of itself that holds nothing secret (no key, no job, no seed; its stdin is closed before the
judge reads a line), with triton imported too where it is installed. Each kernel process is then a
fork of the starter, made on the judge's request over a socket pair, and begins where a fresh one
would after its imports: kernel_process.entry, in the kernel's own folder and environment.

What a fresh process had, a forked one keeps:
- its parent dies with the judge: the starter gets SIGKILL when the judge ends (PR_SET_PDEATHSIG),
  and each kernel process when the starter does (kernel_process sets it, as before);
- orphans of a kernel's process come back to the judge, which stays the subreaper (the starter is none);
- its own session (`setsid`), so its group is killed with it; its own log as stdout and stderr,
  /dev/null as stdin, and no file descriptor but its end of the judge's socket pair;
- the judge's helpers imported afresh: the judge's own modules are dropped from the copy before the
  kernel process imports `kernel_process` (the seal seals what that process imported itself).
What differs: /proc/PID/cmdline and /proc/PID/environ show the judge's start (its argv names the job's
folder and its keys, as the judge's own /proc entry already does), and the kernel's environment lives
in `os.environ`. Used on CPU and on a GPU (the starter forks before anything initialises CUDA: torch is
imported, no device touched); the job setting `kernel_start` = "exec" starts them afresh. On the H200
(2026-12-02) every planted-kernel GPU test of the judge, the witness and the verdict passed with forked
kernel processes (benchmarks/results/session32_h200/), and a job used 0.645x the CPU of starting afresh.

The judge itself is forked the same way, one level up: the runner keeps, per thread, a judge template
(`Template`, `entry`): a fresh interpreter started with the judge's scrubbed environment that imports
torch and triton and then only forks judges on request, each one given its stdin (the key and the job),
its log, folder and environment, and importing the judge's package afresh from its own job folder
(`root`). The template never holds a key, a job or a seed and never runs a kernel. Its tag in /proc is
its own (the runner kills what carries it after each job: the template serves one job at a time). A
loop then imports torch once, not once a job: on this machine's CPU a small job took 0.59 s and
0.47 CPU-s forked against 1.29 s and 1.43 CPU-s afresh (benchmarks/kernel_start.py --start judge).
`[bench] judge_start = "exec"` starts every judge afresh.
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

_MAX_MSG = 1 << 20
_HIGH_FD = 1000  # the received descriptors are moved above this before the child's own are placed


def how(job: dict) -> str:
    """How a job's kernel processes start, for the judge's `--kernel-start`: its `kernel_start` setting,
    else "fork" (CPU and GPU alike). (A judge under cProfile starts them afresh whatever this
    says: a fork would carry its profiler. process.main decides that, in the process profiled.)"""
    return str(job.get("settings", {}).get("kernel_start") or "fork")


class ForkedProcess:
    """A kernel process the starter forked, with the part of subprocess.Popen the judge uses (pid, poll,
    wait; it is ended by pid, hygiene.kill_tree)."""

    def __init__(self, starter: "Starter", pid: int, args: list) -> None:
        self.starter, self.pid, self.args = starter, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.starter.exit_code(self.pid, 0.0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not once it is reaped: its pid may be another process's by then
            os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.05 if end is None else min(0.05, end - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.starter.exit_code(self.pid, left)
        return self.returncode


class Starter:
    """The judge's side: the forked starter and the exits it reports."""

    def __init__(self) -> None:
        self.judge = os.getpid()
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the starter
            try:
                a.close()
                _serve(b, self.judge)
            finally:
                os._exit(70)
        b.close()
        self.pid = pid
        self.sock = a
        self.exits: dict[int, int] = {}
        self.gone = False
        self.lock = threading.Lock()

    answer_s: float | None = None  # how long to wait for the fork's answer (None: as long as it takes)

    def spawn(self, module: str, args: list[str], cwd: str, env: dict, log: str, keep_fd: int | None = None,
              stdin_fd: int | None = None, root: str | None = None) -> ForkedProcess:
        """Fork a process running `module`.entry(args) (module: a full name, importable from the judge's
        sys.path, or from `root` when given) in `cwd` with `env`; its stdout and stderr appended to `log`;
        `keep_fd` (a descriptor of this process) at the same number there; `stdin_fd` as its stdin (else
        /dev/null)."""
        fds = [fd for fd in (stdin_fd, keep_fd) if fd is not None]
        req = json.dumps({"module": module, "args": args, "cwd": cwd, "env": env, "log": log, "fd": keep_fd,
                          "stdin": stdin_fd is not None, "root": root}).encode()
        with self.lock:
            if self.gone:
                raise OSError("the kernel starter is gone")
            socket.send_fds(self.sock, [req], fds)
            end = None if self.answer_s is None else time.monotonic() + self.answer_s
            while True:
                msg = self._read(None if end is None else max(0.0, end - time.monotonic()))
                if msg is None and end is not None and not self.gone and time.monotonic() < end:
                    continue  # only exits came
                if msg is None:
                    raise OSError("the kernel starter died" if self.gone else "the starter did not answer")
                if msg.get("started"):
                    # An exit kept under this pid was an earlier process's: pids are reused (32,768 of
                    # them, and a template outlives thousands of processes), and that stale code read as
                    # this one's at once: a job's judge "exited with code 0" before it began.
                    self.exits.pop(int(msg["started"]), None)
                    return ForkedProcess(self, int(msg["started"]), [module, *args])
                if msg.get("error"):
                    raise OSError(f"the kernel starter could not fork: {msg['error']}")

    def exit_code(self, pid: int, wait_s: float) -> int | None:
        with self.lock:
            if pid not in self.exits and not self.gone:
                self._read(wait_s, until_exit=pid)
            if pid in self.exits:
                return self.exits[pid]
            if self.gone and not os.path.exists(f"/proc/{pid}"):
                return -signal.SIGKILL  # the starter died with it; its status went with the starter
            return None

    def _read(self, wait_s: float | None, until_exit: int | None = None) -> dict | None:
        """Read the starter's messages, keeping exits; return the first other one (None: none came)."""
        end = None if wait_s is None else time.monotonic() + wait_s
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None
            try:
                data = self.sock.recv(_MAX_MSG)
            except OSError:
                data = b""
            if not data:
                self.gone = True
                return None
            msg = json.loads(data)
            if "exit" in msg:
                self.exits[int(msg["exit"])] = int(msg["code"])
                if until_exit is not None and int(msg["exit"]) == until_exit:
                    return None
                if end is not None:  # a timed read: take what else is there, then return
                    end = time.monotonic()
                continue
            return msg


def _serve(sock: socket.socket, judge: int, die_with_parent: bool = True) -> None:
    """The starter's loop: fork a process per request, report each one's exit. It ends when the other
    end of its socket closes (the judge, or the runner of a template, ended); a judge's starter also dies
    with the judge (PR_SET_PDEATHSIG)."""
    from . import hygiene
    if die_with_parent:
        hygiene.die_with_parent(signal.SIGKILL)
    if os.getppid() != judge:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the judge's stdin holds its key and job, unread: this copy drops it now
    os.close(null)
    sys.stdin = open(os.devnull)
    _close_all_but({1, 2, sock.fileno()})
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(s, signal.SIG_DFL)
    try:
        _heavy_import("triton")  # imported once here, beside the judge's own work, not in each kernel process
    except Exception:  # noqa: BLE001 - no triton: each kernel imports what it needs
        pass
    while True:
        while True:  # report the exits first
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})
        ready, _, _ = select.select([sock], [], [], 0.05)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MSG, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            os._exit(0)  # the judge ended
        req = json.loads(data)
        try:
            pid = os.fork()
        except OSError as e:
            _send(sock, {"error": str(e)})
            for fd in fds:
                os.close(fd)
            continue
        if pid == 0:
            code = 70
            try:
                code = _child(sock, req, fds)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # noqa: BLE001 - as an uncaught exception ends a fresh interpreter
                traceback.print_exc()
                code = 1
            finally:
                _exit(code)
        for fd in fds:
            os.close(fd)
        _send(sock, {"started": pid})


def _child(sock: socket.socket, req: dict, fds: list[int]) -> int:
    """In the forked kernel process: become what a fresh `python -c` of launch.command would be."""
    sock.close()
    high = [_above(fd) for fd in fds]
    # Both opened above the descriptors they are placed on: the starter holds no 0 (its _serve closed it),
    # so a log opened as 0 was replaced by stdin next and 1 and 2 became the stdin pipe: a forked judge's
    # stderr went nowhere and a write to it raised (tests/bench/test_runner_template.py). On a GPU that
    # write comes just before a judge whose stream stayed blocked ends itself: the likely reason such a
    # forked judge went on and hung (not yet re-run on the GPU).
    stdin = high.pop(0) if req.get("stdin") else _above(os.open(os.devnull, os.O_RDONLY))
    os.setsid()
    log = _above(os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    os.dup2(stdin, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    keep = {0, 1, 2}
    if req.get("fd") is not None:
        os.dup2(high[0], int(req["fd"]))
        os.set_inheritable(int(req["fd"]), True)
        keep.add(int(req["fd"]))
    _close_all_but(keep)
    if req.get("root"):  # the package as written for this job, not the copy the template started from
        sys.path[0] = req["root"]
    if "tempfile" in sys.modules:  # its folder is found again from this process's own TMPDIR
        sys.modules["tempfile"].tempdir = None
    if "random" in sys.modules:  # its own draws, as a fresh interpreter's: not a copy of its siblings'
        sys.modules["random"].seed()
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.pycache_prefix = req["env"].get("PYTHONPYCACHEPREFIX") or None
    module = req["module"]
    package = module.rsplit(".", 1)[0]
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]  # the judge's modules: the kernel process imports its own, afresh
    importlib.invalidate_caches()
    sys.argv = ["-c", *req["args"]]
    return importlib.import_module(module).entry(list(req["args"]))


def _heavy_import(name: str) -> None:
    """Import a large package with Python's cycle collector held off (the collections it runs as the
    imports allocate walk every object made so far: torch's import 0.99 -> 0.92 CPU-s), then freeze what
    this process holds (`gc.freeze`): the processes forked from it never walk those objects again, nor
    copy their pages to do so. A forked child making 300,000 objects: 0.74 CPU-s as Python comes, 0.89
    with the import's collections held off alone, 0.27 frozen (benchmarks/import_gc.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        importlib.import_module(name)
    finally:
        if was:
            gc.enable()
        gc.freeze()


def _above(fd: int) -> int:
    """fd moved to a number above the ones a child places (0-2, its kept descriptor): never one of them."""
    import fcntl
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, _HIGH_FD)
    os.close(fd)
    return high


def _exit(code: int) -> None:
    """End a forked process as an interpreter ends: exit handlers run, streams flushed, then _exit.

    Less torch's own: each of its operator libraries takes its registrations out of the dispatcher at exit
    (134 finalizers, ~30 ms of CPU a process, a few hundred forked processes a test run), which changes
    nothing a process about to end leaves behind."""
    try:
        import atexit
        import weakref
        for fin, info in list(getattr(weakref.finalize, "_registry", {}).items()):
            if getattr(info.func, "__module__", "") == "torch.library":
                fin.atexit = False
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code if isinstance(code, int) else 1)


def _send(sock: socket.socket, msg: dict) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        os._exit(0)  # the judge is gone


def _close_all_but(keep: set[int]) -> None:
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 256))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


class Template(Starter):
    """The runner's side of a judge template: a fresh interpreter (the judge's scrubbed environment) that
    has imported torch and triton and nothing of any job, then forks each job's judge on request, so a
    job skips the interpreter's start and torch's import (~1.7 s on the H200, ~0.9 CPU-s here).

    No job's code or data ever reaches it: it reads no key, job or seed, runs no kernel, and is made
    undumpable (this user's other processes, a kernel's among them, cannot read or write its memory).
    Each judge forked from it re-imports the judge's package from its own job folder, written afresh for
    that job (`root`), so what a kernel edited on disk is never run, as with a judge started afresh.
    A template that does not answer a request in answer_s (stopped by a signal, say) is ended by the
    runner, and that job's judge starts afresh."""

    answer_s = 60.0  # its first answer waits for its imports: seconds, more on a loaded machine

    def __init__(self, cmd: list[str], env: dict, cwd: str, log: str) -> None:
        from . import hygiene
        self.tag = secrets.token_hex(16)  # in its environment instead of the job's: what it forks shows it
        env = {**env, hygiene.TAG_VAR: self.tag}
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([*cmd, str(b.fileno())], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=out, pass_fds=[b.fileno()], start_new_session=True)
        b.close()
        self.judge = os.getpid()
        self.sock = a
        self.exits = {}
        self.gone = False
        self.lock = threading.Lock()

    def close(self) -> None:
        self.gone = True
        try:
            self.sock.close()  # its loop ends at the socket's end
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def entry(argv: list[str]) -> int:
    """A judge template's process (Template): torch imported, then judges forked on request."""
    sock = socket.socket(fileno=int(argv[0]))
    from . import hygiene
    hygiene.make_undumpable()
    _heavy_import("torch")  # what every judge imports first, imported once here
    _serve(sock, os.getppid(), die_with_parent=False)  # not with the thread that started it: at the socket's end
    return 0
