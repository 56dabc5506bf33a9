"""Runs the bench judge (the `judge/` package) in a subprocess with a time limit, restarting it past crashes.

The judge starts one process per kernel label (judge/kernel_process.py) and never imports a kernel itself. A
kernel that raises, hangs, fails to compile, crashes at import or kills its process becomes a status
in the result; the judge is restarted on what is left, so one bad workload never costs the others.

What this side adds to the judge's own defences:
- the key: a random key goes to the judge on stdin; every progress line carries an HMAC under it,
  and lines that do not verify (a kernel writing "PASSED" into any file it finds) are dropped;
- limits: the job's limit, and one workload's share of it (`workload_timeout_s` in the job's
  settings, else half the job's): a hang costs its own workload, the rest still run while time is left;
- ending: the judge gets SIGTERM (it ends its kernel processes and whatever they left), then its
  group, every process a kernel started and every process carrying the job's tag gets SIGKILL;
- secrets: the judge's environment is scrubbed (hygiene.scrub_env), and every message in the
  result is redacted with the secret values of this process's environment;
- temp folders: the job's folder is removed whatever happens; stale ones of dead runs are swept.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from autogk_git.bench.judge import folders, forks, hygiene, launch
from autogk_git.bench.judge.status import Status
from autogk_git.env import CUDA_VISIBLE_DEVICES
from autogk_git.errors import BenchError

JUDGE = Path(__file__).resolve().parent / "judge"
SHIPPED = "autogk_judge"  # the package's name in the job's folder (stdlib + torch + triton there)
TERM_GRACE_S = 3.0       # the judge's time to end its kernel processes after SIGTERM
WATCHDOG_GRACE_S = 30.0  # the judge enforces the workload limit itself; this catches a judge that hangs
POLL_S = 0.1
STACKS_WAIT_S = 2.0      # how long the runner waits for an overrunning judge's stacks (SIGUSR1) before ending it

OnProgress = Callable[[str, str, str, float], None]
"""on_progress(label, uuid, status, elapsed_s): called as each (label, workload) gets its status;
elapsed_s is that (label, workload)'s own time, from the judge's start on it (a round: from the job's start). A timed job, whose statuses are final only after its rounds,
also reports on the way: status "checked:STATUS" when a (label, workload) was checked, and label
"round" (uuid "") with status "round N: ..." after each paired round."""


class ProgressReader:
    """Reads the judge's progress file as it grows, keeping only lines whose HMAC verifies."""

    def __init__(self, path: Path, key: bytes) -> None:
        self.path, self.key = path, key
        self.offset = 0
        self.last_seq = 0
        self.forged = 0
        self._partial = b""

    def new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()  # a line still being written (or cut by a crash)
        out = []
        for line in lines:
            rec = self._verify(line)
            if rec is None:
                if line.strip():
                    self.forged += 1
            else:
                out.append(rec)
        return out

    def _verify(self, line: bytes) -> dict[str, Any] | None:
        try:
            obj = json.loads(line)
            seq, rec, mac = int(obj["seq"]), obj["rec"], str(obj["mac"])
        except (ValueError, KeyError, TypeError):
            return None
        want = hmac.new(self.key, f"{seq}:{json.dumps(rec)}".encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, mac) or seq <= self.last_seq:
            return None  # forged, or a genuine line replayed
        self.last_seq = seq
        return rec


def workload_limit(job: dict[str, Any], timeout_s: float) -> float:
    s = job.get("settings", {})
    if s.get("workload_timeout_s"):
        return float(s["workload_timeout_s"])
    return max(5.0, timeout_s / 2)


def _write_judge(d: Path, extra_files: dict[str, Path] | None) -> None:
    """The judge's package, written again before every attempt: a kernel may have edited it.
    extra_files: module file names of the package to take from elsewhere (benchmarks/tamper_gpu.py)."""
    pkg = d / SHIPPED
    pkg.mkdir(exist_ok=True)
    for src in JUDGE.glob("*.py"):
        (pkg / src.name).write_text(src.read_text())
    for name, src in (extra_files or {}).items():
        (pkg / name).write_text(src.read_text())


# What a judge template's imports may read of its environment (the rest, HOME, TMPDIR, the git and
# autogk variables, is read where it is used, from the forked judge's own environment): a template is
# reused only by jobs whose values of these match its own.
IMPORT_VARS = ("PATH", "PYTHON", "LD_", "TORCH", "TRITON", "CUDA", "NVIDIA", "OMP_", "MKL_", "KMP_", "OPENBLAS",
               "LANG", "LC_")
_TEMPLATES: dict[tuple, forks.Template] = {}
_TEMPLATES_LOCK = threading.Lock()  # the parallel loop's threads each ask for theirs


def _template_key(judge_env: dict[str, str]) -> tuple:
    """One template per thread (its jobs one at a time: the template's tag then names only the running
    job's processes) and per environment its imports read."""
    seen = tuple(sorted((k, v) for k, v in judge_env.items()
                        if k.startswith(IMPORT_VARS) and k != CUDA_VISIBLE_DEVICES))
    return (os.getpid(), threading.get_ident(), sys.executable, seen)


def _template(judge_env: dict[str, str], d: Path) -> forks.Template | None:
    """This thread's judge template for judge_env, started from the judge's package as written in `d`
    when there is none (None: it could not start; the judge then starts afresh)."""
    with _TEMPLATES_LOCK:
        return _template_locked(judge_env, d)


def _template_locked(judge_env: dict[str, str], d: Path) -> forks.Template | None:
    alive = {t.ident for t in threading.enumerate()}
    for k in [k for k in _TEMPLATES if k[0] != os.getpid() or k[1] not in alive]:
        gone = _TEMPLATES.pop(k)  # its thread ended (or this is a fork of the process that started it)
        gone.close() if k[0] == os.getpid() else gone.sock.close()
    key = _template_key(judge_env)
    tpl = _TEMPLATES.get(key)
    if tpl is not None and not tpl.gone and tpl.proc.poll() is None:
        return tpl
    if tpl is not None:
        _TEMPLATES.pop(key, None)
        tpl.close()
    try:  # the processes forked from it show its own tag in /proc (forks.Template.tag)
        tpl = forks.Template(launch.command("forks", [], package=SHIPPED, root=d), judge_env, str(d),
                             str(d / "template.log"))
    except OSError:
        return None
    _TEMPLATES[key] = tpl
    return tpl


def _spawn_judge(args: list[str], d: Path, judge_env: dict[str, str], errf: Path, warm: bool):
    """The judge's process (`process.entry(args)` of the package written in `d`): forked from this thread's
    template when `warm` (and it answers), else started afresh. Returns (process, its stdin as a binary
    file, the template's tag or None)."""
    if warm:
        tpl = _template(judge_env, d)
        if tpl is not None:
            r, w = os.pipe()
            try:
                proc = tpl.spawn(f"{SHIPPED}.process", args, str(d), judge_env, str(errf), stdin_fd=r, root=str(d))
            except OSError:
                os.close(w)
                with _TEMPLATES_LOCK:
                    _TEMPLATES.pop(_template_key(judge_env), None)
                tpl.close()
            else:
                return proc, os.fdopen(w, "wb"), tpl.tag
            finally:
                os.close(r)
    cmd = launch.command("process", args, package=SHIPPED, root=d)
    with open(errf, "wb") as err:
        # stdout/stderr to a file, never a pipe: a kernel's daemon holding the pipe open would
        # keep a reader waiting past every limit.
        proc = subprocess.Popen(cmd, cwd=str(d), env=judge_env, stdin=subprocess.PIPE, stdout=err,
                                stderr=err, start_new_session=True)
    return proc, proc.stdin, None


def _judge_stacks(proc, errf: Path) -> str:
    """Ask a judge that overran its limits for every thread's Python stack (process.py registers SIGUSR1
    with faulthandler) and return what it wrote to its stderr, its last 4000 characters."""
    try:
        start = errf.stat().st_size
    except OSError:
        start = 0
    try:
        proc.send_signal(signal.SIGUSR1)
    except (ProcessLookupError, OSError):
        return ""
    end = time.monotonic() + STACKS_WAIT_S
    text, seen = "", 0
    while time.monotonic() < end:
        time.sleep(0.2)
        try:
            with open(errf, "rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        if "most recent call first" in text and len(text) == seen:  # written, and no more coming
            break
        seen = len(text)
    return text[-4000:]


def _end(proc: subprocess.Popen, children: list[int], tag: str) -> None:
    """SIGTERM the judge (it ends its kernel processes), then SIGKILL everything of this job."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=TERM_GRACE_S)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    hygiene.kill_tree(proc.pid)
    for pid in children:
        hygiene.kill_tree(pid)
    hygiene.kill_pids(hygiene.tagged(tag))
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def run_worker(job: dict[str, Any], env: dict[str, str], timeout_s: float,
               extra_files: dict[str, Path] | None = None,
               on_progress: OnProgress | None = None, warm: bool = True) -> dict[str, Any]:
    """Run `job` to completion; return {labels, environment, attempts, records, stderr_tail, ...}.
    warm: fork the judge from this thread's judge template (forks.Template), which the first job that
    asks starts (it costs that job what a judge started afresh costs: one interpreter, one torch import);
    False, or the job setting judge_start = "exec", starts the judge afresh."""
    folders.sweep_stale()
    keys = [f"{label}:{wl['uuid']}" for label in job["sources"] for wl in job["workloads"]]
    settings = job.get("settings", {})
    extra = list(settings.get("scrub_env", [])) + list(job.get("scrub_env", []))
    hide = sorted(set(hygiene.secret_values(os.environ, extra)) | set(hygiene.secret_values(env, extra)),
                  key=len, reverse=True)
    tag = secrets.token_hex(16)
    judge_env = hygiene.bytecode_cache(hygiene.scrub_env(env, extra), "judge")
    judge_env[hygiene.TAG_VAR] = tag
    wl_limit = workload_limit(job, timeout_s)
    warm = warm and settings.get("judge_start") != "exec"
    results: dict[str, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []
    summaries: dict[str, dict[str, Any]] = {}
    environment: dict[str, Any] = {}
    starts: list[dict[str, Any]] = []  # each kernel process's start, step by step (its own figures)
    # Where the job's wall time went on this side: before the judge's first line, the judge's life, after.
    spent = {"launch": 0.0, "judge": 0.0, "end": 0.0}
    t_start = time.monotonic()
    deadline = t_start + timeout_s
    attempts = 0
    forged = 0
    stderr_tail = ""
    d = Path(tempfile.mkdtemp(prefix="autogk-job-"))
    try:
        folders.mark_owner(d)
        job_line = json.dumps(job).encode() + b"\n"  # on the judge's stdin: no file holds it
        while len(results) < len(keys):
            pending = [k for k in keys if k not in results]
            left = deadline - time.monotonic()
            if left <= 1.0:
                for k in pending:
                    results[k] = {"status": Status.TIMEOUT.value, "message": "not run: the job's time limit was spent"}
                break
            attempts += 1
            out = d / f"attempt{attempts}"
            out.mkdir()
            _write_judge(d, extra_files)
            key = secrets.token_hex(32)
            t_launch = time.monotonic()
            args = [str(out), "--only", ",".join(pending), "--deadline", f"{left:.1f}",
                    "--workload-limit", f"{wl_limit:.1f}", "--job-limit", f"{timeout_s:.1f}",
                    "--kernel-start", forks.how(job)]
            errf = d / f"attempt{attempts}.stderr"
            proc, stdin, tpl_tag = _spawn_judge(args, d, judge_env, errf, warm)
            folders.note_pids(d, [proc.pid])
            try:  # stdin stays open while the job runs: the judge's lifeline (process._lifeline)
                stdin.write(key.encode() + b"\n" + job_line)
                stdin.flush()
            except BrokenPipeError:  # the judge died at start: its stderr says why, below
                pass
            reader = ProgressReader(out / "progress.jsonl", key.encode())
            children: list[int] = []
            # (label:uuid) -> since when: labels are checked side by side, so more than one at a time.
            inflight: dict[str, float] = {}
            began: dict[str, float] = {}  # "label:uuid" -> when the judge started on it: each line's own time
            timed_out = False
            hung: list[str] = []

            def handle(rec: dict[str, Any]) -> None:
                nonlocal environment
                ev = rec.get("event")
                if ev == "env":
                    environment = rec["environment"]
                elif ev == "child":
                    children.append(int(rec["pid"]))
                    folders.note_pids(d, [children[-1]])
                elif ev == "kernel_start":
                    starts.append({k2: v for k2, v in rec.items() if k2 != "event"})
                elif ev == "start":
                    inflight[f"{rec['label']}:{rec['uuid']}"] = began[f"{rec['label']}:{rec['uuid']}"] = time.monotonic()
                elif ev == "at":  # timing rounds moved on to this kernel and workload: one at a time
                    inflight.clear()
                    inflight[f"{rec['label']}:{rec['uuid']}"] = time.monotonic()
                elif ev == "done":
                    k = f"{rec['label']}:{rec['uuid']}"
                    results[k] = {k2: v for k2, v in rec.items() if k2 not in ("event", "label", "uuid")}
                    inflight.pop(k, None)
                    if on_progress is not None:
                        on_progress(rec["label"], rec["uuid"], str(rec.get("status")),
                                    time.monotonic() - began.get(k, t_start))
                elif ev == "checked" and on_progress is not None:
                    k = f"{rec['label']}:{rec['uuid']}"
                    on_progress(rec["label"], rec["uuid"], f"checked:{rec.get('status')}",
                                time.monotonic() - began.get(k, t_start))
                elif ev == "round" and on_progress is not None:
                    on_progress("round", "", str(rec.get("message", "")), time.monotonic() - t_start)
                elif ev in ("ab", "timing"):  # a timed stage's summary
                    summaries[ev] = {k2: v for k2, v in rec.items() if k2 != "event"}
                elif ev == "fatal":
                    raise BenchError(f"bench worker: {hygiene.redact(rec['message'], hide)}",
                                     "fix the target's inputs.py")
                elif ev != "end":
                    records.append(rec)

            first_line: float | None = None
            try:
                while True:
                    rc = proc.poll()
                    for rec in reader.new():
                        first_line = first_line or time.monotonic()
                        handle(rec)
                    if rc is not None:
                        break
                    now = time.monotonic()
                    if now > deadline:
                        timed_out = True
                        break
                    hung = [k for k, since in inflight.items() if now - since > wl_limit + WATCHDOG_GRACE_S]
                    if hung:
                        break
                    time.sleep(POLL_S)
            finally:
                t_exit = time.monotonic()
                if (timed_out or hung) and proc.poll() is None:
                    stacks = _judge_stacks(proc, errf)
                    if stacks:
                        records.append({"event": "judge_stacks", "why": "the job's limit" if timed_out else
                                        f"no result on {', '.join(hung)} within {wl_limit:.0f} s", "stacks": stacks})
                _end(proc, children, tag)
                # the inputs it shared with its kernels (a CPU job's), which no ended process unlinks
                folders.drop_shared_memory([proc.pid, *children])
                # and the folder of the judge's shared-memory manager, which the kill left in its TMPDIR
                folders.dead_shm_managers(Path(judge_env.get("TMPDIR") or tempfile.gettempdir()))
                try:
                    stdin.close()
                except OSError:
                    pass
                if tpl_tag:  # what was only forked shows the template's tag, not the job's
                    hygiene.kill_pids(set(hygiene.tagged(tpl_tag)) - {proc.starter.proc.pid})
            for rec in reader.new():
                handle(rec)
            first_line = first_line or t_exit
            spent["launch"] += first_line - t_launch
            spent["judge"] += t_exit - first_line
            spent["end"] += time.monotonic() - t_exit
            forged += reader.forged
            try:
                stderr_tail = errf.read_text(errors="replace")[-3000:]
            except OSError:
                stderr_tail = ""
            if len(results) == len(keys):
                break
            if timed_out:
                why = f"no result within the job's {timeout_s:.0f} s limit"
                for k in keys:
                    if k not in results:
                        results[k] = {"status": Status.TIMEOUT.value, "message": why if k in inflight else
                                      "not run: the job's time limit was spent"}
                break
            if hung:
                for k in hung:
                    results[k] = {"status": Status.TIMEOUT.value, "message": f"no result within {wl_limit:.0f} s, one "
                                  f"workload's share of the job's {timeout_s:.0f} s limit"}
                continue
            if not inflight:
                # The judge died outside any kernel: infrastructure, not a kernel verdict.
                raise BenchError(f"bench worker exited with code {proc.returncode} outside any kernel:\n"
                                 f"{hygiene.redact(stderr_tail, hide)}",
                                 "run `autogk doctor` to check torch and triton")
            for k in inflight:
                results[k] = {"status": Status.RUNTIME_ERROR.value,
                              "message": f"the judge process died (exit code {proc.returncode}) while this "
                                         f"kernel ran: {stderr_tail[-800:].strip()}"}
    finally:
        shutil.rmtree(d, ignore_errors=True)
        hygiene.drop_job_bytecode(judge_env)
    labels: dict[str, dict[str, Any]] = {}
    for label in job["sources"]:
        labels[label] = {wl["uuid"]: results[f"{label}:{wl['uuid']}"] for wl in job["workloads"]}
    if forged:
        records.append({"event": "forged_progress", "lines": forged,
                        "message": f"{forged} progress line(s) failed their HMAC and were ignored"})
    out = {"labels": labels, "environment": environment, "attempts": attempts, "records": records,
           "stderr_tail": stderr_tail if attempts > 1 else "", "kernel_starts": starts,
           "spent_s": {k: round(v, 3) for k, v in spent.items()}, **summaries}
    return hygiene.redact(out, hide)
