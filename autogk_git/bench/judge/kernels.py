"""The kernel processes, seen from the judge: one per label, started once per job, each answering
requests over a socket pair; the job's limits and the ending of every process a kernel started."""
from __future__ import annotations

import math
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from . import hygiene, launch
from .calls import DPS_HINT, KernelFailure
from .files import write_files
from .phases import phase
from .status import Status

_CHILDREN: list = []  # every RemoteKernel started, so a SIGTERM can end them all
STOP_PASSES = 20  # listings of the processes to stop, each after the last one's were stopped (others_stopped)
_STARTER: list = []  # the judge's kernel starter (forks.Starter), when its job forks its kernel processes
# The judge's own helpers the stop leaves running (torch's shared-memory manager, its child): pid -> the program
# it ran when noted, before any kernel's code ran (note_helpers). Not told by the program alone: a kernel
# can exec torch_shm_manager itself (with LD_PRELOAD, or ptrace its own manager) and run anything in it.
_HELPERS: dict[int, str] = {}


def note_helpers() -> None:
    """Note the processes below the judge now, before any kernel process starts: its own helpers."""
    _HELPERS.clear()
    _HELPERS.update({p: hygiene.program(p) for p in hygiene.tree(os.getpid())})


def set_starter(starter) -> None:
    _STARTER[:] = [starter]


def _death(rc: int | None) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


LIMITS = {"job_deadline": math.inf, "workload_s": math.inf, "job_s": math.inf}
"""Set by main(): the job's end (monotonic) and one workload's share; in-process callers keep inf."""


def timeout_message(doing: str) -> str:
    w, j = LIMITS["workload_s"], LIMITS["job_s"]
    if time.monotonic() >= LIMITS["job_deadline"] - 0.5 or w >= j:
        return f"no result within the job's {j:.0f} s limit (while {doing})"
    return f"no result within {w:.0f} s, one workload's share of the job's {j:.0f} s limit (while {doing})"


def triton_cache(kernel_dir: Path) -> Path:
    """A kernel's own Triton cache: a folder of its folder in this job, so made afresh every job and
    removed with it. A cache kept across jobs is written by the kernel it compiles for, which can swap
    its binaries afterwards: an experiment that left slow binaries of its own kernel in a reused cache
    would run slowly as the next experiment's parent (its next job), and any candidate would look
    faster. The price: the parent compiles again each job (on CPU the interpreter compiles nothing)."""
    return kernel_dir / "triton"


