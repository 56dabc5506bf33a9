"""The SLURM commands autogk uses, each a named verb; the only module that starts one.

Errors show the command, its exit code and its output, and name the next command to run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from autogk_git.errors import BenchError

TIMEOUT_S = 60.0  # a controller that does not answer within this is down, not slow

PENDING = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED")
RUNNING = ("RUNNING", "CONFIGURING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT")
LIVE = PENDING + RUNNING
"""States of a job that may still produce a result."""


@dataclass(frozen=True)
class JobState:
    """One job as squeue (or sacct) reports it."""

    job_id: str
    state: str         # RUNNING, PENDING, COMPLETED, TIMEOUT, CANCELLED, NODE_FAIL, ...
    reason: str = ""   # squeue's reason: Resources, Priority, ReqNodeNotAvail, ...
    node: str = ""
    comment: str = ""
    restarts: int = 0

    @property
    def live(self) -> bool:
        return self.state in LIVE


def available() -> bool:
    return shutil.which("sbatch") is not None and shutil.which("squeue") is not None


def _run(args: list[str], env: dict[str, str] | None = None, check: bool = True,
         stdin: str | None = None) -> subprocess.CompletedProcess:
    if shutil.which(args[0]) is None:
        raise BenchError(f"{args[0]} not found: the slurm backend needs SLURM's client commands on PATH",
                         "run on the cluster's login node (or `apt-get install slurm-client`), then `autogk doctor`")
    try:
        # In a session of its own: a Ctrl-C in the terminal goes to autogk's process group, and a squeue
        # killed by it mid-answer read as "SLURM no longer knows this job", so the job was never
        # cancelled (autogk cancels its jobs on Ctrl-C itself; TIMEOUT_S bounds a command that hangs).
        out = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
                             start_new_session=True)
    except subprocess.TimeoutExpired:
        raise BenchError(f"`{' '.join(args)}` did not answer within {TIMEOUT_S:.0f} s: is slurmctld up?",
                         "check with `sinfo`, then `autogk doctor`") from None
    if check and out.returncode != 0:
        raise BenchError(f"`{' '.join(args)}` exited {out.returncode}:\n{out.stdout}{out.stderr}".rstrip(),
                         "check the [slurm] settings (partition, account, qos, sbatch) and `sinfo`; "
                         "then `autogk doctor`")
    return out


SUBMIT_TRIES = 4  # an sbatch a busy controller did not answer is tried again, 1, 2, then 3 s later
# What sbatch says when the controller was busy or away, not when the job was refused.
TRANSIENT = ("socket timed out", "unable to contact slurm controller", "resource temporarily unavailable",
             "connection refused", "did not answer within")


def submit(script: str, options: list[str], env: dict[str, str]) -> str:
    """sbatch a batch script (its text); returns the job id. A submission the controller did not answer
    (its RPC timed out: the job may be queued all the same) looks for a live job with the options'
    `--comment` first, then submits again; a refusal (a bad partition, say) is raised at once."""
    comment = next((o.split("=", 1)[1] for o in options if o.startswith("--comment=")), None)
    said = ""
    for attempt in range(SUBMIT_TRIES):
        try:
            proc = _run(["sbatch", "--parsable", *options], env=env, check=False, stdin=script)
            if proc.returncode == 0:
                return proc.stdout.strip().split(";")[0]
            said = f"`sbatch {' '.join(options)}` exited {proc.returncode}:\n{proc.stdout}{proc.stderr}".rstrip()
        except BenchError as e:
            if "not found" in e.message:
                raise
            said = e.message  # it did not answer within TIMEOUT_S
        if not any(t in said.lower() for t in TRANSIENT):
            break
        try:
            queued = find(comment) if comment else None
        except BenchError:
            queued = None
        if queued is not None:
            return queued.job_id
        if attempt < SUBMIT_TRIES - 1:
            time.sleep(1.0 + attempt)
    raise BenchError(said,
                     "check the [slurm] settings (partition, account, qos, gres, sbatch lines), then `autogk doctor`")


_FIELDS = "JobID:|,State:|,Reason:|,NodeList:|,Comment:|,RestartCnt:|"


def _parse(line: str) -> JobState | None:
    parts = line.split("|")
    if len(parts) < 6 or not parts[0].strip():
        return None
    job_id, state, reason, node, comment, restarts = (p.strip() for p in parts[:6])
    return JobState(job_id, state.split()[0] if state else "", "" if reason == "None" else reason,
                    "" if node in ("", "(null)") else node, "" if comment == "(null)" else comment,
                    int(restarts) if restarts.isdigit() else 0)


def _squeue_job(job_id: str) -> subprocess.CompletedProcess:
    """squeue's answer on one job, any state (its exit code and stderr are the caller's to read)."""
    return _run(["squeue", "-h", "-t", "all", "-j", job_id, "-O", _FIELDS], check=False)


def query(job_id: str) -> JobState | None:
    """The job's state (squeue, then sacct where accounting keeps it); None when SLURM no longer knows it."""
    out = _squeue_job(job_id)
    if out.returncode == 0:
        for st in map(_parse, out.stdout.splitlines()):
            if st and st.job_id == job_id:
                return st
    if shutil.which("sacct"):
        acct = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "JobID,State,Reason,NodeList,Comment,Restarts"],
                    check=False)
        for line in acct.stdout.splitlines():
            parts = line.split("|")
            if acct.returncode == 0 and len(parts) >= 6 and parts[0] == job_id:
                return _parse("|".join(parts[:6]))
    return None


def find(comment: str, user: str | None = None) -> JobState | None:
    """A live job of this user whose comment is `comment` (left by an earlier, interrupted run)."""
    user = user or _whoami()
    out = _run(["squeue", "-h", "-u", user, "-O", _FIELDS], check=False)
    for line in out.stdout.splitlines():
        st = _parse(line)
        if st and st.comment == comment and st.live:
            return st
    return None


def _whoami() -> str:
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name


CANCEL_TRIES = 5  # scancel refused (a busy controller times out its RPC) is tried again, a second apart


def cancel(job_id: str) -> None:
    """scancel a job until squeue no longer lists it live; a job that already ended is not an error. One
    scancel whose RPC a busy controller timed out left the job queued (a loaded machine, 2026-12-05)."""
    for attempt in range(CANCEL_TRIES):
        try:
            _run(["scancel", job_id], check=False)
            sq = _squeue_job(job_id)
        except BenchError:  # no answer within TIMEOUT_S: try again
            sq = None
        if sq is not None and sq.returncode == 0:
            if not any(st and st.job_id == job_id and st.live for st in map(_parse, sq.stdout.splitlines())):
                return
        elif sq is not None and "invalid job id" in (sq.stderr or "").lower():
            return  # SLURM no longer knows it: long gone
        if attempt < CANCEL_TRIES - 1:
            time.sleep(1.0)


def partitions() -> dict[str, dict[str, str]]:
    """sinfo's partitions: {name: {avail, nodes, gres, state, cpus, default}}."""
    out = _run(["sinfo", "-h", "-o", "%P|%a|%D|%G|%T|%c"])
    parts: dict[str, dict[str, str]] = {}
    for line in out.stdout.splitlines():
        p = line.split("|")
        if len(p) < 6:
            continue
        name = p[0].rstrip("*")
        rec = parts.setdefault(name, {"avail": p[1], "nodes": "0", "gres": "", "states": "", "cpus": p[5],
                                      "default": str(p[0].endswith("*"))})
        rec["nodes"] = str(int(rec["nodes"]) + (int(p[2]) if p[2].isdigit() else 0))
        rec["states"] = ",".join(filter(None, [rec["states"], p[4]]))
        if p[3] not in ("(null)", "") and p[3] not in rec["gres"]:  # node groups with different GPUs
            rec["gres"] = ",".join(filter(None, [rec["gres"], p[3]]))
    return parts