class RemoteKernel:
    """One kernel label, run in its own process (kernel_process.py): started once per job, reused across
    workloads, started again only after it died or was killed at a limit.

    The judge allocates every tensor; the process gets them shared (CPU shared memory or CUDA IPC),
    writes the outputs in place and answers. `deadline` (monotonic seconds) bounds every answer: past
    it the process group is killed and the call is a TIMEOUT."""

    dps = True

    def __init__(self, label: str, files: dict, root: Path, device: str, env: dict, mem_limit: int,
                 emit, startup_s: float = 300.0, warm_profiler: bool = False, timer: str = "") -> None:
        self.label, self.device, self.env, self.mem_limit = label, device, env, int(mem_limit or 0)
        self.warm_profiler = warm_profiler
        self.timer = timer  # the device timer's method, made (and sealed) before the kernel is imported
        # What the kernel's process can see (its folder, file, module name, arguments, the logs beside
        # it) names a random alias, never the label: a kernel that knew it ran as the parent could run
        # slowly there and make every candidate look faster.
        self.alias = "k" + secrets.token_hex(6)
        self.dir = write_files(self.alias, files, root)
        # Its scratch files in its own folder (removed with the judge's), where its sandbox lets it write.
        (self.dir / "tmp").mkdir()
        self.env = dict(env, TMPDIR=str(self.dir / "tmp"), TRITON_CACHE_DIR=str(triton_cache(self.dir)),
                        AUTOGK_JUDGE_TRITON_CACHE=str(hygiene.judge_triton_cache(env)))
        self.sandbox = ""
        self.log = root / f"{self.alias}.log"
        self.emit = emit
        self.startup_s = startup_s
        self.proc: subprocess.Popen | None = None
        self.conn = None
        self.load_error: tuple[Status, str] | None = None
        self.deadline = math.inf
        self.starts = 0
        self.started = time.monotonic()
        _CHILDREN.append(self)

    # -- process life ------------------------------------------------------------------------------

    def start(self) -> None:
        from multiprocessing.connection import Connection
        a, b = socket.socketpair()
        cmd = launch.command("kernel_process", [str(b.fileno()), str(self.dir), self.alias, self.device,
                                                str(self.mem_limit), "1" if self.warm_profiler else "0", self.timer])
        self.proc = None
        if _STARTER:  # a fork of the judge's copy made before it read the job (forks.py)
            try:
                self.proc = _STARTER[0].spawn(f"{__package__}.kernel_process", cmd[5:], str(self.dir), self.env,
                                              str(self.log), b.fileno())
            except OSError:
                _STARTER.clear()
        if self.proc is None:
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(cmd, cwd=str(self.dir), env=self.env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=log, pass_fds=[b.fileno()], start_new_session=True)
        b.close()
        self.conn = Connection(a.detach())
        self.starts += 1
        self.started = time.monotonic()
        self.emit(event="child", label=self.label, pid=self.proc.pid)

    def ready(self) -> tuple[Status, str] | None:
        """Wait for the import; returns why it failed (a raise, no run(), a death, a hang), or None."""
        if self.proc is None:
            self.start()
        deadline = min(self.deadline, time.monotonic() + self.startup_s)
        try:
            reply = self._recv(deadline, "importing kernel.py")
        except KernelFailure as e:
            return (e.status, str(e))
        if reply[0] == "load_error":
            self.stop()
            return (Status(reply[1]), reply[2])
        self.sandbox = reply[1] if len(reply) > 1 else ""
        if len(reply) > 2 and isinstance(reply[2], dict):  # its start, step by step (as it says: a figure only)
            self.emit(event="kernel_start", label=self.label, steps=reply[2],
                      wait_s=round(time.monotonic() - self.started, 3))
        return None

    def ensure(self) -> None:
        """A live process with the kernel imported: started again after a death or a kill."""
        if self.load_error:
            raise KernelFailure(*self.load_error)
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()
            err = self.ready()
            if err:
                raise KernelFailure(*err)

    def stop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None
        if self.proc is not None:
            hygiene.kill_tree(self.proc.pid)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.conn is not None:
            try:
                self.conn.send(("exit",))
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-800:].strip()
        except OSError:
            return ""

    def _recv(self, deadline: float, doing: str, why: str | None = None):
        """The next answer; past `deadline` the process is killed and the call is a TIMEOUT (`why`, or
        the workload's or the job's limit)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise KernelFailure(Status.TIMEOUT, why or timeout_message(doing))
            try:
                if self.conn.poll(min(left, 0.5)):
                    return self.conn.recv()
            except (EOFError, OSError):
                pass
            else:
                if self.proc.poll() is None:
                    continue
            try:
                rc = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                rc = None
            tail = self._tail()
            self.stop()
            raise KernelFailure(Status.COMPILE_ERROR if doing.startswith("importing") else Status.RUNTIME_ERROR,
                                f"the kernel's process died while {doing} ({_death(rc)})" +
                                (f": {tail}" if tail else ""))

    def _send(self, msg: tuple, doing: str):
        if self.device.startswith("cuda"):
            torch.cuda.current_stream().synchronize()  # the poison and inputs are written before it reads
        try:
            self.conn.send(msg)
        except (OSError, ValueError):
            pass  # it died: _recv says how
        return self._recv(self.deadline, doing)

    # -- requests ----------------------------------------------------------------------------------

    def call(self, inputs: list, outs: list) -> list:
        """Run the kernel once; returns what its caller's stream saw (see invoke)."""
        self.ensure()
        snaps = [torch.empty_like(o) for o in outs] if self.device.startswith("cuda") else None
        reply = self._send(("call", inputs, outs, snaps), "running the kernel")
        if reply[0] == "not_dps":
            raise KernelFailure(Status.NOT_DESTINATION_PASSING,
                                f"run() returned a {reply[1]} instead of writing its outputs: {DPS_HINT}")
        if reply[0] == "error":
            raise KernelFailure(Status(reply[1]), reply[2])
        return snaps if snaps is not None else outs

    def time(self, sets: list, outs: list, snaps: list, warm: list, warm_outs: list, method: str,
             settings: dict, witness=None) -> dict:
        """`timed`, with every other process of the job's kernels stopped for the request (others_stopped):
        nothing another label started can run beside this label's timed window, to take the cores or the
        GPU from it (tests/data/cheats/burns_the_cpu_while_the_other_is_timed.py: burners forked at import,
        spinning while their kernel was not called: PASSED at 0.60-0.81x on CPU, tests/test_worker_timed.py
        prints the ratio under -s) or to act between the judge's steps. Work a stopped process had queued on the GPU before
        it stopped still runs: there the defence is CUPTI's record of its kernels, the outputs read at its
        window's end, and the judge's sleep before each window."""
        with others_stopped(self):
            return self.timed(sets, outs, snaps, warm, warm_outs, method, settings, witness)

    def timed(self, sets: list, outs: list, snaps: list, warm: list, warm_outs: list, method: str,
              settings: dict, witness=None) -> dict:
        """Time the kernel on one round's sets; `snaps` receive the timed calls' outputs right after the
        timed window (calls.time_batch). With `witness` (key, real inputs, judge's output copies, longest): `sets`
        are blank until the judge writes `real` into them inside the window, and the judge's own clock
        brackets it (witness.py); its figures come back as timing["witness"]. `longest` (seconds, or
        None): the longest request seen on this workload, which bounds this one's window
        (witness.window_limit_s)."""
        self.ensure()
        w = None
        if witness is not None:
            from .witness import Witness
            if getattr(self, "_witness", None) is None:
                self._witness = Witness(self.device)
            w = self._witness
        t_sent = time.monotonic()
        reply = self._send(("time", sets, outs, snaps, warm, warm_outs, method, settings,
                            w.handles() if w is not None else None), "timing the kernel")
        if w is not None and reply[0] == "armed":
            key, real, copies, longest = witness
            from .witness import STUCK_GRACE_S, window_limit_s
            limit, reckoned = window_limit_s(settings, longest, time.monotonic() - t_sent, len(sets))
            w.open(key, real, sets)
            t_go = time.monotonic()
            end = min(self.deadline, t_go + limit)
            # Past the window's own bound (not the workload's limit): say which window, and why that long.
            why = (f"while timed: the timed window on workload {key[:8]} did not end within {limit:.1f} s of the "
                   f"judge opening it ({reckoned}): the kernel's timed calls, or its reply after them, never came"
                   if end < self.deadline else None)
            reply = self._send_only(("go",), "timing the kernel", end, why)
            if reply[0] == "closed":
                w.close(outs, copies)
                try:
                    reply = self._recv(end, "timing the kernel", why)
                    if reply[0] == "ok" and not w.drained(max(end, time.monotonic() + STUCK_GRACE_S)):
                        self.stop()
                        raise KernelFailure(Status.TIMEOUT, why or timeout_message("timing the kernel"))
                except KernelFailure:
                    if not w.drained(time.monotonic() + STUCK_GRACE_S):
                        # The judge's own stream waits on an end mark a killed process never recorded:
                        # every later device-wide wait here would hang. End this judge (its SIGTERM
                        # handler ends the kernels); the runner records this workload and goes on.
                        sys.stderr.write(f"{why or 'the timed window did not end'}; the judge's stream stayed "
                                         f"blocked on the kernel's end mark after its process was killed\n")
                        sys.stderr.flush()
                        os.kill(os.getpid(), signal.SIGTERM)
                    raise
                if reply[0] == "ok":
                    reply[1]["witness"] = dict(w.result(), request_s=time.monotonic() - t_go)
            elif reply[0] == "ok":  # no end mark: the kernel's process skipped it
                raise KernelFailure(Status.TAMPERED, "while timed: the kernel's process never marked the end "
                                    "of its timed window for the judge's clock")
        elif w is not None and reply[0] == "ok":
            raise KernelFailure(Status.TAMPERED, "while timed: the kernel's process timed its calls without "
                                "opening the judge's gate")
        if reply[0] == "timer_error":
            from .timer import TimerError
            raise TimerError(reply[1])
        if reply[0] == "error":
            raise KernelFailure(Status(reply[1]), reply[2])
        return reply[1]

    def _send_only(self, msg: tuple, doing: str, deadline: float, why: str | None = None):
        """Send without synchronizing this process's stream (inside a window: the judge's work is queued
        on its own stream, ordered by events), then wait for the answer until `deadline`."""
        try:
            self.conn.send(msg)
        except (OSError, ValueError):
            pass
        return self._recv(deadline, doing, why)


def others(kernel: RemoteKernel | None = None) -> list[int]:
    """Every process of the job's kernels but `kernel`'s own (None: all of them): the labels' processes and
    what they started, and what the judge adopted (a kernel's orphans come back to it, the subreaper). Not
    the judge's own helpers: its kernel starter (whose forks are the kernels' processes) and what
    note_helpers found (torch's shared-memory manager of the judge's own)."""
    links = hygiene.tree_links(os.getpid())  # one walk: the kernel's own processes are a subtree of it
    mine = set()
    if kernel is not None and kernel.proc is not None:
        mine = {kernel.proc.pid, *(c for c, _ in hygiene.subtree(links, kernel.proc.pid))}
    helpers = {_STARTER[0].pid} if _STARTER else set()
    return [p for p, _ in links if p not in mine and p not in helpers
            and not (p in _HELPERS and hygiene.program(p) == _HELPERS[p])]


@contextmanager
def others_stopped(kernel: RemoteKernel | None = None):
    """`others(kernel)` stopped (SIGSTOP, waited for until each is) for the block, continued after it: what
    `RemoteKernel.time` times, and the reference the judge times itself (label_window.time_label); hygiene.stop_all
    lists them again until no new one shows, and stops again one its tracer had continued."""
    t = time.perf_counter()
    paused = hygiene.stop_all(lambda: others(kernel), STOP_PASSES)
    phase("stop", t)
    try:
        yield
    finally:
        t = time.perf_counter()
        hygiene.kill_pids(paused, signal.SIGCONT)
        phase("stop", t)


def start_kernels(job: dict, root: Path, device: str, emit, only) -> dict[str, RemoteKernel]:
    """One process per label, all importing at once (their start-up costs overlap with each other's
    and with the judge's own); `ready_kernels` waits for the imports."""
    settings = job.get("settings", {})
    extra = list(settings.get("scrub_env", [])) + list(job.get("scrub_env", []))
    env = hygiene.bytecode_cache(hygiene.scrub_env(os.environ, extra), "kernels")
    kernels = {}
    for label, files in job["sources"].items():
        if only is not None and not any(k.startswith(f"{label}:") for k in only):
            continue
        timed = bool(settings.get("timed")) and job.get("stage") in ("stride", "ab")
        method = settings.get("timer", "cupti") if timed and device.startswith("cuda") else ""
        kernels[label] = RemoteKernel(label, files, root, device, env, int(settings.get("memory_limit_bytes", 0)),
                                      emit, warm_profiler=method == "cupti", timer=method)
    for k in kernels.values():
        k.start()
    return kernels


def ready_kernels(kernels: dict[str, RemoteKernel]) -> None:
    for k in kernels.values():
        k.load_error = k.ready()  # an import that fails once fails for every workload: not retried


def arm(*kernels) -> None:
    """Give each kernel process its time for the next workload (or round of one)."""
    end = min(LIMITS["job_deadline"], time.monotonic() + LIMITS["workload_s"])
    for k in kernels:
        if isinstance(k, RemoteKernel):
            k.deadline = end


def end_children() -> None:
    """Every kernel process, and anything they left behind (re-parented here: this is a subreaper)."""
    for k in _CHILDREN:
        k.stop()
    hygiene.kill_pids(hygiene.descendants(os.getpid()))
    hygiene.reap_children()
